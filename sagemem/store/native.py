"""Memory folders that harnesses keep themselves, and where they are.

Claude Code saves what its model is told to remember in its auto-memory folder,
`<Claude's folder>/projects/<slug>/memory/`, in sagemem's own format (one Markdown file per
memory with `name`, `description` and `type` frontmatter, and a `MEMORY.md` of pointer
lines). sagemem reads that folder as one of its scopes instead of competing with it. The
slug is Claude Code's own rule: the project's git root (a linked worktree's main checkout),
else the working directory, with every UTF-16 code unit that is not an ASCII letter or digit
turned into `-`, and past 200 characters the first 200 and a hash of the whole.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .harnesses import HARNESSES, home_folder, user_file

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def own_memory_on(scope: str, cwd: Path, home: Path, env: Mapping[str, str]) -> bool:
    """Whether the memory folder a harness keeps itself (its record's `own_memory`, named by
    the scope sagemem reads it as) is on for a session in `cwd`."""
    return scope == "claude" and claude_auto_memory(cwd, home, env)[0]


def claude_home(home: Path, env: Mapping[str, str]) -> Path:
    """Claude Code's own folder: `$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    return home_folder(HARNESSES["claude-code"], home, env)


def claude_memory_dir(cwd: Path, home: Path, env: Mapping[str, str]) -> Path:
    """The auto-memory folder Claude Code uses for a session started in `cwd`."""
    root = git_main_root(cwd) or cwd
    return claude_home(home, env) / "projects" / claude_slug(str(root)) / "memory"


def claude_slug(path: str) -> str:
    """Claude Code's folder name for a project path: every UTF-16 code unit that is not an
    ASCII letter or digit becomes `-`; past 200, the first 200 and a hash of the whole."""
    data = path.encode("utf-16-le", "surrogatepass")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    slug = "".join(chr(u) if chr(u).isascii() and chr(u).isalnum() else "-" for u in units)
    if len(slug) <= 200:
        return slug
    value = 0
    for unit in units:  # Java's String.hashCode, 32 bits, signed
        value = (value * 31 + unit) & 0xFFFFFFFF
    value = abs(value - (1 << 32) if value >= 1 << 31 else value)
    digits = ""
    while value:
        value, digit = divmod(value, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return f"{slug[:200]}-{digits or '0'}"


def claude_auto_memory(
    cwd: Path,
    home: Path,
    env: Mapping[str, str],
    *,
    replaced: Mapping[Path, Mapping[str, object]] | None = None,
    policy: Path | None = None,
) -> tuple[bool, str]:
    """Whether Claude Code's auto memory is on for a session in `cwd`, and what says so:
    `CLAUDE_CODE_DISABLE_AUTO_MEMORY` (truthy: off; explicitly falsy: on), `--bare`
    (`CLAUDE_CODE_SIMPLE`), else `autoMemoryEnabled` in the settings (user, then the
    project's shared and local files, then the managed policy `policy`; the later wins),
    else on. `replaced` gives settings files' contents to use instead of what is on disk: a
    file as `install` is about to write it (or, in a dry run, would)."""
    given = env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY")
    if given is not None and given.strip().lower() in _TRUE:
        return False, f"CLAUDE_CODE_DISABLE_AUTO_MEMORY={given.strip()}"
    if given is not None and given.strip().lower() in _FALSE:
        return True, f"CLAUDE_CODE_DISABLE_AUTO_MEMORY={given.strip()} turns it on"
    if env.get("CLAUDE_CODE_SIMPLE"):
        return False, "CLAUDE_CODE_SIMPLE is set"
    root = git_main_root(cwd) or cwd
    value, source = True, ""
    claude = HARNESSES["claude-code"]
    layers = [user_file(claude, claude.user_settings, home, env)]
    layers += [root / claude.project_settings, root / claude.local_settings]
    layers += [policy or claude_policy()]
    for path in layers:
        settings = replaced[path] if replaced and path in replaced else read_json(path)
        setting = settings.get("autoMemoryEnabled")
        if isinstance(setting, bool):
            value, source = setting, str(path)
    return value, f"autoMemoryEnabled is {str(value).lower()} in {source}" if source else "the default"


def git_root(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` that holds `.git`."""
    return next((f for f in (folder, *folder.parents) if (f / ".git").exists()), None)


def git_main_root(folder: Path) -> Path | None:
    """The git root, or for a linked worktree its main checkout's."""
    root = git_root(folder)
    if root is None or not (root / ".git").is_file():
        return root
    return _linked_main(root) or root


def _linked_main(root: Path) -> Path | None:
    """The main checkout of the linked worktree at `root`, only when git's own layout says
    so: the `.git` file names `<main>/.git/worktrees/<name>`, whose `commondir` leads back to
    that `<main>/.git` (a real repository: HEAD, objects, refs) and whose `gitdir` names this
    worktree's `.git`. A project folder that came as an archive may hold a `.git` file of
    its own making; pointer files that do not close that loop name some other project's
    repository, and its memory is not this project's."""
    from .errors import SagememError

    if (root / ".git").is_symlink():  # git writes a file there; a link could lead anywhere
        return None
    try:
        pointer = _small(root / ".git").strip()
        if not pointer.startswith("gitdir:"):
            return None
        gitdir = (root / pointer.removeprefix("gitdir:").strip()).resolve()
        common = (gitdir / _small(gitdir / "commondir").strip()).resolve()
        back = (gitdir / _small(gitdir / "gitdir").strip()).resolve()
        here = (root / ".git").resolve()
    except (OSError, UnicodeDecodeError, ValueError, RuntimeError, SagememError):
        return None  # a pointer file that cannot be read (a folder, a FIFO, too large) names nothing
    if common.name != ".git" or gitdir.parent != common / "worktrees" or back != here:
        return None
    if not all(p.is_dir() for p in (common / "objects", common / "refs")) or not (gitdir / "HEAD").is_file():
        return None
    return common.parent


def _small(path: Path) -> str:
    """A pointer file of git's (a few hundred bytes), read with a cap: it may be a clone's."""
    from .files import read_config

    return (read_config(path, 64 * 1024) or b"").decode("utf-8")


def read_json(path: Path) -> dict[str, object]:
    from .errors import SagememError
    from .files import read_config

    try:
        data = json.loads(read_config(path, MAX_SETTINGS_BYTES) or b"{}")
    except (OSError, SagememError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def claude_policy() -> Path:
    """Claude Code's managed settings file, which wins over every other."""
    if sys.platform == "darwin":
        return Path("/Library/Application Support/ClaudeCode/managed-settings.json")
    if os.name == "nt":
        programs = os.environ.get("ProgramFiles", r"C:\Program Files")
        return Path(programs, "ClaudeCode", "managed-settings.json")
    return Path("/etc/claude-code/managed-settings.json")
