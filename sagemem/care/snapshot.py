"""Snapshots and rollback: a way back from any bulk change.

A snapshot copies every top-level memory and MEMORY.md into `<state>/snapshots/<id>/`, with a
`MANIFEST.json` holding each file's size and sha256. A rollback first verifies the snapshot
against its manifest (a changed, missing or extra file, or a damaged manifest, refuses it),
then snapshots the present (a "protection" snapshot; if that cannot be completed, nothing is
touched), then writes the snapshot's files back. It never deletes: with parts `all`, a memory
that did not exist when the snapshot was taken is moved to `archive/`; one left where it is
(parts `files`, or a locked one) keeps its MEMORY.md line. Each rollback is
recorded in `<state>/snapshots/rollbacks.json`.

A file sagemem cannot read as one of its own (over 4 MiB, a link, a special file) is no
memory, and `check` names it: a snapshot leaves it out, says so in its manifest
(`skipped`), and a rollback leaves it where it is. One such file must not stop every bulk
change. A manifest may have come with a clone: it is read by its shape, and one that does not
fit is no snapshot (left out of the list, refused by name, named by `check`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store import forms, index, shape
from ..store.errors import InvalidMemory, MemoryNotFound, SagememError, SagememWarning
from ..store.files import MAX_COPY_BYTES, read_bytes, safe_folder, write_atomic
from ..store.names import INDEX_NAME, check_stored_name, name_key
from ..store.text import split_lines

if TYPE_CHECKING:
    from ..store.forms import SnapshotFileForm, SnapshotForm

KINDS = ("manual", "auto", "protection")
KEEP_PROTECTION = 3
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_ID = re.compile(r"\A\d{8}-\d{6}-\d{6}\Z")


def _copied_name(name: str) -> str:
    """A name a snapshot may hold: the index's, or one a memory had when it was taken (the
    path rule alone: a name the secret rule, written since, refuses is still put back)."""
    return name if name_key(name) == name_key(INDEX_NAME) else check_stored_name(name)


# The manifest as `create` writes it (and `redact` updates it).
MANIFEST = shape.obj(
    {
        "id": shape.matching(_ID, "a snapshot id"),
        "kind": shape.one_of(*KINDS),
        "created": shape.text,
        "files": shape.each(
            shape.obj(
                {
                    "name": shape.passes(_copied_name, "a memory file name"),
                    "bytes": shape.count,
                    "sha256": shape.matching(re.compile(r"[0-9a-f]{64}"), "a sha256"),
                }
            )
        ),
    },
    {
        "schema": shape.one_of(forms.SNAPSHOT),
        "label": shape.text,
        "redacted": shape.each(shape.text),
        "skipped": shape.each(shape.obj({"name": shape.text, "why": shape.text})),
    },
)
ROLLBACKS = shape.each(shape.obj({}))  # what each rollback did, as `record_rollback` appends it


class SnapshotInvalid(SagememError):
    """A snapshot does not match its manifest; it is refused, nothing changed."""


@dataclass(frozen=True)
class Snapshot:
    """A snapshot's identity and manifest."""

    id: str
    kind: str
    label: str
    created: str
    files: tuple[SnapshotFileForm, ...]
    path: Path
    skipped: tuple[dict[str, str], ...] = ()  # {"name", "why"}: files left out

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "created": self.created,
            "files": len(self.files),
            "bytes": sum(f["bytes"] for f in self.files),
            "skipped": [dict(item) for item in self.skipped],
        }

    def left_out(self) -> str:
        """What the snapshot left out, to follow the line that names it ("" when nothing)."""
        if not self.skipped:
            return ""
        return " (left out: " + "; ".join(f"{item['name']} {item['why']}" for item in self.skipped) + ")"


def folder(state_dir: Path) -> Path:
    return state_dir / "snapshots"


def create(
    memory_dir: Path, state_dir: Path, names: Iterable[str], *, label: str = "", kind: str = "manual"
) -> Snapshot:
    """Copy `names` (top-level files of `memory_dir`) into a new snapshot. A file sagemem
    refuses to read (over its cap, a link, a special file) or one gone since it was listed is
    left out and named in `skipped`; any other failure aborts the snapshot and removes what
    was copied: an incomplete snapshot is no way back."""
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
    files: list[SnapshotFileForm] = []
    skipped: list[dict[str, str]] = []
    try:
        for name in sorted(set(names), key=name_key):
            try:
                data = read_bytes(memory_dir / name, limit=MAX_COPY_BYTES)
            except InvalidMemory as exc:
                skipped.append({"name": name, "why": exc.rule})
                continue
            except MemoryNotFound:
                skipped.append({"name": name, "why": "was removed while the snapshot was taken"})
                continue
            write_atomic(target / "files" / name, data, create_only=True)
            files.append({"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        created = now.isoformat(timespec="seconds")
        manifest: SnapshotForm = {
            "schema": forms.SNAPSHOT,
            "id": sid,
            "kind": kind,
            "label": label,
            "created": created,
            "files": files,
        }
        if skipped:
            manifest["skipped"] = skipped
        write_atomic(
            target / "MANIFEST.json", (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode()
        )
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return Snapshot(sid, kind, label, created, tuple(files), target, tuple(skipped))


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
    except shape.Damaged as exc:
        raise SnapshotInvalid(f"{sid}: MANIFEST.json is missing or damaged ({exc.why})") from None
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
            except shape.Damaged:
                continue
    return found


def damaged(state_dir: Path) -> list[tuple[Path, str]]:
    """(path, what is wrong) for each snapshot folder whose manifest does not fit, dated in
    the future, and for a rollback history that cannot be read."""
    try:
        base = safe_folder(state_dir, "snapshots", create=False)
        items = sorted(base.iterdir()) if base.is_dir() else []
    except (OSError, SagememError):
        return []  # a link is `check`'s state-link finding
    found = []
    for item in items:
        if not _ID.match(item.name) or item.is_symlink():
            continue
        if _from_the_future(item.name):
            found.append((item, "is dated in the future, so it is no snapshot taken here; it is ignored"))
            continue
        try:
            _manifest(item)
        except shape.Damaged as exc:
            found.append((exc.path, f"{exc.why}; this snapshot is not listed, and no rollback can use it"))
    try:
        shape.load(base / "rollbacks.json", MAX_MANIFEST_BYTES, ROLLBACKS, under=state_dir)
    except shape.Damaged as exc:
        effect = "the next rollback sets it aside (rollbacks.json.damaged-<time>) and starts it anew"
        found.append((exc.path, f"{exc.why}; {effect}"))
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
    """The manifest of the snapshot folder `path`, of `MANIFEST`'s shape and naming that
    folder (`shape.Damaged` otherwise, a missing one too)."""
    file = path / "MANIFEST.json"
    manifest = shape.load(file, MAX_MANIFEST_BYTES, MANIFEST, under=path.parent.parent)
    if manifest is None:
        raise shape.Damaged(file, "is missing")
    if manifest["id"] != path.name:
        raise shape.Damaged(file, f"names snapshot {manifest['id']}, not its folder's")
    return dict(manifest)


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
            path = snap.path / "files" / item["name"]  # a name of the manifest's shape: no `../`
            try:
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


def keep_index_lines(snapshot_index: bytes, present_index: bytes, names: Iterable[str]) -> bytes:
    """The snapshot's MEMORY.md with the present index's lines for `names` (memories the
    rollback leaves where they are) carried over as they are, after its own text, for each
    of them it does not list. An index that is not UTF-8 is put back as the snapshot has it."""
    keys = {name_key(name) for name in names}
    try:
        old, now = snapshot_index.decode("utf-8"), present_index.decode("utf-8")
    except UnicodeDecodeError:
        return snapshot_index
    listed = {name_key(e.target) for e in index.entries(old)}
    kept = [
        line.rstrip("\r\n")
        for line in split_lines(now)
        if (e := index.parse_entry(line)) and name_key(e.target) in keys - listed
    ]
    if not kept:
        return snapshot_index
    eol = "\r\n" if "\r\n" in old else "\n"
    if old and not old.endswith("\n"):
        old += eol
    return (old + "".join(line + eol for line in kept)).encode("utf-8")


def record_rollback(state_dir: Path, entry: dict[str, Any]) -> None:
    """Add what a rollback did to the history (the caller holds the snapshots lock). The
    rollback is done by then: a history that cannot be written costs a warning, never the
    rollback. A damaged one is set aside first (`rollbacks.json.damaged-<time>`), and one that
    cannot be set aside is replaced, with a warning."""
    path = folder(state_dir) / "rollbacks.json"
    try:
        safe_folder(state_dir, "snapshots")
        try:
            history = shape.load(path, MAX_MANIFEST_BYTES, ROLLBACKS, under=state_dir) or []
        except shape.Damaged as exc:
            history = []
            failed = shape.make_way(path)
            if failed:
                _warn(f"{path}: {exc.why}; {failed}")
        write_atomic(path, _utf8((history + [entry])[-200:]))
    except (OSError, SagememError) as exc:
        _warn(f"{path}: the rollback is done, but it is not in the history ({exc})")


def _utf8(history: list[Any]) -> bytes:
    """The history as UTF-8 JSON; ASCII escapes when it holds a lone surrogate, which JSON may
    spell (an older entry is carried over unchecked) but UTF-8 cannot."""
    text = json.dumps(history, ensure_ascii=False, indent=1) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(history, ensure_ascii=True, indent=1) + "\n").encode("ascii")


def _warn(message: str) -> None:
    warnings.warn(SagememWarning(message), stacklevel=3)


def _verify(snapshot: Snapshot) -> None:
    stored = snapshot.path / "files"
    if not stored.is_dir() or stored.is_symlink():
        raise SnapshotInvalid(f"{snapshot.id}: has no files folder")
    listed = {item["name"]: item for item in snapshot.files}  # names of the manifest's shape
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
        if hashlib.sha256(data).hexdigest() != item["sha256"] or len(data) != item["bytes"]:
            raise SnapshotInvalid(f"{snapshot.id}: {name} does not match its sha256 in the manifest")


def _from_manifest(manifest: dict[str, Any], path: Path) -> Snapshot:
    return Snapshot(
        manifest["id"],
        manifest["kind"],
        manifest.get("label", ""),
        manifest["created"],
        tuple(manifest["files"]),
        path,
        tuple(manifest.get("skipped", [])),
    )
