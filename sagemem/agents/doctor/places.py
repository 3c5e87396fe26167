"""Where doctor looks: the project (`cwd`), the home folder, the environment, the system-wide
settings files, how long an external step may take, and which sagemem doctor itself is (the
only one it runs); and the project's git root, where Codex and Claude Code anchor a project.

The checks take a `Places` rather than asking the process for its folders, so that one run
sees one environment and a test can point doctor at a home of its own.

This sagemem (`ThisSagemem`) is this Python, by the path it was started by, and the console
scripts that run it. A script counts by its real path (links, `..` and `/proc` followed):
its `#!` line names its Python by an absolute path, so it runs the same wherever it is
reached from. A Python counts only by the path this one was started by, or a file beside it
that is the same file: Python finds its environment from the `pyvenv.cfg` beside the path it
is started by, so this very file linked from another folder (a clone's, say) starts another
environment, with another `sagemem` in it.

A relative entry of a search path (PATH, PYTHONPATH, the loader's library path; an empty one
is the working directory) names a folder of whatever project a program runs in: what it
finds there came with that project (`relative`). So does a relative PYTHONHOME,
PYTHONUSERBASE, PYTHONPYCACHEPREFIX or BASH_ENV.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...store.native import claude_policy
from ...store.native import git_main_root as git_main_root  # shared with the library's scopes
from ...store.native import git_root as git_root

PYTHON = re.compile(r"python[0-9.]*(?:\.exe)?|pythonw(?:\.exe)?", re.I)
SAGEMEM = re.compile(r"sagemem(?:\.exe)?", re.I)
_EXEC = re.compile(r"'''exec' (.+) \"\$0\" \"\$@\"")  # pip's `#!/bin/sh` form for a long or spaced path
OWN_FOLDER = ("/proc/self/cwd", "/proc/thread-self/cwd")  # the working directory, as a path
# The variables that say where a program finds code to run: what separates their entries
# ("" for one path; glibc's loader takes `;` too), and what it finds there.
SEARCH_PATHS = {
    "PATH": (os.pathsep, "programs"),
    "PYTHONPATH": (os.pathsep, "modules"),
    "PYTHONHOME": ("", "modules"),
    "PYTHONUSERBASE": ("", "modules"),
    "PYTHONPYCACHEPREFIX": ("", "compiled modules"),
    "LD_LIBRARY_PATH": (":;", "libraries"),
    "DYLD_LIBRARY_PATH": (":", "libraries"),
    "DYLD_FALLBACK_LIBRARY_PATH": (":", "libraries"),
    "BASH_ENV": ("", "start-up file"),
}


def relative(path: str) -> bool:
    """`path` (a program, or an entry of a search path) names a place in the working
    directory: empty, relative, or through `/proc/self/cwd`."""
    return not os.path.isabs(path) or any(path == a or path.startswith(a + "/") for a in OWN_FOLDER)


def search_entries(name: str, value: str) -> list[str]:
    """The entries of the search path `name`. Only PATH's empty value is an entry (the
    shell's folder): Python, the loader and bash ignore an empty one."""
    separators = SEARCH_PATHS[name][0]
    if not value and name != "PATH":
        return []
    return re.split(f"[{re.escape(separators)}]", value) if separators else [value]


@dataclass(frozen=True)
class ThisSagemem:
    """The sagemem doctor is: `python` (as started) and the real paths of the console
    scripts that run it."""

    python: str
    scripts: frozenset[str] = frozenset()

    @classmethod
    def running(cls) -> ThisSagemem:
        """This process's: its Python, and the `sagemem` scripts of its environment (beside
        it, in its scripts folders, and the one `install` writes). PATH is not asked: what it
        finds can be anyone's."""
        import sysconfig

        from ...store.command import sagemem_command

        folders = [
            Path(sys.executable).parent,
            Path(sysconfig.get_path("scripts")),
            Path(sysconfig.get_path("scripts", sysconfig.get_preferred_scheme("user"))),
        ]
        names = ("sagemem.exe", "sagemem") if os.name == "nt" else ("sagemem",)
        scripts = [str(folder / name) for folder in folders for name in names]
        program = sagemem_command()[0]
        return cls.of(sys.executable, [*scripts, *([program] if os.path.isabs(program) else [])])

    @classmethod
    def of(cls, python: str, scripts: Iterable[str]) -> ThisSagemem:
        """`python` and those of `scripts` that run it."""
        this = cls(python)
        return cls(python, frozenset(os.path.realpath(s) for s in scripts if this._runs_me(s)))

    def is_python(self, path: Path | str | None) -> bool:
        """`path` starts this Python in this environment: it is in this Python's folder (as
        written, no link followed) and is the same file."""
        if path is None or not PYTHON.fullmatch(Path(path).name):
            return False
        if Path(path).parent != Path(self.python).parent:
            return False
        try:
            return os.path.samefile(path, self.python)
        except OSError:
            return False

    def _runs_me(self, script: str) -> bool:
        """The script, a regular file once links are followed, starts this Python."""
        real = Path(os.path.realpath(script))
        if not real.is_file():
            return False
        if os.name == "nt":  # a launcher .exe starts the python.exe beside it
            return real.parent == Path(self.python).parent
        try:
            with open(real, "rb") as handle:
                head = [handle.readline(4096), handle.readline(4096)]
        except OSError:
            return False
        first, second = (line.decode("utf-8", "replace").strip() for line in head)
        if first == "#!/bin/sh" and (exec_line := _EXEC.fullmatch(second)):
            try:
                words = shlex.split(exec_line[1])
            except ValueError:
                return False
        else:
            words = first[2:].split() if first.startswith("#!") else []
        return bool(words) and self.is_python(words[0])

    def __str__(self) -> str:
        return min(self.scripts) if self.scripts else shlex.join([self.python, "-m", "sagemem"])


def _system_file(mac: str, linux: str, name: str) -> Path:
    if sys.platform == "darwin":
        return Path("/Library/Application Support", mac, name)
    if os.name == "nt":
        return Path(os.environ.get("ProgramFiles", r"C:\Program Files"), mac, name)
    return Path("/etc", linux, name)


@dataclass(frozen=True)
class Places:
    """Where doctor looks (the project is `cwd`), how long each external step may take, and
    the sagemem that doctor is."""

    cwd: Path
    home: Path
    env: Mapping[str, str]
    claude_policy: Path = field(default_factory=claude_policy)
    gemini_system: Path = field(
        default_factory=lambda: _system_file("GeminiCli", "gemini-cli", "settings.json")
    )
    timeout: float = 15.0  # seconds for one MCP start, or one conversation with codex app-server
    hook_timeout: float = 30.0  # at most, for one hook run (else the hook's own timeout)
    sagemem: ThisSagemem = field(default_factory=ThisSagemem.running)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cwd", self.cwd.resolve())  # what a harness's getcwd() says

    @property
    def project(self) -> Path:
        """The project's top: its git root, else the folder itself."""
        return git_root(self.cwd) or self.cwd

    @classmethod
    def here(cls, **given: Any) -> Places:
        return cls(cwd=Path.cwd(), home=Path.home(), env=dict(os.environ), **given)
