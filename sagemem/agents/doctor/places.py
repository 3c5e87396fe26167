"""Where doctor looks: the project (`cwd`), the home folder, the environment, the system-wide
settings files, how long an external step may take; and the project's git root, where Codex
and Claude Code anchor a project.

The checks take a `Places` rather than asking the process for its folders, so that one run
sees one environment and a test can point doctor at a home of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...store.native import claude_policy
from ...store.native import git_main_root as git_main_root  # shared with the library's scopes
from ...store.native import git_root as git_root


def _system_file(mac: str, linux: str, name: str) -> Path:
    if sys.platform == "darwin":
        return Path("/Library/Application Support", mac, name)
    if os.name == "nt":
        return Path(os.environ.get("ProgramFiles", r"C:\Program Files"), mac, name)
    return Path("/etc", linux, name)


@dataclass(frozen=True)
class Places:
    """Where doctor looks (the project is `cwd`) and how long each external step may take."""

    cwd: Path
    home: Path
    env: Mapping[str, str]
    claude_policy: Path = field(default_factory=claude_policy)
    gemini_system: Path = field(
        default_factory=lambda: _system_file("GeminiCli", "gemini-cli", "settings.json")
    )
    timeout: float = 15.0  # seconds for one MCP start, or one conversation with codex app-server
    hook_timeout: float = 30.0  # at most, for one hook run (else the hook's own timeout)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cwd", self.cwd.resolve())  # what a harness's getcwd() says

    @classmethod
    def here(cls, **given: Any) -> Places:
        return cls(cwd=Path.cwd(), home=Path.home(), env=dict(os.environ), **given)
