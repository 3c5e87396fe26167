"""The command that runs this sagemem: what `install` registers as a hook, and what the text
for the agent (gap cards, truncation markers) tells it to type.

A bare `sagemem` is right only where every shell finds this same script on PATH. A sagemem
installed in a virtual environment is found only while that environment is active, so an
agent started from another shell would run no memory at all, without a trace: there the
command is the script's absolute path. Both uses come from the one rule below, so the hook
and the text it prints never disagree.

A project's own settings files are committed and run on every teammate's machine, where
this machine's paths mean nothing: there the command is `portable_line`'s, which finds the
launcher `install` keeps in each user's home (`~/.sagemem/bin/sagemem`, this machine's
sagemem), else a `sagemem` on PATH, and otherwise says what to do.

A hook runs on every prompt, so `install` registers it as `hook_command`'s words instead: this
Python, told to run sagemem's entry point. The console script pip writes imports `re` (to
tidy its own name on Windows), about a third of a bare interpreter's start, before sagemem
runs at all.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from pathlib import Path

MODULE = ("-P", "-m", "sagemem") if sys.version_info >= (3, 11) else ("-m", "sagemem")
# What a hook's Python runs: the console script's work, without its `import re`.
HOOK_CODE = "from sagemem.__main__ import main; main()"
_PLAIN = re.compile(r"[\w@%+=:,./-]+")
LAUNCHER = Path(".sagemem") / "bin" / "sagemem"  # under the home folder
_PORTABLE_HEAD = f's="$HOME/{LAUNCHER.as_posix()}"; [ -x "$s" ] || s=$(command -v sagemem) || '


@cache
def sagemem_command() -> tuple[str, ...]:
    """The words of the command: `("sagemem",)`, `("/abs/.venv/bin/sagemem",)`, or
    `(python, "-P", "-m", "sagemem")` where no script is installed (`-P`, on Python 3.11 and
    later: `-m` alone puts the working directory first on the path, and a project's own
    `sagemem/` folder would run instead)."""
    script = _script()
    if script is None:  # a `sagemem` on PATH may be another install: name this one's Python
        return (sys.executable, *MODULE)
    if not in_virtual_env() and _same(_which("sagemem"), script):
        return ("sagemem",)
    return (str(script),)


@cache
def hook_command() -> tuple[str, ...]:
    """The words that run a hook: `(python, "-P", "-c", HOOK_CODE)`, where `-P` keeps the
    project's folder off the path (Python 3.11 and later: before, `-c` would put it first,
    and a project's own `sagemem/` would run); elsewhere, and on Windows (no `#!`: the
    script is an .exe), `sagemem_command()`."""
    if os.name == "nt" or sys.version_info < (3, 11) or not os.path.isabs(sys.executable):
        return sagemem_command()
    if not Path(sys.executable).with_name("sagemem").is_file():
        return sagemem_command()  # a launcher that finds sagemem itself (pex, a Nix wrapper)
    return (sys.executable, "-P", "-c", HOOK_CODE)


def command_line(*args: str, words: tuple[str, ...] | None = None) -> str:
    """`words` (by default `sagemem_command()`) and `args` as one shell line."""
    words = sagemem_command() if words is None else words
    if all(_PLAIN.fullmatch(word) for word in words):
        return " ".join([*words, *args])
    import shlex  # a path with blanks or quotes: rare, and then worth the import

    return " ".join([shlex.join(words), *args])


def portable_line(*args: str, harness: str = "") -> str:
    """A POSIX shell line running sagemem with `args` on any machine: the launcher in the
    home folder, else `sagemem` on PATH, else a message on stderr and exit 1 (a harness
    shows a failed hook and goes on)."""
    again = " ".join(["sagemem install", *([harness] if harness else [])])
    missing = f"sagemem is not installed on this machine: install it, then run {again}"
    return f'{_PORTABLE_HEAD}{{ echo "{missing}" >&2; exit 1; }}; exec "$s" {" ".join(args)}'


def is_portable(line: object, *args: str) -> bool:
    """`line` is a `portable_line` running sagemem with `args` (whatever its message)."""
    return (
        isinstance(line, str)
        and line.startswith(_PORTABLE_HEAD)
        and line.endswith(f'; exec "$s" {" ".join(args)}')
    )


def _which(name: str) -> str | None:
    """What PATH finds for `name`, as `shutil.which` would (without importing it: the prompt
    hook names this command in its text, and pays for every import), but through absolute
    folders only: a relative one (or an empty one, the working directory) finds what lies in
    whichever project the harness runs in."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(folder):
            continue
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def in_virtual_env() -> bool:
    return sys.prefix != getattr(sys, "base_prefix", sys.prefix)


def _script() -> Path | None:
    """This install's console script: beside the interpreter (a virtual environment, a
    user or system install), or the one this process was started as."""
    names = ("sagemem.exe", "sagemem") if os.name == "nt" else ("sagemem",)
    for name in names:
        beside = Path(sys.executable).with_name(name)
        if beside.is_file():
            return beside.absolute()
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name in names and started.is_file():
        return started.absolute()
    return None


def _same(found: str | None, script: Path) -> bool:
    if found is None:
        return False
    try:
        return os.path.samefile(found, script)
    except OSError:
        return False
