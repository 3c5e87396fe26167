"""What `check` reads besides the live memories, and `purge-secrets` cleans: the archived
copies, snapshot copies and conflict records sagemem keeps, and the state directory itself.

Functions over paths and names; `MemoryStore.check` gathers the rest and `health.check`
judges it all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..store import guard
from ..store.archive import ARCHIVE_DIR, changed_since_archived, reseal
from ..store.config import STATE_DIR_NAME
from ..store.errors import SagememError
from ..store.files import (
    MAX_ARCHIVED_BYTES,
    MAX_COPY_BYTES,
    read_bytes,
    read_state,
    safe_folder,
    write_atomic,
)
from ..store.memory import Memory, decode
from ..store.names import INDEX_NAME, check_name, name_key
from . import gitinfo
from . import snapshot as snapshot_module

MAX_GIT_LOOKUPS = 20  # archived memories changed after archiving whose last commit `check` names


def archived_in_detail(
    memory_dir: Path, changes: Iterable[tuple[str, str, str]], archived: Sequence[Memory]
) -> list[dict[str, Any]]:
    """Each (name, hash when archived, hash now) of an archived memory changed since, with
    both sides named: when and why it was archived, and the commit that last changed it,
    where git knows."""
    by_name = {m.file: m for m in archived}
    found = []
    for count, (name, sealed, now) in enumerate(changes):
        memory = by_name.get(name)
        extra = memory.extra if memory else {}
        path = memory_dir / ARCHIVE_DIR / name
        found.append(
            {
                "file": f"{ARCHIVE_DIR}/{name}",
                "name": name,
                "archived_at": str(extra.get("archived_at", "")),
                "reason": str(extra.get("archived_reason", "")),
                "sealed": sealed,
                "now": now,
                # git is asked about the first few only: thousands would take minutes
                "commit": gitinfo.last_change(memory_dir, path) if count < MAX_GIT_LOOKUPS else None,
            }
        )
    return found


def kept_copies(memory_dir: Path, state_dir: Path, archived_names: Iterable[str]) -> list[tuple[str, str]]:
    """(label, text) of every copy of memory text sagemem keeps besides the live files:
    archived memories, snapshot copies, the two sides of every conflict record. What a
    copy cannot be read as is left out (`check` reports the live files' troubles)."""
    found: list[tuple[str, str]] = []
    folder = memory_dir / ARCHIVE_DIR
    for name in sorted(archived_names, key=name_key):
        with contextlib.suppress(SagememError):
            data = read_bytes(folder / name, limit=MAX_ARCHIVED_BYTES)
            found.append((f"{ARCHIVE_DIR}/{name}", data.decode("utf-8", "replace")))
    for snap in snapshot_module.listing(state_dir):
        for item in snap.files:
            with contextlib.suppress(SagememError, KeyError, TypeError):
                name = str(item["name"])
                if name_key(name) != name_key(INDEX_NAME):
                    check_name(name)  # a manifest may have come with a clone: no `../`
                data = read_bytes(snap.path / "files" / name, limit=MAX_COPY_BYTES)
                found.append((f"snapshot {snap.id}: {name}", data.decode("utf-8", "replace")))
    for resolved in (False, True):
        with contextlib.suppress(SagememError):
            for c in guard.list_conflicts(state_dir, resolved=resolved):
                for side, data in (("disk", c.disk), ("proposed", c.proposed)):
                    if data:
                        label = f"conflict {c.id}{' (resolved)' if resolved else ''}, {side}"
                        found.append((label, data.decode("utf-8", "replace")))
    for path, _ in guard.damaged_records(state_dir):  # a secret may sit in one too
        with contextlib.suppress(SagememError, OSError):
            raw = read_state(path, guard.MAX_RECORD_BYTES) or b""
            found.append((f"conflict record {path.name} (damaged)", raw.decode("utf-8", "replace")))
    return found


def purge_copies(
    memory_dir: Path,
    state_dir: Path,
    archived_names: Iterable[str],
    *,
    lock: Callable[[Path], AbstractContextManager[Any]],
    snapshots_locked: Callable[[], AbstractContextManager[Any]],
) -> tuple[list[str], list[str]]:
    """Redact every likely secret in the kept copies: archived memories (resealed, when
    they were as archived), snapshot copies (their manifest updated) and conflict records.
    Returns what changed, and each archived copy that could not be read (the rest is done
    all the same)."""
    from ..store import secrets  # detect-secrets loads here

    changes: list[str] = []
    failed: list[str] = []
    folder = memory_dir / ARCHIVE_DIR
    for name in sorted(archived_names, key=name_key):
        with lock(memory_dir / name):
            try:
                data = read_bytes(folder / name, limit=MAX_ARCHIVED_BYTES)
                text = decode(name, data)
            except SagememError as exc:
                failed.append(f"{ARCHIVE_DIR}/{name}: {getattr(exc, 'rule', exc)}")
                continue
            found = secrets.scan(text)
            if not found:
                continue
            clean = secrets.redact(text, found)
            if changed_since_archived(data) is None:
                clean = reseal(clean, name)
            write_atomic(folder / name, clean.encode("utf-8"))
        changes.append(f"{ARCHIVE_DIR}/{name}: {len(found)} redacted")
    with snapshots_locked():
        changes += snapshot_module.redact(state_dir, secrets.scan, secrets.redact)
    changes += guard.redact_conflicts(state_dir, secrets.scan, secrets.redact)
    return changes, failed


def state_findings(memory_dir: Path, state_dir: Path) -> list[tuple[str, str, str]]:
    """(check, path, what) for the state directory: a link sagemem refuses to use, or a
    state dir committed to git (a clone's copy is a stranger's)."""
    found = []
    for folder in dict.fromkeys([state_dir, memory_dir / STATE_DIR_NAME]):
        try:
            safe_folder(folder, create=False)
        except SagememError as exc:
            found.append(("state-link", str(folder), getattr(exc, "rule", str(exc))))
    files = gitinfo.tracked(memory_dir, state_dir)
    if files:
        found.append(("state-tracked", str(state_dir), f"{len(files)} file(s), e.g. {files[0]}"))
    return found
