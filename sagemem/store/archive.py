"""Archive, restore and lock: retiring a memory without deleting it.

An archived memory moves to `archive/` beside the live ones, with trace keys added to its
frontmatter (`archived_at`, `archived_reason`, and `archived_sha256`, the hash of the file as
archived without that line); it is never retrieved or injected, and `restore` brings it back
without them. The hash lets `check` notice an archived copy that changed afterwards: git
follows a rename, so an edit made in another clone merges cleanly into `archive/` and would
otherwise vanish from live memory unnoticed. The copy is written before the original is
removed, so a crash in between leaves two copies, never none. Locks (`<state>/locked.json`) protect
a memory from every archive path; they live in the state dir, not in the file, so editing a
memory never drops its lock.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from . import frontmatter, shape
from .errors import SagememError
from .files import safe_folder, write_atomic
from .locking import exclusive
from .names import ARCHIVE_DIR as ARCHIVE_DIR  # where the store looks for it
from .names import name_key

TRACE_KEYS = ("archived_at", "archived_reason", "archived_sha256")
_SEAL = re.compile(rb"^archived_sha256:[ \t]*['\"]?([0-9a-f]{64})['\"]?[ \t]*\r?\n", re.M)
DEFAULT_REASON = "archived by hand"
LOCK_TIMEOUT = 10.0
MAX_LOCKS_BYTES = 1024 * 1024
MAX_REASON_CHARS = 500
_LOCKS = shape.table(shape.one_of(True))  # {name_key: true}, as `set_locked` writes it


class MemoryLocked(SagememError):
    """The memory is locked; archiving it is refused."""


class ArchiveRefused(SagememError):
    """An archive or restore was refused (the message says why); nothing changed."""


def with_trace(text: str, file: str, reason: str, now: dt.datetime | None = None) -> str:
    """`text` with the two trace keys set, every other byte kept (line endings included).

    The reason is folded to one line, so it can neither add keys nor close the frontmatter.
    """
    stamp = (now or dt.datetime.now()).strftime("%Y-%m-%d %H:%M")
    folded = " ".join(reason.split())[:MAX_REASON_CHARS] or DEFAULT_REASON
    traced = frontmatter.set_keys(text, {"archived_at": stamp, "archived_reason": folded}, file)
    # The seal is the last key, so removing its line gives back exactly the bytes it hashes.
    seal = hashlib.sha256(traced.encode("utf-8")).hexdigest()
    return frontmatter.set_keys(traced, {"archived_sha256": seal}, file)


def reseal(text: str, file: str) -> str:
    """`text` (an archived memory) sealed anew, after a change sagemem made on purpose (a secret
    redacted); a text without a seal is returned as it is."""
    data = text.encode("utf-8")
    found = _SEAL.search(data, 0, _frontmatter_end(data))
    if found is None:
        return text
    unsealed = (data[: found.start()] + data[found.end() :]).decode("utf-8")
    seal = hashlib.sha256(unsealed.encode("utf-8")).hexdigest()
    return frontmatter.set_keys(unsealed, {"archived_sha256": seal}, file)


def changed_since_archived(data: bytes) -> tuple[str, str] | None:
    """(sealed hash, hash now) when an archived file's bytes are no longer those it was
    archived with; None when they are, or when it carries no seal (archived by hand, or by an
    older sagemem). No YAML: this runs at every session start, on every archived file."""
    found = _SEAL.search(data, 0, _frontmatter_end(data))
    if found is None:
        return None
    now = hashlib.sha256(data[: found.start()] + data[found.end() :]).hexdigest()
    sealed = found.group(1).decode("ascii")
    return None if now == sealed else (sealed, now)


def _frontmatter_end(data: bytes) -> int:
    """Where a leading frontmatter block ends (0 when there is none): the seal lives in it."""
    opened = re.match(rb"\A(?:\xef\xbb\xbf)?---[ \t]*\r?\n", data)
    if not opened:
        return 0
    closed = re.compile(rb"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.M).search(data, opened.end())
    return closed.start() if closed else 0


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
    locks": reading it as empty would let every locked memory be archived. It is damaged when
    it is not an object of names each set to `true`, the one value `set_locked` writes."""
    path = state_dir / "locked.json"
    try:
        data = shape.load(path, MAX_LOCKS_BYTES, _LOCKS, under=state_dir)
    except shape.Damaged as exc:
        raise SagememError(f"{path}: cannot be read ({exc.why}); fix or remove it before archiving") from None
    return set() if data is None else set(data)


def problems(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for a damaged lock file."""
    path = state_dir / "locked.json"
    try:
        shape.load(path, MAX_LOCKS_BYTES, _LOCKS, under=state_dir)
    except shape.Damaged as exc:
        return [(path, f"{exc.why}; every archive path is refused until it is fixed or removed")]
    return []


def set_locked(state_dir: Path, file: str, value: bool) -> bool:
    """Lock or unlock `file`; returns whether anything changed."""
    with exclusive(safe_folder(state_dir) / "locked.lock", LOCK_TIMEOUT):
        names = locked(state_dir)
        key = name_key(file)
        if (key in names) == value:
            return False
        names = names | {key} if value else names - {key}
        data: dict[str, Any] = {name: True for name in sorted(names)}
        write_atomic(
            state_dir / "locked.json", (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode()
        )
        return True
