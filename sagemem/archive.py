"""Archive, restore and lock: retiring a memory without deleting it.

An archived memory moves to `archive/` beside the live ones, with two trace keys added to its
frontmatter (`archived_at`, `archived_reason`); it is never retrieved or injected, and
`restore` brings it back without them. The copy is written before the original is removed,
so a crash in between leaves two copies, never none. Locks (`<state>/locked.json`) protect
a memory from every archive path; they live in the state dir, not in the file, so editing a
memory never drops its lock.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from . import frontmatter
from .errors import SagememError
from .files import write_atomic
from .locking import exclusive
from .names import name_key

ARCHIVE_DIR = "archive"
TRACE_KEYS = ("archived_at", "archived_reason")
DEFAULT_REASON = "archived by hand"
LOCK_TIMEOUT = 10.0


class MemoryLocked(SagememError):
    """The memory is locked; archiving it is refused."""


class ArchiveRefused(SagememError):
    """An archive or restore was refused (the message says why); nothing changed."""


def with_trace(text: str, file: str, reason: str, now: dt.datetime | None = None) -> str:
    """`text` with the two trace keys set, every other byte kept (line endings included).

    The reason is folded to one line, so it can neither add keys nor close the frontmatter.
    """
    stamp = (now or dt.datetime.now()).strftime("%Y-%m-%d %H:%M")
    folded = " ".join(reason.split()) or DEFAULT_REASON
    return frontmatter.set_keys(text, {"archived_at": stamp, "archived_reason": folded}, file)


def without_trace(text: str, file: str) -> str:
    """`text` without the trace keys; a frontmatter block left empty (archive added it to a
    file that had none) goes too, so the file is as it was."""
    text = frontmatter.set_keys(text, {key: frontmatter.DELETE for key in TRACE_KEYS}, file)
    parts = frontmatter.split(text, file)
    if parts.has_frontmatter and not parts.matter.strip():
        return parts.head.replace("---", "").rstrip("\r\n") + parts.body
    return text


def locked(state_dir: Path) -> set[str]:
    """The locked names (compared by `name_key`). A damaged lock file is an error, not "no
    locks": reading it as empty would let every locked memory be archived."""
    path = state_dir / "locked.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        raise SagememError(f"{path}: cannot be read ({exc}); fix or remove it before archiving") from None
    if not isinstance(data, dict):
        raise SagememError(f"{path}: is not a JSON object; fix or remove it before archiving")
    return {str(k) for k, v in data.items() if v is True}


def set_locked(state_dir: Path, file: str, value: bool) -> bool:
    """Lock or unlock `file`; returns whether anything changed."""
    with exclusive(state_dir / "locked.lock", LOCK_TIMEOUT):
        names = locked(state_dir)
        key = name_key(file)
        if (key in names) == value:
            return False
        names = names | {key} if value else names - {key}
        data: dict[str, Any] = {name: True for name in sorted(names)}
        state_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(
            state_dir / "locked.json", (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode()
        )
        return True
