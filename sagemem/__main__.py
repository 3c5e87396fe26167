"""The `sagemem` program's entry point (also `python -m sagemem`).

A hook runs on every prompt, so `sagemem hook ...` goes straight to `hooks` and never imports
click or the command modules.
"""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from .agents.hooks import main as hook

        raise SystemExit(hook(sys.argv[2:]))
    from .cli import main as cli

    cli()


if __name__ == "__main__":
    main()
