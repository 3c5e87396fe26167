"""What a dream run leaves behind: its manifest, the bytes it replaced, its report, its lock.

* `<state>/dream/<run id>/manifest.json`: the machine-readable declaration (mode, model,
  rounds, tokens, every change with the sha256 and size of the file before and after, every
  refused call, the proposals of a report-mode run, rollbacks).
* `<state>/dream/<run id>/blobs/<sha256>`: the bytes each change replaced, so a rollback
  can put back exactly what was there, even for a file written twice in one run.
* `<memory dir>/dream/<run id>.md`: the report a person reads. A subfolder of the memory
  directory is never scanned as memories.
* `<state>/dream/lock`: one run at a time. It is an `flock`, which the kernel releases when
  its holder dies, so a dead run's lock is taken over by the next one without a timeout.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..care import dream_state
from ..store import locking, shape
from ..store.errors import SagememError
from ..store.files import read_state, safe_folder, write_atomic

if TYPE_CHECKING:
    from ..store.forms import DreamLockForm

SCHEMA = dream_state.SCHEMA
MAX_MANIFEST_BYTES = dream_state.MAX_MANIFEST_BYTES
MAX_BLOB_BYTES = 16 * 1024 * 1024
_RUN_ID = dream_state.RUN_ID
# The shapes of the manifest and of the lock holder's note are care's (`care/dream_state.py`),
# so that `check` judges them whoever calls it; they are read here by the same rules.
MANIFEST = dream_state.MANIFEST
_HOLDER = dream_state.HOLDER


class DreamBusy(SagememError):
    """Another dream run holds the lock; nothing was changed."""


def new_id(now: dt.datetime | None = None) -> str:
    return f"{(now or dt.datetime.now()).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def check_id(run_id: str) -> str:
    """A run id as sagemem makes them, or `SagememError`: it names a folder, so nothing else
    (no `..`, no `/`) is ever joined to a path."""
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise SagememError(
            f"{run_id!r}: not a dream run id (like 20261201-184500-a3f9; `sagemem dream list`)"
        )
    return run_id


def folder(state_dir: Path, run_id: str | None = None, *, create: bool = False) -> Path:
    parts = ("dream",) if run_id is None else ("dream", check_id(run_id))
    return safe_folder(state_dir, *parts, create=create)


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def stamp(data: bytes | None) -> dict[str, Any] | None:
    """What a change records of a file's bytes: their size and sha256 (None: no file)."""
    return None if data is None else {"bytes": len(data), "sha256": sha256(data)}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def save(state_dir: Path, manifest: dict[str, Any]) -> None:
    place = folder(state_dir, manifest["id"], create=True)
    # ASCII escapes: text a model sent (a lone surrogate, say) can always be written.
    data = json.dumps(manifest, ensure_ascii=True, indent=1).encode("ascii")
    write_atomic(place / "manifest.json", data)


def load(state_dir: Path, run_id: str) -> dict[str, Any]:
    """The manifest of run `run_id`, of `MANIFEST`'s shape: a state directory can come with a
    clone, and a damaged or forged manifest must not crash a listing, a report or a rollback."""
    path, manifest, why = _read(state_dir, run_id)
    if why:
        raise SagememError(f"{path}: {why}")
    if manifest is None:
        raise SagememError(f"{run_id}: no such dream run (`sagemem dream list`)")
    return manifest


def _read(state_dir: Path, run_id: str) -> tuple[Path, Any, str]:
    """The manifest's path, what it holds (None: no such file), what is wrong with it."""
    return dream_state.read_manifest(state_dir, check_id(run_id))


def listing(state_dir: Path) -> list[dict[str, Any]]:
    """Every run's manifest, oldest first; a damaged one is skipped, not fatal."""
    try:
        place = folder(state_dir)
    except SagememError:
        return []
    if not place.is_dir():
        return []
    found = []
    for name in sorted(os.listdir(place)):
        if _RUN_ID.match(name):
            try:
                found.append(load(state_dir, name))
            except SagememError:
                continue
    return found


def rolled_back(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The rollback that undid the run (the last one that left no conflict), or None: a run is
    rolled back once, and one whose rollback left conflicts may be rolled back again."""
    done = [r for r in manifest.get("rollbacks", []) if not r.get("conflicts")]
    return done[-1] if done else None


def keep_blob(state_dir: Path, run_id: str, data: bytes) -> str:
    """Keep `data` (bytes a change replaced) under its sha256; returns the digest."""
    digest = hashlib.sha256(data).hexdigest()
    blobs = safe_folder(state_dir, "dream", check_id(run_id), "blobs")
    path = blobs / digest
    if not path.exists():
        write_atomic(path, data)
    return digest


def blob(state_dir: Path, run_id: str, digest: str) -> bytes:
    """The kept bytes of `digest`, verified against it."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest or ""):
        raise SagememError(f"{digest!r}: not a sha256")
    path = safe_folder(state_dir, "dream", check_id(run_id), "blobs", create=False) / digest
    data = read_state(path, MAX_BLOB_BYTES, under=state_dir)
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        raise SagememError(f"{path}: missing or changed; this change cannot be rolled back from the run")
    return data


def held(state_dir: Path) -> bool:
    """Whether a run holds the lock now (a manifest still `running` without it was cut short)."""
    try:
        with locking.exclusive(folder(state_dir, create=True) / "lock", timeout=0):
            return False
    except (locking.LockTimeout, SagememError, OSError):
        return True


@contextmanager
def running(state_dir: Path, run_id: str) -> Iterator[None]:
    """Hold the one-run-at-a-time lock, or raise `DreamBusy` naming the run that holds it."""
    place = folder(state_dir, create=True)
    holder = place / "lock.json"
    with ExitStack() as stack:
        try:
            stack.enter_context(locking.exclusive(place / "lock", timeout=0))
        except locking.LockTimeout:
            try:
                who = shape.load(holder, dream_state.MAX_SMALL_BYTES, _HOLDER, under=state_dir) or {}
            except shape.Damaged:
                who = {}
            raise DreamBusy(
                f"another dream run holds the lock (run {who.get('run', '?')}, process "
                f"{who.get('pid', '?')}); nothing was changed"
            ) from None
        note: DreamLockForm = {"run": run_id, "pid": os.getpid(), "at": now()}
        write_atomic(holder, json.dumps(note).encode())
        yield
