"""The opt-in end-to-end harness: the real agent CLIs from npm, a fake model API on 127.0.0.1.
See docs/e2e.md."""
