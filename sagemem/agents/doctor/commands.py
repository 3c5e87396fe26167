"""Which command lines doctor runs, and where their programs are.

A line is considered only when it has the form sagemem's own entries have (`<sagemem> hook
<harness> <event>`, `<python> -m sagemem ...` or `<python> -P -c <HOOK_CODE> ...`, with
nothing else on it but sagemem's `--dir`/`--state-dir` options), and it is run only when its
program is this sagemem (`places.ThisSagemem`): a cloned project's settings are not a script
for doctor to run. What runs is then this sagemem's own program with the line's arguments,
without a shell, in the project; a Python with `-P` (before 3.11: with the project taken off
its path by hand), so that the project's own `sagemem/` is never imported.

A program is looked up as the harness's shell in the project finds it: a relative path, and
a relative folder on PATH, from the project; `/proc/self/cwd`, the shell's own folder, as the
project. One found only because a virtual environment is active in this shell is told apart:
a harness started from another shell would not find it.

A program that is not this sagemem came with the project when it lies in the project, or
when it was reached from the project (a relative path, a relative PATH entry), wherever that
leads: `../bin/sagemem` in a folder unpacked from an archive, or in a git submodule, is the
archive's or the superproject's. Any other is another installation, named with where it
leads and what its first line runs, so that the person can tell whose it is; no command that
would run it is printed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ...store.command import HOOK_CODE, LAUNCHER, is_portable
from .places import OWN_FOLDER, PYTHON, SAGEMEM, Places, relative
from .settings import Hook

# How this Python runs sagemem from the project without importing the project's modules.
_BEFORE_3_11 = (  # `-c` puts the working directory first on the path, and this takes it off
    "import sys; del sys.path[0]; import runpy; "
    "runpy.run_module('sagemem', run_name='__main__', alter_sys=True)"
)
_MODULE = ("-P", "-m", "sagemem") if sys.version_info >= (3, 11) else ("-c", _BEFORE_3_11)


# What a Python is told in sagemem's own lines, before sagemem's arguments.
_PYTHON_FORMS = (["-m", "sagemem"], ["-P", "-m", "sagemem"], ["-P", "-c", HOOK_CODE])


def _arguments(words: list[str]) -> int | None:
    """Where sagemem's arguments start in `words`, when they run sagemem the way its own
    entries do; None for anything else."""
    name = Path(words[0]).name if words else ""
    if SAGEMEM.fullmatch(name):
        return 1
    if PYTHON.fullmatch(name):
        for form in _PYTHON_FORMS:
            if words[1 : 1 + len(form)] == form:
                return 1 + len(form)
    return None


def sagemem_rest(words: list[str]) -> list[str] | None:
    """What follows sagemem's global options when `words` run sagemem the way its own
    entries do (`<sagemem> ...`, `<python> -m sagemem ...`, `<python> -P -c <HOOK_CODE>
    ...`); None for anything else."""
    start = _arguments(words)
    if start is None:
        return None
    rest = words[start:]
    while len(rest) > 1 and rest[0] in ("--dir", "--state-dir"):
        rest = rest[2:]
    return rest


def shadowed(words: list[str], places: Places) -> str | None:
    """The project's own `sagemem` that `<python> -m sagemem` (without `-P`) would import
    instead of the installed one: `-m` puts the working directory first on the path, and the
    harness runs the hook in the project."""
    if len(words) < 3 or not PYTHON.fullmatch(Path(words[0]).name) or words[1:3] != ["-m", "sagemem"]:
        return None
    for candidate in (places.cwd / "sagemem", places.cwd / "sagemem.py"):
        if candidate.exists() or candidate.is_symlink():
            return str(candidate)
    return None


def hook_words(hook: Hook, home: Path | None = None) -> list[str] | None:
    """The hook's command as words, if it has the form doctor considers (see the module
    docstring). A portable line (`store/command.py`) is the words it would run here: the
    launcher in `home` when there is one, else `sagemem` from PATH."""
    if home is not None and is_portable(hook.command, "hook", hook.harness, hook.event):
        return [portable_program(home), "hook", hook.harness, hook.event]
    try:
        words = shlex.split(hook.command)
    except ValueError:
        return None
    rest = sagemem_rest(words)
    if rest is None or shlex.join(words) != hook.command.strip():
        return None  # quoting, pipes, `&&`, variables: not a line sagemem writes
    return words if rest[:2] == ["hook", hook.harness] and len(rest) <= 3 else None


def portable_program(home: Path) -> str:
    """What a portable line runs in `home`: its launcher if executable, else a bare name."""
    launcher = home / LAUNCHER
    return str(launcher) if os.access(launcher, os.X_OK) else "sagemem"


@dataclass(frozen=True)
class Resolved:
    """Where a command's program is (`path`, as the shell in the project reaches it);
    `problem` says why it would not start; `venv` names the virtual environment it is found
    in only because that is active in this shell; `entry`, the PATH entry a bare name was
    found through."""

    program: str
    path: Path | None
    problem: str = ""
    venv: str = ""
    entry: str | None = None

    @property
    def reached(self) -> str:
        """How it was reached from the project's folder ("" when by a fixed place)."""
        if self.entry is None:
            return "reached by a path relative to this project" if relative(self.program) else ""
        if not self.entry:
            return "found through an empty PATH entry (the project's folder)"
        return f"found through the relative PATH entry `{self.entry}`" if relative(self.entry) else ""

    @property
    def real(self) -> Path:
        """The file it is, links, `..` and `/proc` followed."""
        assert self.path is not None
        return Path(os.path.realpath(self.path))

    @property
    def shown(self) -> str:
        """The program as the line spells it, a bare name as PATH finds it."""
        return self.program if os.sep in self.program or "/" in self.program else str(self.path)


def from_project(path: str, places: Places) -> Path:
    """`path` as the harness's shell in the project reaches it."""
    for alias in OWN_FOLDER:
        if path == alias or path.startswith(alias + "/"):
            return Path(str(places.cwd) + path[len(alias) :])
    return places.cwd / path  # an absolute path stays as it is


def resolve(program: str, places: Places) -> Resolved:
    """`program` as a harness's shell in the project finds it: a path from the project, a
    bare name on PATH."""
    if "/" in program or os.sep in program:
        path = from_project(program, places)
        if not path.exists():
            return Resolved(program, None, "does not exist")
        if not path.is_file() or not os.access(path, os.X_OK):
            return Resolved(program, None, "is not an executable file")
        return Resolved(program, path)
    search = places.env.get("PATH", os.defpath).split(os.pathsep)
    folders = [str(from_project(folder or ".", places)) for folder in search]  # "" is the shell's folder
    for entry in search:  # which entry finds it counts: a relative one is the project's
        found = shutil.which(program, path=str(from_project(entry or ".", places)))
        if found:
            break
    else:
        return Resolved(program, None, "is not on PATH")
    venv = places.env.get("VIRTUAL_ENV", "")
    if venv:
        scripts = Path(venv) / ("Scripts" if os.name == "nt" else "bin")
        rest = os.pathsep.join(p for p in folders if Path(p) != scripts)
        if shutil.which(program, path=rest) is None:
            return Resolved(program, Path(found), venv=venv, entry=entry)
    return Resolved(program, Path(found), entry=entry)


@dataclass(frozen=True)
class Verdict:
    """What doctor makes of a line whose program resolved: `argv`, this sagemem's own
    program with the line's arguments; or why it is not this sagemem (`why`), whether the
    program came with the project (`from_project`: the harness would run it), and, for
    another installation, where it leads and what it runs (`leads`)."""

    argv: tuple[str, ...] = ()
    why: str = ""
    from_project: bool = False
    leads: str = ""


def verdict(words: list[str], found: Resolved, places: Places) -> Verdict:
    """`words` (of the form `sagemem_rest` takes), whose program is `found`: run as this
    sagemem, or not, and why."""
    start = _arguments(words)
    assert found.path is not None and start is not None
    this, real = places.sagemem, found.real
    python = PYTHON.fullmatch(Path(words[0]).name) is not None
    if python and this.is_python(found.path):
        return Verdict((str(found.path), *_MODULE, *words[start:]))
    if not python and str(real) in this.scripts:
        return Verdict((str(real), *words[1:]))
    path = Path(os.path.normpath(found.path))  # as it is reached
    file = path if python else real  # where a Python is decides its environment; a script is the file

    def named(shown: Path) -> str:
        return f"`{found.program}` is " + (f"{shown}, " if str(shown) != found.program else "")

    what = f"not this sagemem's Python ({this.python})" if python else f"not this sagemem ({this})"
    inside = [p for p in (path, real) if p == places.project or places.project in p.parents]
    if inside:  # the file, or a link to it, is the project's
        shown = real if real in inside and not python else path
        return Verdict(why=f"{named(shown)}a program in this project, {what}", from_project=True)
    if found.reached:
        return Verdict(why=f"{named(file)}{found.reached}, {what}", from_project=True)
    other = what if python else f"another sagemem than this one ({this})"
    leads = [f"it leads to {real}"] if real != path else []  # a link on PATH, as pipx makes
    runs = "" if python else first_line(real)
    if runs:
        leads.append(f"{'whose' if leads else 'its'} first line runs {runs}")
    return Verdict(why=f"{named(path)}{other}", leads=", ".join(leads))


def first_line(program: Path) -> str:
    """What a script's `#!` line runs ("" for none), read, not run."""
    try:
        with open(program, "rb") as handle:
            first = handle.readline(512)
    except OSError:
        return ""
    return first[2:].decode("utf-8", "replace").strip() if first.startswith(b"#!") else ""


def interpreter(program: Path, path: str | None = None) -> str:
    """The Python a sagemem script runs with: the program itself, or its `#!` line's (an
    `env` line's program looked up on `path`, the harness's PATH)."""
    if PYTHON.fullmatch(program.name):
        return str(program)
    words = first_line(program).split()
    if len(words) > 1 and Path(words[0]).name == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), words[-1])
        return shutil.which(named, path=path) or named
    return words[0] if words else f"the Python of {program}"
