"""The official MCP SDK's client, talking to `sagemem mcp` over stdio as a harness does."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sagemem import MemoryStore


def connect(target: MemoryStore | Path) -> Any:
    """A client of a `sagemem mcp` process: serving one store (`--dir`, `--state-dir`), or the
    memory set of a working directory."""
    from mcp import Client, StdioServerParameters

    if isinstance(target, MemoryStore):
        args = ["--dir", str(target.memory_dir), "--state-dir", str(target.state_dir)]
        cwd = target.memory_dir.parent
    else:
        args, cwd = [], target
    params = StdioServerParameters(
        command=sys.executable, args=["-P", "-m", "sagemem", *args, "mcp"], cwd=str(cwd), env=dict(os.environ)
    )
    return Client(params)
