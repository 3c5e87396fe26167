"""`MemoryStore`: the one facade over a memory directory. The CLI, and later the MCP server
and the hooks, call it; it wires together the small modules that do the work.

Memory files are the canonical state. MEMORY.md is derived from them (and kept in step on
every write); conflicts and locks live in the machine-local state directory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import corpus as corpus_module
from . import frontmatter, guard, index, retrieve
from . import inject as inject_module
from .config import STATE_DIR_NAME, Location, Settings, load_settings
from .corpus import Corpus
from .errors import InvalidMemory, InvalidName, MemoryNotFound, SagememError, SagememWarning, StoreNotFound
from .files import read_bytes, write_atomic
from .guard import Conflict
from .inject import Injection
from .memory import FIELD_KEYS, Memory, decode, parse_memory, render_new, validate_for_write, version_of
from .names import INDEX_NAME, TYPES, check_name, is_reserved, name_key, new_file_name
from .text import to_lf

GITIGNORE_LINES = (".sagemem/", ".*.tmp")
GITATTRIBUTES_LINES = ("*.md text eol=lf", "MEMORY.md merge=union")


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


class MemoryStore:
    """A memory directory: `MemoryStore(path)`; the state dir defaults to `<path>/.sagemem`."""

    def __init__(self, path: str | os.PathLike[str], state_dir: str | os.PathLike[str] | None = None):
        self.memory_dir = Path(path).expanduser().absolute()
        self.state_dir = (
            Path(state_dir).expanduser().absolute() if state_dir else self.memory_dir / STATE_DIR_NAME
        )

    @classmethod
    def at(cls, location: Location) -> MemoryStore:
        return cls(location.memory_dir, location.state_dir)

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.memory_dir)!r})"

    # -- setting up ---------------------------------------------------------------------

    def init(self, *, git: bool = False) -> list[Path]:
        """Create the directory, MEMORY.md, the state dir and .gitignore (and .gitattributes with
        `git`). Idempotent: returns the paths it created or changed, empty on a second run."""
        changed: list[Path] = []
        for folder in (self.memory_dir, self.state_dir):
            if not folder.is_dir():
                folder.mkdir(parents=True)
                changed.append(folder)
        if self._index_path() is None:
            with guard.file_lock(self.memory_dir / INDEX_NAME):
                if self._index_path() is None:
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

    # -- reading ------------------------------------------------------------------------

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
        self._require()
        key = name_key(file)
        with os.scandir(self.memory_dir) as entries:
            matches = sorted(e.name for e in entries if name_key(e.name) == key)
        if not matches:
            raise MemoryNotFound(file)
        return file if file in matches else matches[0]

    # -- writing ------------------------------------------------------------------------

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
    ) -> Memory:
        """Replace (or, with `expected_version=None`, create) a memory's whole content.

        Line endings are written as LF. Refused with `VersionConflict` (and recorded) unless the
        file on disk is still `expected_version`."""
        check_name(file)
        if expected_version is not None:
            guard.check_version(expected_version)
        self._require()
        text = decode(file, content) if isinstance(content, bytes) else content
        return self._write(self._existing_name(file), text, expected_version, writer, reason)

    def update(
        self,
        file: str,
        *,
        expected_version: str,
        body: str | None = None,
        writer: str = "",
        reason: str = "",
        **fields: Any,
    ) -> Memory:
        """Change frontmatter fields (`description=`, `tags=`, ...) and/or the body in place.

        Every other key, its order, comments, the line endings and (unless replaced) the body stay
        byte for byte. `updated` is set to today unless given. A field set to None is removed."""
        unknown = set(fields) - set(FIELD_KEYS)
        if unknown:
            raise SagememError(f"unknown field(s): {', '.join(sorted(unknown))}")
        guard.check_version(expected_version)
        if not fields and body is None:
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
            body = to_lf(body).replace("\n", parts.eol)
            text = parts.head + parts.matter + parts.tail + body
        return self._write(current.file, text, expected_version, writer, reason, keep_eol=True)

    # -- retrieval ----------------------------------------------------------------------

    def settings(self) -> Settings:
        """The retrieval and injection settings in force now (environment, settings file)."""
        return load_settings(self.state_dir)

    def corpus(self) -> Corpus:
        """The searchable form of the directory, brought up to date from the cache."""
        self._require()
        return corpus_module.load(self.memory_dir, self.state_dir)

    def search(self, query: str, *, limit: int | None = None) -> retrieve.Result:
        """Ranked snippets for `query`; no session, nothing recorded."""
        settings = self.settings()
        if limit is not None:
            settings = dataclasses.replace(settings, limit=max(1, limit))
        return retrieve.search(self.corpus(), query, settings)

    def inject(
        self, query: str, *, session: str | None = None, reset: bool = False, task: str | None = None
    ) -> Injection:
        """The text to put into the agent's prompt for `query` ("" when nothing qualifies)."""
        self._require()
        return inject_module.inject(
            self.memory_dir, self.state_dir, query, self.settings(), session=session, reset=reset, task=task
        )

    # -- the index ----------------------------------------------------------------------

    def check_index(self) -> index.IndexReport:
        scan = self.scan()
        return index.check(self._index_text(), scan.files, _by_key(scan.memories))

    def rebuild_index(self) -> bool:
        """Fix the index deterministically; True if MEMORY.md changed (it is rewritten only then)."""
        with guard.file_lock(self._index_path() or self.memory_dir / INDEX_NAME):
            scan = self.scan()
            old = self._index_text()
            new = index.rebuild(old, scan.files, _by_key(scan.memories))
            if new != old:
                self._write_index(new)
            return new != old

    # -- conflicts ----------------------------------------------------------------------

    def conflicts(self, *, resolved: bool = False) -> list[Conflict]:
        return guard.list_conflicts(self.state_dir, resolved=resolved)

    def conflict(self, conflict_id: str) -> Conflict:
        return guard.load_conflict(self.state_dir, conflict_id)

    def resolve_conflict(self, conflict_id: str, keep: str, *, writer: str = "") -> Conflict:
        """Settle a conflict: keep what is on disk, or write the proposed bytes. Writing is itself
        version guarded: it lands only if the file is still what the conflict recorded."""
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
            )
        return guard.close_conflict(self.state_dir, conflict, keep)

    # -- internals ----------------------------------------------------------------------

    def _require(self) -> None:
        if not self.memory_dir.is_dir():
            raise StoreNotFound(f"{self.memory_dir}: memory directory does not exist (run `sagemem init`)")

    def _listing(self) -> tuple[list[str], list[Problem]]:
        self._require()
        names, problems = [], []
        with os.scandir(self.memory_dir) as entries:
            for entry in entries:
                name = entry.name
                if not name.lower().endswith(".md") or name.startswith(".") or is_reserved(name):
                    continue
                try:
                    check_name(name)
                except InvalidName as exc:
                    problems.append(Problem(name, f"invalid file name: {exc.rule}"))
                    continue
                if entry.is_symlink():
                    problems.append(Problem(name, "is a symbolic link; links are refused"))
                elif not entry.is_file(follow_symlinks=False):
                    problems.append(Problem(name, "is not a regular file"))
                else:
                    names.append(name)
        return sorted(names, key=lambda n: (name_key(n), n)), problems

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
    ) -> Memory:
        if not keep_eol:
            text = to_lf(text)
        memory = validate_for_write(file, text)
        version = guard.guarded_write(
            self.memory_dir / file,
            text.encode("utf-8"),
            expected,
            state_dir=self.state_dir,
            writer=writer,
            reason=reason,
        )
        try:
            self._upsert_index(file)
        except (SagememError, OSError) as exc:
            # The memory is safely written; failing now would invite a retry that conflicts.
            warnings.warn(
                f"{file} was written (version {version}), but MEMORY.md could not be updated: {exc}",
                SagememWarning,
                stacklevel=3,
            )
        return memory

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

    def _index_path(self) -> Path | None:
        """MEMORY.md, found case-insensitively; None if there is none."""
        if not self.memory_dir.is_dir():
            return None
        exact = self.memory_dir / INDEX_NAME
        if os.path.lexists(exact):
            return exact
        with os.scandir(self.memory_dir) as entries:
            found = [e.name for e in entries if name_key(e.name) == name_key(INDEX_NAME)]
        return self.memory_dir / sorted(found)[0] if found else None

    def _index_text(self) -> str:
        path = self._index_path()
        if path is None:
            return ""
        return decode(path.name, read_bytes(path, limit=None))

    def _write_index(self, text: str) -> None:
        path = self._index_path() or self.memory_dir / INDEX_NAME
        write_atomic(path, text.encode("utf-8"))

    def _upsert_index(self, file: str) -> None:
        """Bring `file`'s index line up to date from the file as it is on disk now: a writer that
        lost the race for the index must not put back what another writer replaced."""
        with guard.file_lock(self._index_path() or self.memory_dir / INDEX_NAME):
            try:
                memory = parse_memory(file, read_bytes(self.memory_dir / file))
            except (MemoryNotFound, InvalidMemory):
                return
            old = self._index_text()
            new = index.upsert(old, memory)
            if new != old:
                self._write_index(new)


def _by_key(memories: Iterable[Memory]) -> dict[str, Memory]:
    return {name_key(m.file): m for m in memories}


def _plain(value: Any) -> Any:
    """Tuples become lists so that YAML writes them as sequences."""
    return list(value) if isinstance(value, tuple) else value


def _ensure_lines(path: Path, lines: Sequence[str]) -> bool:
    """Append the `lines` missing from the text file at `path`; True if it changed."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip() for line in old.splitlines()}
    missing = [line for line in lines if line not in present]
    if not missing:
        return False
    prefix = old if not old or old.endswith("\n") else old + "\n"
    write_atomic(path, (prefix + "".join(f"{line}\n" for line in missing)).encode("utf-8"))
    return True
