"""`Directory`: a memory directory and every change to its bytes, the store part of the
`MemoryStore` facade (which adds search and care, `sagemem/memory_store.py`).

Memory files are the canonical state. MEMORY.md is derived from them (and kept in step on
every write); conflicts and locks live in the machine-local state directory. Every write,
move and archive passes through here: the format's rules, the secret rule, the version
guard, the lock and the index line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from . import archive as archive_module
from . import frontmatter, guard, index, listing
from . import ledger as ledger_module
from .config import STATE_DIR_NAME, Location, Scope, Settings, load_settings, locks_of
from .errors import (
    InvalidMemory,
    InvalidName,
    MemoryNotFound,
    SagememError,
    SagememWarning,
    StoreNotFound,
)
from .files import (
    MAX_ARCHIVED_BYTES,
    MAX_COPY_BYTES,
    MAX_INDEX_FILE_BYTES,
    check_regular,
    fsync_dir,
    read_bytes,
    read_state,
    write_atomic,
)
from .guard import Conflict
from .memory import FIELD_KEYS, Memory, decode, parse_memory, render_new, validate_for_write, version_of
from .names import INDEX_NAME, TYPES, check_name, name_key, new_file_name
from .text import to_lf

GITIGNORE_LINES = (".sagemem/", ".*.tmp")
MAX_DOTFILE_BYTES = 1024 * 1024
GITATTRIBUTES_LINES = ("*.md text eol=lf", "MEMORY.md merge=union")
# What a person does when a memory is saved but its index line is not (a full disk, a
# MEMORY.md that is not a file): the memory is safe, and the index can be made again.
_INDEX_FIX = "once that is fixed, `sagemem index --rebuild` writes the line"


@dataclass(frozen=True)
class Problem:
    """A file in the memory directory that could not be taken as a memory, and why."""

    file: str
    rule: str

    def __str__(self) -> str:
        return f"{self.file}: {self.rule}"


@dataclass(frozen=True)
class Scan:
    """The live memory files, those of them that parsed, and every file that could not be taken."""

    files: tuple[str, ...]
    memories: tuple[Memory, ...]
    problems: tuple[Problem, ...]

    def select(self, *, type: str | None = None, tag: str | None = None) -> tuple[Memory, ...]:
        """The memories of one type and/or with one tag (tags compared case-insensitively)."""
        found = self.memories
        if type:
            found = tuple(m for m in found if m.type == type.lower())
        if tag:
            found = tuple(m for m in found if name_key(tag) in {name_key(t) for t in m.tags})
        return found


@dataclass(frozen=True)
class Read:
    """A memory file's text and version; `problem` says why it did not parse (then `memory` is None).

    Reading does not require a valid file, so a broken one can be read, fixed and written back.
    """

    file: str
    version: str
    text: str
    memory: Memory | None
    problem: str | None


D = TypeVar("D", bound="Directory")


class Directory:
    """A memory directory and its state dir (by default `<path>/.sagemem`). Used as
    `MemoryStore`, which adds search and care through the public methods alone: where
    MEMORY.md and the archived copies are, the write lock, and the writes care asks for
    (`check --fix`'s, a rollback's) are promised here, so the facade knows no file's place."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        state_dir: str | os.PathLike[str] | None = None,
        *,
        lock_dir: str | os.PathLike[str] | None = None,
        scope: str = "",
        native: bool = False,
    ):
        self.memory_dir = Path(path).expanduser().absolute()
        self.state_dir = (
            Path(state_dir).expanduser().absolute() if state_dir else self.memory_dir / STATE_DIR_NAME
        )
        # Write locks: beside the files, unless the folder is a harness's own (then in the state).
        self.lock_dir = Path(lock_dir).absolute() if lock_dir else None
        self.scope = scope  # the scope it is in a memory set ("" when used on its own)
        # A harness's own folder: its MEMORY.md is the harness's, read and never written.
        self.native = native

    @classmethod
    def at(cls: type[D], location: Location) -> D:
        return cls(location.memory_dir, location.state_dir)

    @classmethod
    def of(cls: type[D], scope: Scope) -> D:
        """The store of one scope of a memory set."""
        return cls(
            scope.memory_dir,
            scope.state_dir,
            lock_dir=scope.lock_dir if scope.native else None,
            scope=scope.name,
            native=scope.native,
        )

    def as_scope(self) -> Scope:
        """This store as one scope of a memory set (`of` gives it back)."""
        native = self.lock_dir is not None  # a harness's own folder keeps its locks in its state
        where = self.lock_dir or locks_of(self.memory_dir)
        return Scope(self.scope, self.memory_dir, self.state_dir, "", where, native)

    def write_lock(self, path: Path) -> contextlib.AbstractContextManager[None]:
        """The cross-process lock every change to the file at `path` (a memory, MEMORY.md) is
        made under, as a context manager: whoever changes those bytes by other means than
        this class (care redacting an archived copy) holds it too, so no write is lost."""
        return guard.file_lock(path, self.lock_dir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.memory_dir)!r})"

    # -- setting up -------------------------------------------------------------------------

    def init(self, *, git: bool = False) -> list[Path]:
        """Create the directory, MEMORY.md, the state dir and .gitignore (and .gitattributes with
        `git`). Idempotent: returns the paths it created or changed, empty on a second run."""
        changed: list[Path] = []
        for folder in (self.memory_dir, self.state_dir):
            if not folder.is_dir():
                folder.mkdir(parents=True)
                changed.append(folder)
        if self.index_path() is None:
            with self.write_lock(self.memory_dir / INDEX_NAME):
                if self.index_path() is None:
                    write_atomic(
                        self.memory_dir / INDEX_NAME, index.HEADING.encode("utf-8"), create_only=True
                    )
                    changed.append(self.memory_dir / INDEX_NAME)
        wanted = [(".gitignore", GITIGNORE_LINES)] + (
            [(".gitattributes", GITATTRIBUTES_LINES)] if git else []
        )
        for name, lines in wanted:
            if _ensure_lines(self.memory_dir / name, lines):
                changed.append(self.memory_dir / name)
        return changed

    # -- reading ----------------------------------------------------------------------------

    def files(self) -> list[str]:
        """The file names of the live memories, in name order."""
        return self._listing()[0]

    def scan(self) -> Scan:
        names, problems = self._listing()
        memories = []
        for file in names:
            try:
                memories.append(parse_memory(file, read_bytes(self.memory_dir / file)))
            except (InvalidMemory, InvalidName) as exc:
                problems.append(Problem(file, exc.rule))
            except MemoryNotFound:
                pass  # deleted since the listing
        problems.sort(key=lambda p: name_key(p.file))
        return Scan(tuple(names), tuple(memories), tuple(problems))

    def memories(self, *, type: str | None = None, tag: str | None = None) -> list[Memory]:
        """The live memories that parse, in name order, optionally of one type or with one tag."""
        return list(self.scan().select(type=type, tag=tag))

    def get(self, file: str) -> Memory:
        file = self.resolve(file)
        return parse_memory(file, read_bytes(self.memory_dir / file))

    def read(self, file: str) -> Read:
        file = self.resolve(file)
        data = read_bytes(self.memory_dir / file)
        text = decode(file, data)
        try:
            memory, problem = parse_memory(file, data), None
        except InvalidMemory as exc:
            memory, problem = None, exc.rule
        return Read(file, version_of(data), text, memory, problem)

    def resolve(self, file: str) -> str:
        """The on-disk name of memory `file`, matched NFC-normalised and case-insensitively."""
        check_name(file)
        self.require()
        found = self._on_disk_name(file)
        if found is None:
            raise MemoryNotFound(file)
        return found

    # -- writing ----------------------------------------------------------------------------

    def create(
        self,
        *,
        type: str,
        name: str,
        description: str,
        body: str = "",
        tags: Sequence[str] = (),
        aliases: Sequence[str] = (),
        baseline: bool = False,
        baseline_priority: float = 0,
        file: str | None = None,
        writer: str = "",
        reason: str = "",
    ) -> Memory:
        """Create a new memory, `<type>_<slug>.md` unless `file` is given. If a memory of that
        name exists, the attempt is recorded and `VersionConflict` raised."""
        if type not in TYPES:
            raise InvalidMemory(file or name, f"type must be one of {', '.join(TYPES)} (got {type!r})")
        if not " ".join(description.split()):
            raise InvalidMemory(file or name, "description must not be empty: retrieval relies on it")
        file = check_name(file or new_file_name(type, name))
        text = render_new(
            name=name,
            description=description,
            type=type,
            tags=tags,
            aliases=aliases,
            baseline=baseline,
            baseline_priority=baseline_priority,
            body=body,
        )
        return self._write(self._existing_name(file), text, None, writer, reason)

    def write(
        self,
        file: str,
        content: str | bytes,
        *,
        expected_version: str | None,
        writer: str = "",
        reason: str = "",
        short_version: bool = False,
    ) -> Memory:
        """Replace (or, with `expected_version=None`, create) a memory's whole content.

        The content must be a whole memory: a frontmatter block with a description (retrieval
        finds memories by it). Line endings are written as LF. Refused with `VersionConflict`
        (and recorded) unless the file on disk is still `expected_version` (with
        `short_version`, as the CLI allows, a prefix of at least 12 digits of it)."""
        check_name(file)
        if expected_version is not None:
            guard.check_version(expected_version, prefix=short_version)
        self.require()
        text = decode(file, content) if isinstance(content, bytes) else content
        return self._write(self._existing_name(file), text, expected_version, writer, reason, whole=True)

    def update(
        self,
        file: str,
        *,
        expected_version: str,
        body: str | None = None,
        writer: str = "",
        reason: str = "",
        short_version: bool = False,
        **fields: Any,
    ) -> Memory:
        """Change frontmatter fields (`description=`, `tags=`, ...) and/or the body in place.

        Every other key, its order, comments, the line endings and (unless replaced) the body stay
        byte for byte. `updated` is set to today unless given. A field set to None is removed."""
        unknown = set(fields) - set(FIELD_KEYS)
        if unknown:
            raise SagememError(f"unknown field(s): {', '.join(sorted(unknown))}")
        guard.check_version(expected_version, prefix=short_version)
        if not fields and body is None:  # nothing to write, but the version is still checked
            file = self._existing_name(check_name(file))
            guard.check_unchanged(self.memory_dir / file, expected_version)
            return self.get(file)
        fields.setdefault("updated", dt.date.today())
        changes = {FIELD_KEYS[k]: (frontmatter.DELETE if v is None else _plain(v)) for k, v in fields.items()}
        # On a version mismatch the change is still computed, on what is on disk now, so that the
        # guard records something a person can accept with one `conflicts resolve --keep proposed`.
        file = self._existing_name(check_name(file))
        try:
            current = self.read(file)
            text = self._set_fields(current.file, current.text, changes)
        except (MemoryNotFound, InvalidMemory) as exc:
            requested = ", ".join(f"{k}={v!r}" for k, v in fields.items())
            why = f"{reason} (requested {requested}; could not be applied: {exc})".strip()
            guard.refuse_if_changed(self.memory_dir / file, expected_version, self.state_dir, writer, why)
            raise
        if body is not None:
            parts = frontmatter.split(text, current.file)
            body = to_lf(body)
            if body and not body.endswith("\n"):
                body += "\n"  # a new file's body ends so too (`render_new`)
            if body and not body.startswith("\n"):
                # the blank lines that parted the old body from the frontmatter stay as they
                # were (none, if it had none); a file with no body gets one, as a new file has
                gap = len(parts.body) - len(parts.body.lstrip("\r\n"))
                kept = parts.body[:gap] if parts.body.strip() else parts.eol
                body = kept.replace("\r\n", "\n") + body
            text = parts.head + parts.matter + parts.tail + body.replace("\n", parts.eol)
        return self._write(current.file, text, expected_version, writer, reason, keep_eol=True)

    def convert_to_lf(self, file: str, *, writer: str = "") -> Memory:
        """Rewrite a memory with LF line endings (`check --fix`), guarded against the version
        it reads, through the one write path. Not `write`: a file without a description may
        still have its line endings fixed."""
        current = self.read(file)
        return self._write(current.file, current.text, current.version, writer, "")

    def put_back(
        self, file: str, data: bytes, *, expected_version: str, writer: str = "", reason: str = ""
    ) -> None:
        """Write bytes a memory had before (a rollback) back byte for byte, guarded like any
        write: no format rule applies, since these are bytes the file already had."""
        file = check_name(file)
        guard.check_version(expected_version)
        guard.guarded_write(
            self.memory_dir / file,
            data,
            expected_version,
            state_dir=self.state_dir,
            writer=writer,
            reason=reason,
            lock_dir=self.lock_dir,
        )
        with contextlib.suppress(SagememError, OSError):  # an unparsable memory has no index line
            self._upsert_index(file)

    def index_bytes(self) -> bytes | None:
        """MEMORY.md's bytes as they are (None: there is none)."""
        path = self.index_path()
        return None if path is None else _index_bytes(path)

    def put_back_index(self, data: bytes, *, expected: bytes | None) -> bool:
        """Write MEMORY.md's earlier bytes back (a rollback), only if it still holds
        `expected`; False (nothing written) when someone changed it meanwhile."""
        path = self.index_path() or self.memory_dir / INDEX_NAME
        with self.write_lock(path):
            if _index_bytes(path) != expected:
                return False
            write_atomic(path, data)
        return True

    def put_back_target(self, name: str) -> Path:
        """Where a kept copy of `name` (a snapshot's file) goes back to: MEMORY.md where it is,
        else the file there that `name` matches case and Unicode form aside, else `name`.
        Refused (`InvalidMemory`) when that is a link or not a regular file, so that a
        rollback can refuse before it writes anything."""
        if name_key(name) == name_key(INDEX_NAME):
            path = self.index_path() or self.memory_dir / name
        else:
            # A snapshot's name passed the rules for new names when it was taken: it is judged
            # by the path rule alone (its manifest's shape), as rules written since may refuse it.
            path = self.memory_dir / (self._on_disk_name(name) or name)
        if os.path.lexists(path):
            check_regular(path, os.lstat(path).st_mode)
        return path

    def put_back_copy(
        self, target: Path, data: bytes, *, index_lines: Callable[[bytes, bytes], bytes] | None = None
    ) -> bool:
        """Write a kept copy's bytes over what is at `target` (from `put_back_target`), under
        the file's write lock and atomically; True if written, False when they are there
        already. Not version guarded: a rollback replaces the present, which it snapshotted
        first. When `target` is a MEMORY.md that is there, `index_lines(copy, present)` gives
        the bytes written instead (a rollback keeps the lines of the memories that stay)."""
        with self.write_lock(target):
            try:
                current: bytes | None = read_bytes(target, limit=MAX_COPY_BYTES)
            except MemoryNotFound:
                current = None
            is_index = name_key(target.name) == name_key(INDEX_NAME)
            if index_lines is not None and is_index and current is not None:
                data = index_lines(data, current)
            if current == data:
                return False
            write_atomic(target, data)
        return True

    def take_out(self, file: str, *, expected_version: str, writer: str = "") -> None:
        """Remove a memory whose bytes now live on in another scope (`MemorySet.move`), and
        its index line; only if it is still `expected_version` (else `VersionConflict` and
        nothing removed: the memory lives on where it was, so there is no attempt to keep).
        Nothing else in sagemem deletes a memory."""
        guard.check_version(expected_version)
        file = self.resolve(file)
        path = self.memory_dir / file
        with self.write_lock(path):
            guard.check_unchanged(path, expected_version)
            os.unlink(path)
            fsync_dir(self.memory_dir)
        self._after_move(file, lambda: self._edit_index(lambda old: index.remove(old, file)))

    # -- use, archive and locks -------------------------------------------------------------

    def ledger(self) -> dict[str, ledger_module.Record]:
        """Every memory's uses (injected, read, cited), kept apart; live and archived memories only."""
        names = set(self._all_names())
        return {name: record for name, record in ledger_module.load(self.state_dir).items() if name in names}

    def record_use(self, kind: str, files: Iterable[str], *, receipt: str | None = None) -> list[str]:
        """Count a use of `kind` ("injected", "read", "cited"); a cited receipt counts once.
        Records of names that no longer exist (live or archived) are pruned on the way."""
        names = [self.resolve(f) for f in files]
        return ledger_module.record(self.state_dir, kind, names, receipt=receipt, live=self._all_names)

    def cite(self, files: Iterable[str], *, receipt: str) -> list[str]:
        """The agent used these memories in an answer; the same `receipt` twice counts once."""
        if not receipt.strip():
            raise SagememError("a citation needs a receipt id (the same receipt twice counts once)")
        return self.record_use("cited", files, receipt=receipt)

    def locked(self) -> set[str]:
        return archive_module.locked(self.state_dir)

    def lock(self, file: str) -> bool:
        """Protect a memory from every archive path; True if it was not locked before."""
        return archive_module.set_locked(self.state_dir, self.resolve(file), True)

    def unlock(self, file: str) -> bool:
        check_name(file)
        return archive_module.set_locked(self.state_dir, file, False)

    def archived(self) -> list[Memory]:
        """The archived memories, in name order (files that do not parse are left out)."""
        folder = self._archive_dir()
        found = []
        for name in sorted(self._names_in(folder), key=name_key):
            try:
                found.append(parse_memory(name, read_bytes(folder / name, limit=MAX_ARCHIVED_BYTES)))
            except (InvalidMemory, InvalidName, MemoryNotFound):
                continue
        return found

    def archive(
        self, file: str, *, reason: str = "", expected_version: str | None = None, writer: str = ""
    ) -> Memory:
        """Move a memory to `archive/` with `archived_at` and `archived_reason` in its
        frontmatter, and drop its index line. The copy is written before the original is
        removed. Refused (nothing changed) for locked, reserved, missing or already archived;
        with `expected_version`, also when the file is no longer that version (`VersionConflict`,
        the attempt recorded)."""
        if expected_version is not None:
            guard.check_version(expected_version)
        try:
            file = self.resolve(file)
        except MemoryNotFound:
            if name_key(file) in {name_key(n) for n in self._names_in(self._archive_dir())}:
                raise archive_module.ArchiveRefused(f"{file}: exists in archive/ already") from None
            raise
        if name_key(file) in self.locked():
            raise archive_module.MemoryLocked(f"{file}: is locked (sagemem unlock {file} first)")
        folder = self._archive_dir()
        if name_key(file) in {name_key(n) for n in self._names_in(folder)}:
            raise archive_module.ArchiveRefused(f"{file}: exists in {archive_module.ARCHIVE_DIR}/ already")
        source = self.memory_dir / file
        with self.write_lock(source):
            if expected_version is not None:
                guard.refuse_if_changed(
                    source, expected_version, self.state_dir, writer, f"archive: {reason}"
                )
            text = archive_module.with_trace(decode(file, read_bytes(source)), file, reason)
            folder.mkdir(exist_ok=True)
            write_atomic(folder / file, text.encode("utf-8"), create_only=True)
            os.unlink(source)
            fsync_dir(self.memory_dir)
        self._after_move(file, lambda: self._edit_index(lambda old: index.remove(old, file)))
        return parse_memory(file, text.encode("utf-8"))

    def restore(self, file: str) -> Memory:
        """Bring an archived memory back, without the trace keys, and list it again.
        Refused if a live memory of that name exists."""
        check_name(file)
        folder = self._archive_dir()
        matches = [n for n in self._names_in(folder) if name_key(n) == name_key(file)]
        if not matches:
            raise archive_module.ArchiveRefused(f"{file}: is not archived")
        file = file if file in matches else sorted(matches)[0]
        if name_key(file) in {name_key(n) for n in self._names_in(self.memory_dir)}:
            raise archive_module.ArchiveRefused(f"{file}: a live memory of that name exists")
        target = self.memory_dir / file
        with self.write_lock(target):
            text = archive_module.without_trace(
                decode(file, read_bytes(folder / file, limit=MAX_ARCHIVED_BYTES)), file
            )
            write_atomic(target, text.encode("utf-8"), create_only=True)
            os.unlink(folder / file)
            fsync_dir(folder)
        self._after_move(file, lambda: self._upsert_index(file))
        return parse_memory(file, text.encode("utf-8"))

    def archived_changes(self) -> list[tuple[str, str, str]]:
        """(file, hash when archived, hash now) for each archived memory whose bytes changed
        after it was archived (a git merge can carry an edit into `archive/`). Cheap enough
        for every session start: no YAML."""
        folder = self._archive_dir()
        found = []
        for name in sorted(self._names_in(folder), key=name_key):
            try:
                data = read_bytes(folder / name, limit=MAX_ARCHIVED_BYTES)
            except SagememError:
                continue  # `check` reports what cannot be read
            change = archive_module.changed_since_archived(data)
            if change is not None:
                found.append((name, *change))
        return found

    # -- settings and the index -------------------------------------------------------------

    def settings(self) -> Settings:
        """The retrieval and injection settings in force now (environment, settings file)."""
        return load_settings(self.state_dir)

    def check_index(self) -> index.IndexReport:
        """What is wrong with MEMORY.md; nothing in a harness's own folder, whose index is the
        harness's to keep (sagemem could not mend it)."""
        if self.native:
            return index.IndexReport((), (), (), ())
        scan = self.scan()
        return index.check(self.index_text(), scan.files, _by_key(scan.memories))

    def index_outdated(self) -> bool:
        """Whether `rewrite_index` would change MEMORY.md (read without its lock: a hint, so
        the facade takes its snapshot only when there is something to rebuild)."""
        if self.native:
            return False
        scan = self.scan()
        old = self.index_text()
        return index.rebuild(old, scan.files, _by_key(scan.memories)) != old

    def rewrite_index(self) -> bool:
        """Rebuild MEMORY.md deterministically from the files, under its lock; True if it
        changed (it is written only then; never in a harness's own folder). No snapshot: the
        facade's `rebuild_index` takes one first, before this lock (never under it)."""
        if self.native:
            return False
        with self.write_lock(self.index_path() or self.memory_dir / INDEX_NAME):
            scan = self.scan()
            old = self.index_text()
            new = index.rebuild(old, scan.files, _by_key(scan.memories))
            if new != old:
                self._write_index(new)
            return new != old

    # -- conflicts --------------------------------------------------------------------------

    def conflicts(self, *, resolved: bool = False) -> list[Conflict]:
        return guard.list_conflicts(self.state_dir, resolved=resolved)

    def conflict(self, conflict_id: str) -> Conflict:
        return guard.load_conflict(self.state_dir, conflict_id)

    def resolve_conflict(self, conflict_id: str, keep: str, *, writer: str = "") -> Conflict:
        """Settle a conflict: keep what is on disk, or write the proposed bytes. Writing is itself
        version guarded: it lands only if the file is still what the conflict recorded; if it
        changed again, the conflict stays open (no second one), now holding the file as it is,
        so the person looks again before the next try."""
        if keep not in ("disk", "proposed"):
            raise SagememError(f"keep must be 'disk' or 'proposed' (got {keep!r})")
        conflict = self.conflict(conflict_id)
        if keep == "proposed":
            if conflict.proposed is None:
                raise SagememError(
                    f"conflict {conflict.id} has no content to write (the change could not be "
                    "applied to the file); keep disk, then make the change again"
                )
            self._write(
                conflict.file,
                decode(conflict.file, conflict.proposed),
                conflict.disk_version,
                writer,
                f"resolve conflict {conflict.id}",
                keep_eol=True,
                settling=conflict,
            )
        return guard.close_conflict(self.state_dir, conflict, keep)

    # -- internals --------------------------------------------------------------------------

    def require(self) -> None:
        """Refuse (`StoreNotFound`, which says to run `sagemem init`) unless the memory
        directory exists: the check every entry point that reads or writes makes first."""
        if not self.memory_dir.is_dir():
            raise StoreNotFound(f"{self.memory_dir}: memory directory does not exist (run `sagemem init`)")

    def _listing(self) -> tuple[list[str], list[Problem]]:
        self.require()
        names, problems = listing.memory_names(self.memory_dir)
        return names, [Problem(name, why) for name, why in problems]

    def _existing_name(self, file: str) -> str:
        """`file`, or the name of the existing file it collides with case-insensitively."""
        try:
            return self.resolve(file)
        except MemoryNotFound:
            return file

    def _write(
        self,
        file: str,
        text: str,
        expected: str | None,
        writer: str,
        reason: str,
        *,
        keep_eol: bool = False,
        whole: bool = False,
        settling: Conflict | None = None,
    ) -> Memory:
        """The one path of every change to a memory's bytes: the format's rules (with `whole`,
        also those for content sent whole), then the guarded write, then the index line."""
        if not keep_eol:
            text = to_lf(text)
        memory = validate_for_write(file, text, whole=whole)
        self.refuse_new_secrets(file, text)
        version = guard.guarded_write(
            self.memory_dir / file,
            text.encode("utf-8"),
            expected,
            state_dir=self.state_dir,
            writer=writer,
            reason=reason,
            lock_dir=self.lock_dir,
            settling=settling,
        )
        try:
            self._upsert_index(file)
        except (SagememError, OSError) as exc:
            # The memory is safely written; failing now would invite a retry that conflicts.
            warnings.warn(
                f"{file} was written (version {version}), but MEMORY.md could not be updated: {exc}; "
                f"{_INDEX_FIX}",
                SagememWarning,
                stacklevel=3,
            )
        return memory

    def refuse_new_secrets(self, file: str, text: str) -> None:
        """Refuse content that adds a likely secret: memory is committed and put into prompts.
        A secret the file on disk already holds does not count, so an old file can still be
        edited (`check` reports it, and the person moves it out)."""
        from .secrets import new_secrets  # detect-secrets loads here, on the write path only

        try:
            old: str | None = decode(file, read_bytes(self.memory_dir / file))
        except (MemoryNotFound, InvalidMemory):
            old = None
        added = new_secrets(old, text)
        if added:
            more = f" (and {len(added) - 1} more)" if len(added) > 1 else ""
            raise InvalidMemory(
                file,
                f"line {added[0].line} looks like a {added[0].kind}{more}: keep secrets out of memory, "
                "which is committed and put into prompts; say where the secret is kept instead",
            )

    def _set_fields(self, file: str, text: str, changes: dict[str, Any]) -> str:
        # A type kept under `metadata:` (as Claude Code writes it) is changed where it lives.
        if "type" in changes and changes["type"] is not frontmatter.DELETE:
            parts = frontmatter.split(text, file)
            meta = frontmatter.parse(parts.matter, file) if parts.has_frontmatter else {}
            nested = meta.get("metadata")
            if "type" not in meta and isinstance(nested, dict) and "type" in nested:
                value = changes.pop("type")
                try:
                    text = frontmatter.set_nested(text, "metadata", "type", value, file)
                except InvalidMemory:
                    changes["type"] = value  # a flow-style block: the top-level key wins on read
        return frontmatter.set_keys(text, changes, file) if changes else text

    def index_path(self) -> Path | None:
        """Where MEMORY.md is, found case-insensitively (a clone may spell it otherwise); None
        if there is none, or no memory directory."""
        if not self.memory_dir.is_dir():
            return None
        exact = self.memory_dir / INDEX_NAME
        if os.path.lexists(exact):
            return exact
        with os.scandir(self.memory_dir) as entries:
            found = [e.name for e in entries if name_key(e.name) == name_key(INDEX_NAME)]
        return self.memory_dir / sorted(found)[0] if found else None

    def index_text(self) -> str:
        """MEMORY.md as it is ("" when there is none)."""
        path = self.index_path()
        if path is None:
            return ""
        return decode(path.name, read_bytes(path, limit=MAX_INDEX_FILE_BYTES))

    def _write_index(self, text: str) -> None:
        """Write MEMORY.md; never in a harness's own folder, where the harness keeps it (Claude
        Code's next Write of its index would fail on a file it has not read)."""
        if self.native:
            return
        path = self.index_path() or self.memory_dir / INDEX_NAME
        write_atomic(path, text.encode("utf-8"))

    def _after_move(self, file: str, update_index: Callable[[], None]) -> None:
        """The memory has moved: an index that cannot follow is a warning, not a failure."""
        try:
            update_index()
        except (SagememError, OSError) as exc:
            warnings.warn(
                f"{file} was moved, but MEMORY.md could not be updated: {exc}; {_INDEX_FIX}",
                SagememWarning,
                stacklevel=3,
            )

    def _edit_index(self, change: Callable[[str], str]) -> None:
        if self.native:
            return  # the harness's own index: see `_write_index`
        with self.write_lock(self.index_path() or self.memory_dir / INDEX_NAME):
            old = self.index_text()
            new = change(old)
            if new != old:
                self._write_index(new)

    def _archive_dir(self) -> Path:
        folder = self.memory_dir / archive_module.ARCHIVE_DIR
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise archive_module.ArchiveRefused(f"{folder}: must be a real directory, not a link or a file")
        return folder

    def archived_names(self) -> list[str]:
        """The archived files' names (memory-like names at the top of `archive/`), in no set
        order and none parsed, so that a copy which does not parse is still seen (`check`,
        `purge-secrets`); refused (`ArchiveRefused`) when `archive/` is a link or a file."""
        return self._names_in(self._archive_dir())

    def _on_disk_name(self, name: str) -> str | None:
        """`name` if a file has it, else the file's name that it matches case and Unicode form
        aside; None when none does."""
        key = name_key(name)
        with os.scandir(self.memory_dir) as entries:
            matches = sorted(e.name for e in entries if name_key(e.name) == key)
        return None if not matches else name if name in matches else matches[0]

    def _names_in(self, folder: Path) -> list[str]:
        """Memory-like file names in `folder` (top level only)."""
        if not folder.is_dir():
            return []
        with os.scandir(folder) as items:
            return [i.name for i in items if i.name.lower().endswith(".md") and not i.name.startswith(".")]

    def _all_names(self) -> list[str]:
        return self._names_in(self.memory_dir) + self._names_in(self.memory_dir / archive_module.ARCHIVE_DIR)

    def refresh_index_line(self, file: str) -> None:
        """Bring one memory's MEMORY.md line up to date after it was written by other means
        (an agent's own file tool, an editor)."""
        self._upsert_index(self.resolve(file))

    def _upsert_index(self, file: str) -> None:
        """Bring `file`'s index line up to date from the file as it is on disk now: a writer that
        lost the race for the index must not put back what another writer replaced."""
        if self.native:
            return  # the harness's own index: see `_write_index`
        with self.write_lock(self.index_path() or self.memory_dir / INDEX_NAME):
            try:
                memory = parse_memory(file, read_bytes(self.memory_dir / file))
            except (MemoryNotFound, InvalidMemory):
                return
            old = self.index_text()
            new = index.upsert(old, memory)
            if new != old:
                self._write_index(new)


def _by_key(memories: Iterable[Memory]) -> dict[str, Memory]:
    return {name_key(m.file): m for m in memories}


def _plain(value: Any) -> Any:
    """Tuples become lists so that YAML writes them as sequences."""
    return list(value) if isinstance(value, tuple) else value


def _ensure_lines(path: Path, lines: Sequence[str]) -> bool:
    """Append the `lines` missing from the text file at `path`; True if it changed. A link or
    a special file there (a clone may carry one) is refused, never read through."""
    old = decode(path.name, read_state(path, MAX_DOTFILE_BYTES) or b"")
    present = {line.strip() for line in old.splitlines()}
    missing = [line for line in lines if line not in present]
    if not missing:
        return False
    prefix = old if not old or old.endswith("\n") else old + "\n"
    write_atomic(path, (prefix + "".join(f"{line}\n" for line in missing)).encode("utf-8"))
    return True


def _index_bytes(path: Path) -> bytes | None:
    """MEMORY.md's bytes under its own cap (no link followed), None when there is none."""
    try:
        return read_bytes(path, limit=MAX_INDEX_FILE_BYTES)
    except MemoryNotFound:
        return None
