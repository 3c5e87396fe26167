"""The `sagemem` program's entry point (also `python -m sagemem`).

A hook runs on every prompt, so `sagemem hook ...` goes straight to `hooks` and never imports
click or the command modules; only `sagemem hook --help` (or `-h`), which no harness sends,
goes to click, for the hook command's help.
"""

from __future__ import annotations

import sys

# What asks for the hook's help rather than running it. A person typing it, never a harness:
# a harness's hook line is `hook HARNESS EVENT`, and the fast path would answer anything else
# with silence and exit 0 (fail open), which is no help. The hook command takes both (click).
HELP = ("--help", "-h")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hook" and not any(arg in HELP for arg in sys.argv[2:]):
        raise SystemExit(_hook(sys.argv[2:]))
    from .cli import main as cli

    cli()


def _hook(argv: list[str]) -> int:
    """A hook: run by the resident process when one answers (`agents/relay.py`), else here;
    when none was there, one is started for the next hooks, once this one has answered."""
    from .agents import relay

    status = relay.run(argv)
    if status is not None:
        return status
    from .agents.hooks import main as hook

    status = hook(argv)
    if relay.outcome == "absent":
        try:
            from .agents.daemon import start

            start()
        except Exception:  # noqa: BLE001, S110 - the next hook tries again; this one has answered
            pass
    return status


if __name__ == "__main__":
    main()
