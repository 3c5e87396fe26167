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
from typing import Any

from ..store import locking
from ..store.errors import SagememError
from ..store.files import read_state, safe_folder, write_atomic

SCHEMA = 1
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
MAX_BLOB_BYTES = 16 * 1024 * 1024
_RUN_ID = re.compile(r"\A\d{8}-\d{6}-[0-9a-f]{4}\Z")


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
    place = folder(state_dir, run_id)
    raw = read_state(place / "manifest.json", MAX_MANIFEST_BYTES, under=state_dir)
    if raw is None:
        raise SagememError(f"{run_id}: no such dream run (`sagemem dream list`)")
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        raise SagememError(f"{place / 'manifest.json'}: not a dream manifest ({exc})") from None
    problem = _shape(manifest, run_id)
    if problem:
        raise SagememError(f"{place / 'manifest.json'}: not a dream manifest of schema {SCHEMA}: {problem}")
    return manifest


def _shape(m: Any, run_id: str) -> str:
    """What is wrong with a manifest's shape ("" when nothing): a state directory can come
    with a clone, and a damaged or forged manifest must not crash a listing or a rollback."""
    if not isinstance(m, dict) or m.get("schema") != SCHEMA or m.get("id") != run_id:
        return "schema or id"
    if m.get("mode") not in ("report", "apply") or not isinstance(m.get("status"), str):
        return "mode or status"
    for key in ("rounds", "tokens"):
        if not isinstance(m.get(key), int) or isinstance(m.get(key), bool):
            return key
    for key, fields in (
        ("changes", ("file", "op")),
        ("proposals", ("file", "op")),
        ("refused", ("tool", "why")),
    ):
        items = m.get(key)
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and all(isinstance(i.get(f), str) for f in fields) for i in items
        ):
            return key
    for change in m["changes"]:
        if change["op"] not in ("write", "create", "archive"):
            return "a change's operation"
        for key in ("before", "after", "archived"):
            stamp = change.get(key)
            if stamp is not None and not (isinstance(stamp, dict) and isinstance(stamp.get("sha256"), str)):
                return f"a change's {key}"
        if change["op"] != "create" and not isinstance(change.get("before_blob"), str):
            return "a change's kept bytes"
    for proposal in m["proposals"]:
        if proposal["op"] not in ("write", "archive") or not isinstance(proposal.get("reason", ""), str):
            return "a proposal"
        if proposal["op"] == "write" and not isinstance(proposal.get("content"), str):
            return "a proposal's content"
    if not isinstance(m.get("rollbacks", []), list) or not all(
        isinstance(r, dict) for r in m.get("rollbacks", [])
    ):
        return "rollbacks"
    return ""


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
                who = json.loads(read_state(holder, 4096, under=state_dir) or b"{}")
            except (ValueError, SagememError):
                who = {}
            who = who if isinstance(who, dict) else {}
            raise DreamBusy(
                f"another dream run holds the lock (run {who.get('run', '?')}, process "
                f"{who.get('pid', '?')}); nothing was changed"
            ) from None
        write_atomic(holder, json.dumps({"run": run_id, "pid": os.getpid(), "at": now()}).encode())
        yield
