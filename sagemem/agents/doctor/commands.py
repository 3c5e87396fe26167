"""Which command lines doctor runs, and where their programs are.

A command is run only when it has the form sagemem's own entries have (`<sagemem> hook
<harness> <event>` or `<python> -m sagemem ...`, with nothing else on the line but
sagemem's `--dir`/`--state-dir` options): a cloned project's settings are not a script for
doctor to run. A program is looked up as the harness's shell would find it, and one found
only because a virtual environment is active in this shell is told apart: a harness
started from another shell would not find it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from .places import Places
from .settings import Hook

_PYTHON = re.compile(r"python[0-9.]*(?:\.exe)?|pythonw(?:\.exe)?", re.I)
_SAGEMEM = re.compile(r"sagemem(?:\.exe)?", re.I)


def sagemem_rest(words: list[str]) -> list[str] | None:
    """What follows sagemem's global options when `words` run sagemem the way its own
    entries do (`<sagemem> ...`, `<python> -m sagemem ...`, the program by absolute path or
    bare name); None for anything else."""
    if not words or ("/" in words[0] or os.sep in words[0]) and not Path(words[0]).is_absolute():
        return None
    name = Path(words[0]).name
    if _SAGEMEM.fullmatch(name):
        rest = words[1:]
    elif _PYTHON.fullmatch(name) and words[1:3] == ["-m", "sagemem"]:
        rest = words[3:]
    elif _PYTHON.fullmatch(name) and words[1:4] == ["-P", "-m", "sagemem"]:
        rest = words[4:]
    else:
        return None
    while len(rest) > 1 and rest[0] in ("--dir", "--state-dir"):
        rest = rest[2:]
    return rest


def shadowed(words: list[str], places: Places) -> str | None:
    """The project's own `sagemem` that `<python> -m sagemem` (without `-P`) would import
    instead of the installed one: `-m` puts the working directory first on the path, and the
    harness runs the hook in the project."""
    if len(words) < 3 or not _PYTHON.fullmatch(Path(words[0]).name) or words[1:3] != ["-m", "sagemem"]:
        return None
    for candidate in (places.cwd / "sagemem", places.cwd / "sagemem.py"):
        if candidate.exists() or candidate.is_symlink():
            return str(candidate)
    return None


def hook_words(hook: Hook) -> list[str] | None:
    """The hook's command as words, if it is one doctor runs (see the module docstring)."""
    try:
        words = shlex.split(hook.command)
    except ValueError:
        return None
    rest = sagemem_rest(words)
    if rest is None or shlex.join(words) != hook.command.strip():
        return None  # quoting, pipes, `&&`, variables: not a line sagemem writes
    return words if rest[:2] == ["hook", hook.harness] and len(rest) <= 3 else None


@dataclass(frozen=True)
class Resolved:
    """Where a command's program is; `problem` says why it would not start; `venv` names
    the virtual environment it is found in only because that is active in this shell."""

    program: str
    path: Path | None
    problem: str = ""
    venv: str = ""


def resolve(program: str, places: Places) -> Resolved:
    """`program` as a harness's shell finds it: a path as it is, a bare name on PATH."""
    if "/" in program or os.sep in program:
        path = Path(program)
        if not path.exists():
            return Resolved(program, None, "does not exist")
        if not path.is_file() or not os.access(path, os.X_OK):
            return Resolved(program, None, "is not an executable file")
        return Resolved(program, path)
    search = places.env.get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is None:
        return Resolved(program, None, "is not on PATH")
    venv = places.env.get("VIRTUAL_ENV", "")
    if venv:
        scripts = Path(venv) / ("Scripts" if os.name == "nt" else "bin")
        rest = os.pathsep.join(p for p in search.split(os.pathsep) if p and Path(p) != scripts)
        if shutil.which(program, path=rest) is None:
            return Resolved(program, Path(found), venv=venv)
    return Resolved(program, Path(found))


def interpreter(program: Path, path: str | None = None) -> str:
    """The Python a sagemem script runs with: the program itself, or its `#!` line's (an
    `env` line's program looked up on `path`, the harness's PATH)."""
    if _PYTHON.fullmatch(program.name):
        return str(program)
    try:
        with open(program, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        first = b""
    words = first[2:].decode("utf-8", "replace").split() if first.startswith(b"#!") else []
    if len(words) > 1 and Path(words[0]).name == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), words[-1])
        return shutil.which(named, path=path) or named
    return words[0] if words else f"the Python of {program}"
