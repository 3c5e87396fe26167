"""Where the memory directory and the state directory are: the one place that reads the environment.

Memory directory, first match wins: an explicit path (`--dir`), `SAGEMEM_DIR`, `SAGE_MEM_DIR`
(for people moving from sage-mem), the nearest `.sagemem/memory` walking up from the
current directory (project memory, found the way git finds `.git`), else
`~/.sagemem/memory` (user memory). State directory: an explicit path (`--state-dir`),
`SAGEMEM_STATE_DIR`, else `<memory dir>/.sagemem`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROJECT_DIR = Path(".sagemem") / "memory"
STATE_DIR_NAME = ".sagemem"


@dataclass(frozen=True)
class Location:
    """A resolved memory directory, its state directory, and the rules that chose them."""

    memory_dir: Path
    state_dir: Path
    rule: str
    state_rule: str

    def to_dict(self) -> dict[str, str]:
        return {
            "memory_dir": str(self.memory_dir),
            "state_dir": str(self.state_dir),
            "rule": self.rule,
            "state_rule": self.state_rule,
        }


def user_memory_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / PROJECT_DIR


def locate(
    memory_dir: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Location:
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    found, rule = _memory_dir(memory_dir, env, cwd)
    if state_dir is not None:
        state, state_rule = _absolute(state_dir, cwd), "--state-dir"
    elif env.get("SAGEMEM_STATE_DIR"):
        state, state_rule = _absolute(env["SAGEMEM_STATE_DIR"], cwd), "SAGEMEM_STATE_DIR"
    else:
        state, state_rule = found / STATE_DIR_NAME, "inside the memory dir"
    return Location(found, state, rule, state_rule)


def _memory_dir(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path
) -> tuple[Path, str]:
    if explicit is not None:
        return _absolute(explicit, cwd), "--dir"
    for name in ("SAGEMEM_DIR", "SAGE_MEM_DIR"):
        if env.get(name):
            return _absolute(env[name], cwd), name
    user = user_memory_dir(env)
    for folder in (cwd, *cwd.parents):
        candidate = folder / PROJECT_DIR
        if candidate.is_dir() and candidate != user:
            return candidate, f"project memory ({PROJECT_DIR} found above the current directory)"
    return user, "user memory (~/.sagemem/memory)"


def _absolute(path: str | os.PathLike[str], cwd: Path) -> Path:
    expanded = Path(os.path.expanduser(os.fspath(path)))
    return expanded if expanded.is_absolute() else cwd / expanded
