"""What git knows about a memory directory, for `check`: is the state dir tracked, and which
commit last changed a file. Read only, through the `git` command; no git, no repository, or
a git that fails or takes too long all read as "nothing known".

Never on the prompt path. The repository may be a stranger's clone. git's own local config
is not part of a clone, but a clone can carry a bare repository's files (`HEAD`, `config`,
`objects/`) inside the memory directory, which git would take as the repository, config and
all; so bare repositories are used only when named (`safe.bareRepository=explicit`), and
what could run a program on the way (the file-system monitor, a signature check's gpg) is
switched off for these calls.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TIMEOUT = 10.0
_BASE = (
    "git",
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "core.quotepath=off",
)


def tracked(folder: Path, target: Path) -> list[str]:
    """The files under `target` that the repository around `folder` tracks (paths relative
    to the repository's root); [] when there is none or git cannot tell."""
    output = _git(folder, "ls-files", "-z", "--full-name", "--", _relative(folder, target))
    return [name for name in (output or "").split("\0") if name]


def last_change(folder: Path, target: Path, live: Path | None = None) -> str | None:
    """`<short hash> by <author> on <date>` of the last commit that changed `target`. When
    that is a merge and `live` is where the file was before (an archived memory's live
    name), the commit named is the one on the merged side that last changed `live` without
    touching `target`: the edit a merge carried into the archived copy, not the merge."""
    output = _log(folder, target, f"%H %P%x00{_SHOWN}")
    if "\0" not in output:
        return None
    commits, shown = output.split("\0", 1)
    _, *parents = commits.split()
    if live is not None and len(parents) > 1:
        for side in parents:
            only = [side, *(f"^{p}" for p in parents if p != side)]  # what this side brought
            if not _log(folder, target, "%H", *only):  # this side did not make the archived copy
                edit = _log(folder, live, _SHOWN, *only)
                if edit:
                    return edit
    return shown or None


_SHOWN = "%h by %an on %ad"


def _log(folder: Path, path: Path, shown: str, *revisions: str) -> str:
    """The last commit of `revisions` (HEAD) that changed `path`, as `shown`; "" for none."""
    output = _git(
        folder, "log", "-1", f"--format={shown}", "--date=short", *revisions, "--", _relative(folder, path)
    )
    return (output or "").strip()


def _relative(folder: Path, target: Path) -> str:
    try:
        return os.path.relpath(target, folder)
    except ValueError:  # another drive (Windows)
        return str(target)


def _git(folder: Path, *args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            [*_BASE, "-C", str(folder), *args],
            capture_output=True,
            timeout=TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace")
