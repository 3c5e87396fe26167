"""Snapshots and rollback: a way back from any bulk change.

A snapshot copies every top-level memory and MEMORY.md into `<state>/snapshots/<id>/`, with a
`MANIFEST.json` holding each file's size and sha256. A rollback first verifies the snapshot
against its manifest (a changed, missing or extra file, or a damaged manifest, refuses it),
then snapshots the present (a "protection" snapshot; if that cannot be completed, nothing is
touched), then writes the snapshot's files back. It never deletes: with scope `all`, a memory
that did not exist when the snapshot was taken is moved to `archive/`. Each rollback is
recorded in `<state>/snapshots/rollbacks.json`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..store.errors import SagememError
from ..store.files import MAX_COPY_BYTES, read_bytes, read_state, safe_folder, write_atomic
from ..store.names import INDEX_NAME, check_name, name_key

KINDS = ("manual", "auto", "protection")
KEEP_PROTECTION = 3
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_ID = re.compile(r"\A\d{8}-\d{6}-\d{6}\Z")


class SnapshotInvalid(SagememError):
    """A snapshot does not match its manifest; it is refused, nothing changed."""


@dataclass(frozen=True)
class Snapshot:
    """A snapshot's identity and manifest."""

    id: str
    kind: str
    label: str
    created: str
    files: tuple[dict[str, Any], ...]  # {"name", "bytes", "sha256"}
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "created": self.created,
            "files": len(self.files),
            "bytes": sum(f["bytes"] for f in self.files),
        }


def folder(state_dir: Path) -> Path:
    return state_dir / "snapshots"


def create(
    memory_dir: Path, state_dir: Path, names: Iterable[str], *, label: str = "", kind: str = "manual"
) -> Snapshot:
    """Copy `names` (top-level files of `memory_dir`) into a new snapshot. A file that cannot be
    read aborts the snapshot and removes what was copied: an incomplete snapshot is no way back."""
    now = dt.datetime.now(dt.timezone.utc)
    base = safe_folder(state_dir, "snapshots")
    while True:  # ids sort in the order snapshots were taken, even within one second
        sid = f"{now:%Y%m%d-%H%M%S-%f}"
        target = base / sid
        try:
            target.mkdir()
            break
        except FileExistsError:
            now += dt.timedelta(microseconds=1)
    (target / "files").mkdir()
    files = []
    try:
        for name in sorted(set(names), key=name_key):
            data = read_bytes(memory_dir / name, limit=MAX_COPY_BYTES)
            write_atomic(target / "files" / name, data, create_only=True)
            files.append({"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        created = now.isoformat(timespec="seconds")
        manifest = {"schema": 1, "id": sid, "kind": kind, "label": label, "created": created, "files": files}
        write_atomic(
            target / "MANIFEST.json", (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode()
        )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return Snapshot(sid, kind, label, manifest["created"], tuple(files), target)


def load(state_dir: Path, sid: str) -> Snapshot:
    """The snapshot `sid`, verified against its manifest (`SnapshotInvalid` otherwise)."""
    if not _ID.match(sid) or _from_the_future(sid):
        raise SnapshotInvalid(f"{sid}: no such snapshot")
    path = folder(state_dir) / sid
    try:
        safe_folder(state_dir, "snapshots", sid, create=False)
    except SagememError as exc:
        raise SnapshotInvalid(f"{sid}: {exc}") from None
    if not path.is_dir():
        raise SnapshotInvalid(f"{sid}: no such snapshot")
    try:
        snapshot = _from_manifest(_manifest(path), path)
    except (OSError, SagememError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise SnapshotInvalid(f"{sid}: MANIFEST.json is missing or damaged") from None
    _verify(snapshot)
    return snapshot


def listing(state_dir: Path) -> list[Snapshot]:
    """Every snapshot whose manifest reads, oldest first (damaged ones are left out)."""
    found = []
    base = folder(state_dir)
    try:
        safe_folder(state_dir, "snapshots", create=False)
    except SagememError:
        return []  # a link: no snapshot of ours is there
    if not base.is_dir():
        return []
    for item in sorted(base.iterdir()):
        if _ID.match(item.name) and not item.is_symlink() and not _from_the_future(item.name):
            try:
                found.append(_from_manifest(_manifest(item), item))
            except (OSError, SagememError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
                continue
    return found


def _from_the_future(sid: str) -> bool:
    """An id dated more than a day ahead is no snapshot this machine took: counted among the
    newest, such ids (a clone may carry them) would have every new snapshot pruned at once."""
    try:
        taken = dt.datetime.strptime(sid, "%Y%m%d-%H%M%S-%f").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return True
    return taken > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)


def _manifest(path: Path) -> dict[str, Any]:
    raw = read_state(path / "MANIFEST.json", MAX_MANIFEST_BYTES)
    if raw is None:
        raise ValueError("no manifest")
    manifest = json.loads(raw)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise ValueError("not a manifest")
    if not all(isinstance(item, dict) for item in manifest["files"]):
        raise ValueError("not a manifest")
    return manifest


def prune(state_dir: Path, keep: int, keep_ids: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Remove all but the newest `keep` manual/auto snapshots and 3 protection snapshots
    (and never those in `keep_ids`)."""
    removed = []
    snapshots = listing(state_dir)
    for kinds, limit in ((("manual", "auto"), keep), (("protection",), KEEP_PROTECTION)):
        chosen = [s for s in snapshots if s.kind in kinds]
        for old in chosen[: max(0, len(chosen) - limit)]:
            if old.id in keep_ids:
                continue
            if not old.path.is_symlink():
                shutil.rmtree(old.path, ignore_errors=True)
            removed.append(old.id)
    return removed


def redact(
    state_dir: Path, scan: Callable[[str], list[Any]], redact_text: Callable[[str, Any], str]
) -> list[str]:
    """Redact the secrets `scan` finds in every snapshot's copies, in place, with the manifest
    updated to the new bytes (and the redacted names listed in it), so a rollback can never
    bring a secret back and the snapshot still verifies. The caller holds the snapshots lock."""
    changes = []
    for snap in listing(state_dir):
        manifest = _manifest(snap.path)
        redacted = set(manifest.get("redacted", []))
        for item in manifest["files"]:
            name = str(item.get("name", ""))
            path = snap.path / "files" / name
            try:
                if name_key(name) != name_key(INDEX_NAME):
                    check_name(name)  # a manifest may have come with a clone
                data = read_bytes(path, limit=MAX_COPY_BYTES)
            except SagememError:
                continue
            text = data.decode("utf-8", "replace")
            found = scan(text)
            if not found:
                continue
            clean = redact_text(text, found).encode("utf-8")
            write_atomic(path, clean)
            item.update(bytes=len(clean), sha256=hashlib.sha256(clean).hexdigest())
            redacted.add(path.name)
            changes.append(f"snapshot {snap.id}: {path.name}: {len(found)} redacted")
        if redacted != set(manifest.get("redacted", [])):
            manifest["redacted"] = sorted(redacted)
            data = (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode()
            write_atomic(snap.path / "MANIFEST.json", data)
    return changes


def record_rollback(state_dir: Path, entry: dict[str, Any]) -> None:
    path = safe_folder(state_dir, "snapshots") / "rollbacks.json"
    try:
        history = json.loads(read_state(path, MAX_MANIFEST_BYTES) or b"[]")
        history = history if isinstance(history, list) else []
    except (OSError, SagememError, ValueError, RecursionError):
        history = []
    history = (history + [entry])[-200:]
    write_atomic(path, (json.dumps(history, ensure_ascii=False, indent=1) + "\n").encode())


def _verify(snapshot: Snapshot) -> None:
    stored = snapshot.path / "files"
    if not stored.is_dir() or stored.is_symlink():
        raise SnapshotInvalid(f"{snapshot.id}: has no files folder")
    listed = {}
    for item in snapshot.files:
        name = str(item.get("name", ""))
        try:
            if name_key(name) != name_key(INDEX_NAME):
                check_name(name)
        except SagememError:
            raise SnapshotInvalid(f"{snapshot.id}: the manifest names {name!r}, not a memory file") from None
        listed[name] = item
    present = {p.name for p in stored.iterdir()}
    extra = present - set(listed)
    if extra:
        raise SnapshotInvalid(f"{snapshot.id}: files not in the manifest: {', '.join(sorted(extra))}")
    for name, item in listed.items():
        if name not in present:
            raise SnapshotInvalid(f"{snapshot.id}: {name} is missing")
        try:
            data = read_bytes(stored / name, limit=MAX_COPY_BYTES)
        except SagememError as exc:
            raise SnapshotInvalid(f"{snapshot.id}: {name}: {getattr(exc, 'rule', exc)}") from None
        if hashlib.sha256(data).hexdigest() != item.get("sha256") or len(data) != item.get("bytes"):
            raise SnapshotInvalid(f"{snapshot.id}: {name} does not match its sha256 in the manifest")


def _from_manifest(manifest: dict[str, Any], path: Path) -> Snapshot:
    return Snapshot(
        manifest["id"],
        manifest["kind"],
        manifest.get("label", ""),
        manifest["created"],
        tuple(manifest["files"]),
        path,
    )
