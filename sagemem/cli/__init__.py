"""The `sagemem` command: a thin layer over `MemoryStore`, one module per group of commands.

Each command opens the store, calls one method and prints the result (`--json` for machines).
"""

from . import care, dream, integrate, memories, retrieval  # noqa: F401 - importing them registers their commands
from .base import cli, main

__all__ = ["cli", "main"]
