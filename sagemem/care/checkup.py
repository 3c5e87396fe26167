"""What `check` reads besides the live memories, and `purge-secrets` cleans: the archived
copies, snapshot copies, conflict records and dream runs sagemem keeps, and the state
directory itself, every record in it read by its shape.

Functions over paths and names; `MemoryStore.check` gathers the rest and `health.check`
judges it all. Dream sits above care, so its files are found here by their place (and its
records judged by their shapes, `dream_state.py`): `<memory dir>/dream/<run>.md` (the
reports a person reads) and `<state>/dream/<run>/` (the manifest, the report of a harness's
own folder, the bytes each change replaced in `blobs/`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..store import archive, guard, ledger, locking
from ..store.archive import ARCHIVE_DIR, changed_since_archived, reseal
from ..store.config import STATE_DIR_NAME, settings_problems
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
from ..store.names import name_key
from . import dream_state, gitinfo
from . import snapshot as snapshot_module

MAX_GIT_LOOKUPS = 20  # archived memories changed after archiving whose last commit `check` names
DREAM_DIR = dream_state.DREAM_DIR
MAX_DREAM_FILE_BYTES = dream_state.MAX_MANIFEST_BYTES  # a manifest may hold every proposal's content
_RUN = dream_state.RUN_ID
_BLOB = re.compile(r"\A[0-9a-f]{64}\Z")
Scan = Callable[[str], list[Any]]
Redact = Callable[[str, Any], str]


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
                "commit": gitinfo.last_change(memory_dir, path, memory_dir / name)
                if count < MAX_GIT_LOOKUPS
                else None,
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
        for item in snap.files:  # names of the manifest's shape: no `../`
            with contextlib.suppress(SagememError):
                data = read_bytes(snap.path / "files" / item["name"], limit=MAX_COPY_BYTES)
                found.append((f"snapshot {snap.id}: {item['name']}", data.decode("utf-8", "replace")))
    for resolved in (False, True):
        with contextlib.suppress(SagememError):
            for c in guard.list_conflicts(state_dir, resolved=resolved):
                for side, held in (("disk", c.disk), ("proposed", c.proposed)):
                    if held:
                        label = f"conflict {c.id}{' (resolved)' if resolved else ''}, {side}"
                        found.append((label, held.decode("utf-8", "replace")))
    for path, _ in guard.damaged_records(state_dir):  # a secret may sit in one too
        with contextlib.suppress(SagememError, OSError):
            raw = read_state(path, guard.MAX_RECORD_BYTES) or b""
            found.append((f"conflict record {path.name} (damaged)", raw.decode("utf-8", "replace")))
    for label, path, kind in dream_files(memory_dir, state_dir):
        with contextlib.suppress(SagememError, OSError):
            raw = read_state(path, MAX_DREAM_FILE_BYTES) or b""
            found.append((label, _readable(raw, kind)))
    return found


def dream_files(memory_dir: Path, state_dir: Path) -> list[tuple[str, Path, str]]:
    """(label, path, kind) of every file a dream run leaves that may hold memory text: its
    report (`report`), its manifest (`manifest`), the bytes each change replaced (`blob`).
    Folders reached through a link hold none of ours."""
    found: list[tuple[str, Path, str]] = []
    with contextlib.suppress(SagememError, OSError):
        reports = safe_folder(memory_dir / DREAM_DIR, create=False)
        for path in sorted(reports.iterdir()) if reports.is_dir() else []:
            if path.suffix == ".md" and _RUN.match(path.stem):
                found.append((f"{DREAM_DIR}/{path.name}", path, "report"))
    for run in _runs(state_dir):
        label = f"dream run {run.name}"
        found += [(f"{label}: manifest", run / "manifest.json", "manifest")]
        found += [(f"{label}: report", run / "report.md", "report")] if (run / "report.md").exists() else []
        with contextlib.suppress(SagememError, OSError):
            blobs = safe_folder(state_dir, DREAM_DIR, run.name, "blobs", create=False)
            for path in sorted(blobs.iterdir()) if blobs.is_dir() else []:
                if _BLOB.match(path.name):
                    found.append((f"{label}: bytes kept of a change ({path.name[:12]})", path, "blob"))
    return found


def _runs(state_dir: Path) -> list[Path]:
    """The folders of the dream runs in the state dir (none reached through a link)."""
    try:
        folder = safe_folder(state_dir, DREAM_DIR, create=False)
        runs = sorted(folder.iterdir()) if folder.is_dir() else []
    except (SagememError, OSError):
        return []
    return [p for p in runs if _RUN.match(p.name) and not p.is_symlink() and p.is_dir()]


def _readable(raw: bytes, kind: str) -> str:
    """A dream file as text to scan: a manifest's every string on its own line (as JSON it
    holds them escaped: a key's lines as one line of `\\n`), anything else as it is."""
    text = raw.decode("utf-8", "replace")
    if kind != "manifest":
        return text
    try:
        return "\n".join(_strings(json.loads(text)))
    except (ValueError, RecursionError):
        return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _redacted(value: Any, scan: Scan, redact_text: Redact) -> Any:
    """`value` (parsed JSON) with the secrets in each of its strings redacted."""
    if isinstance(value, str):
        found = scan(value)
        return redact_text(value, found) if found else value
    if isinstance(value, dict):
        return {k: _redacted(v, scan, redact_text) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(item, scan, redact_text) for item in value]
    return value


def _purge_dream(memory_dir: Path, state_dir: Path, scan: Scan, redact_text: Redact) -> list[str]:
    """Redact every secret in what dream runs left (the caller holds the dream lock): reports
    as text, a manifest string by string (one that is no JSON as text). Kept bytes are
    renamed after their new sha256 and the manifest points at the new name, so a rollback
    puts back the redacted bytes and still verifies them."""
    changes = []
    renamed: dict[Path, dict[str, str]] = {}  # run folder -> {old digest: new}
    for label, path, kind in dream_files(memory_dir, state_dir):
        raw = read_state(path, MAX_DREAM_FILE_BYTES)
        found = scan(_readable(raw, kind)) if raw else []
        if not raw or not found:
            continue
        text = raw.decode("utf-8", "replace")
        try:  # a manifest string by string; one that is no JSON (or nested too deeply) as text
            manifest = json.loads(text) if kind == "manifest" else None
            data = None if manifest is None else json.dumps(_redacted(manifest, scan, redact_text), indent=1)
        except (ValueError, RecursionError):
            data = None
        if data is not None:
            write_atomic(path, data.encode("ascii"))
        elif kind == "blob":
            clean = redact_text(text, found).encode("utf-8")
            digest = hashlib.sha256(clean).hexdigest()
            write_atomic(path.with_name(digest), clean)
            renamed.setdefault(path.parent.parent, {})[path.name] = digest
        else:  # a report, or a manifest that is no JSON: as the text it is (`_readable`'s)
            write_atomic(path, redact_text(text, found if kind != "manifest" else scan(text)).encode("utf-8"))
        changes.append(f"{label}: {len(found)} redacted")
    for run, digests in renamed.items():  # the redacted copy replaces the old one in every way
        path = run / "manifest.json"
        with contextlib.suppress(ValueError, RecursionError):  # a damaged one names no blob
            manifest = _renamed(json.loads(read_state(path, MAX_DREAM_FILE_BYTES) or b"null"), digests)
            write_atomic(path, json.dumps(manifest, ensure_ascii=True, indent=1).encode("ascii"))
        for old in digests:
            with contextlib.suppress(FileNotFoundError):
                (run / "blobs" / old).unlink()
    return changes


def _renamed(value: Any, digests: dict[str, str]) -> Any:
    """`value` (a manifest) with each `before_blob` that names a renamed blob pointing at its
    new name."""
    if isinstance(value, dict):
        return {
            k: digests.get(v, v) if k == "before_blob" and isinstance(v, str) else _renamed(v, digests)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_renamed(item, digests) for item in value]
    return value


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
    try:
        with _dream_locked(state_dir):
            changes += _purge_dream(memory_dir, state_dir, secrets.scan, secrets.redact)
    except locking.LockTimeout:
        failed.append("dream runs: a run is going on; run purge-secrets again once it has ended")
    return changes, failed


def _dream_locked(state_dir: Path) -> AbstractContextManager[Any]:
    """The lock a dream run holds while it runs (its lock file in `<state>/dream/`), taken
    without waiting; nothing to hold where no run was ever made."""
    try:
        folder = safe_folder(state_dir, DREAM_DIR, create=False)
    except SagememError:
        return contextlib.nullcontext()
    if not folder.is_dir():
        return contextlib.nullcontext()
    return locking.exclusive(folder / "lock", 0)


def damaged_records(state_dir: Path) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """(path, what is wrong and what sagemem does instead) for each record of the state dir
    that sagemem cannot use as it stands: first those that stay until a person fixes them or
    moves them away (conflicts, the access ledger, the lock list, the settings, the snapshots'
    manifests and the rollback history, dream's manifests and lock note), then those that
    repair themselves on their next write (dream's trigger times; session ledgers are the
    search's: the facade adds those)."""
    found = [
        (path, f"{why}; it is left out of `sagemem conflicts` until it is fixed or moved away")
        for path, why in guard.damaged_records(state_dir)
    ]
    found += ledger.problems(state_dir) + archive.problems(state_dir) + settings_problems(state_dir)
    dream_kept, dream_repairing = dream_state.damaged(state_dir)
    return found + snapshot_module.damaged(state_dir) + dream_kept, dream_repairing


def state_findings(
    memory_dir: Path, state_dir: Path, repairing: Iterable[tuple[Path, str]] = ()
) -> list[tuple[str, str, str, str]]:
    """(check, path, what, severity) for the state directory: a link sagemem refuses to use, a
    state dir committed to git (a clone's copy is a stranger's), a record that cannot be used
    as it stands (`damaged_records`; `repairing`: records of other parts that repair
    themselves, as a session's ledger does). A record that repairs itself is a hint: it costs
    nothing a person wrote. A state dir that is refused as a whole has no records to judge:
    nothing is read there, and its own finding says so."""
    found: list[tuple[str, str, str, str]] = []
    for folder in dict.fromkeys([state_dir, memory_dir / STATE_DIR_NAME]):
        try:
            safe_folder(folder, create=False)
        except SagememError as exc:
            found.append(("state-link", str(folder), getattr(exc, "rule", str(exc)), "problem"))
    if not any(path == str(state_dir) for _, path, _, _ in found):
        kept, repaired = damaged_records(state_dir)
        found += [("state-record", str(path), why, "problem") for path, why in kept]
        found += [("state-record", str(path), why, "hint") for path, why in [*repaired, *repairing]]
    files = gitinfo.tracked(memory_dir, state_dir)
    if files:
        found.append(("state-tracked", str(state_dir), f"{len(files)} file(s), e.g. {files[0]}", "problem"))
    return found
