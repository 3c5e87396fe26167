"""The searchable form of a memory directory.

Per memory: the tokens of its description fields (stage 1 of retrieval) and of each body
paragraph with its 1-based line range (stage 2), gathered into two inverted indexes. They
are kept in the cache (`cache.py`), which re-reads only files that changed; `Corpus` is the
read side, fetching postings term by term and entries only when they become results.
"""

from __future__ import annotations

import json
import re
import sqlite3
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..store.errors import SagememError
from ..store.names import is_memory_name, name_key
from ..store.text import conflict_marker_line, split_lines
from . import cache
from .bm25 import Index
from .cache import Progress
from .tokenize import MAX_SEGMENTED_CHARS, document_tokens

if TYPE_CHECKING:
    from ..store.memory import Memory

T = TypeVar("T")
# Stage-1 fields and their weights, applied by repeating the field's tokens.
FIELD_WEIGHTS = (("description", 3), ("name", 2), ("aliases", 2), ("tags", 1), ("file", 1))
MERGE_CONFLICT = "merge-conflict"
_HEADING = re.compile(r"^#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")


class Paragraph(NamedTuple):
    """A body paragraph: lines `start`..`end` of the file (1-based, inclusive)."""

    start: int
    end: int


class Entry(NamedTuple):
    """One memory as retrieval and injection see it."""

    file: str
    version: str
    name: str
    description: str
    type: str
    updated: str | None
    mtime: float
    baseline: bool
    baseline_priority: float
    body_start: int
    body_end: int
    paragraphs: tuple[Paragraph, ...]


class Tokens(NamedTuple):
    """One memory's tokens: its description fields, and each paragraph's, in order."""

    description: Mapping[str, int]
    paragraphs: tuple[Mapping[str, int], ...]


class Corpus:
    """A memory directory as retrieval sees it, read from the index on demand.

    `descriptions` indexes every memory's description fields (document id = the memory's
    `doc`), `paragraphs` every body paragraph (`owners[id]` = the memory's doc, `starts[id]`
    and `ends[id]` = its lines). Entries are decoded only when asked for.
    """

    def __init__(self, snapshot: cache.Snapshot) -> None:
        self._conn = snapshot.conn
        self._snapshot = snapshot
        meta, arrays = snapshot.meta, snapshot.arrays
        self._terms = _Terms(
            snapshot.conn, (len(arrays["description_lengths"]), len(arrays["paragraph_lengths"]))
        )
        self._entries: dict[int, Entry] = {}
        self.count: int = meta.get("descriptions_count", 0)
        self.descriptions = Index(
            _Postings(self._terms, 0),
            arrays["description_lengths"],
            self.count,
            meta.get("descriptions_total", 0),
        )
        self.paragraphs = Index(
            _Postings(self._terms, 1),
            arrays["paragraph_lengths"],
            meta.get("paragraphs_count", 0),
            meta.get("paragraphs_total", 0),
        )
        self.owners = arrays["paragraph_owners"]
        self.starts = arrays["paragraph_starts"]
        self.ends = arrays["paragraph_ends"]

    def close(self) -> None:
        self._conn.close()

    @property
    def pending(self) -> int:
        """Changed files not read yet: the call's deadline passed first (the next goes on)."""
        return self._snapshot.pending

    @property
    def repaired(self) -> str:
        """What was wrong with the index when this call found it damaged and built it again."""
        return self._snapshot.repaired

    def audit(self) -> None:
        """Read everything once, every entry and every term's postings, as queries would:
        `cache.CacheDamaged` (or SQLite's error) at the first fault."""
        (verdict,) = self._conn.execute("PRAGMA quick_check").fetchone()
        if verdict != "ok":
            raise cache.CacheDamaged(f"SQLite quick_check: {verdict}")
        for row in self._conn.execute("SELECT name, entry FROM files WHERE entry IS NOT NULL"):
            _decode(*row)
        for term, described, paragraphs in self._conn.execute(
            "SELECT term, descriptions, paragraphs FROM terms"
        ):
            _check(term, described, self._terms.sizes[0])
            _check(term, paragraphs, self._terms.sizes[1])

    def discard(self) -> None:
        """Close and delete the index: a query found it damaged (`cache.CacheDamaged`)."""
        self._snapshot.discard()

    def __enter__(self) -> Corpus:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def vocabulary(self) -> _Postings:
        """Every indexed term (a container: `term in corpus.vocabulary`)."""
        return self.descriptions.postings  # type: ignore[return-value]

    def entry(self, doc: int) -> Entry:
        found = self._entries.get(doc)
        if found is None:
            row = self._conn.execute("SELECT name, entry FROM files WHERE doc = ?", (doc,)).fetchone()
            if row is None or row[1] is None:
                raise cache.CacheDamaged(f"no entry for document {doc}")
            found = self._entries[doc] = _decode(*row)
        return found

    def entries(self) -> list[Entry]:
        """Every memory, in name order."""
        rows = self._conn.execute("SELECT name, entry FROM files WHERE entry IS NOT NULL")
        return sorted((_decode(*row) for row in rows), key=lambda e: (name_key(e.file), e.file))

    def baseline(self) -> list[Entry]:
        rows = self._conn.execute("SELECT name, entry FROM files WHERE baseline AND entry IS NOT NULL")
        return [_decode(*row) for row in rows]

    def descriptions_sample(self, limit: int = 200) -> list[str]:
        """Up to `limit` memories' descriptions: enough to tell the language they are written in."""
        rows = self._conn.execute("SELECT name, entry FROM files WHERE entry IS NOT NULL LIMIT ?", (limit,))
        return [_decode(*row).description for row in rows]

    def left_out(self) -> list[tuple[str, str]]:
        """(file, problem) for each memory left out of search on purpose (unresolved merge
        conflict markers), in name order."""
        rows = self._conn.execute("SELECT name, problem FROM files WHERE problem IS NOT NULL")
        found = [(str(n), str(p)) for n, p in rows if isinstance(n, str) and is_memory_name(n)]
        return sorted(found, key=lambda item: (name_key(item[0]), item[0]))


class _Terms:
    """The terms table, read row by row and kept: a query asks for each of its terms twice."""

    def __init__(self, conn: sqlite3.Connection, sizes: tuple[int, int]) -> None:
        self._conn = conn
        self.sizes = sizes  # how many description and paragraph ids there are
        self._rows: dict[str, tuple[bytes | None, bytes | None]] = {}

    def row(self, term: str) -> tuple[bytes | None, bytes | None]:
        found = self._rows.get(term)
        if found is None:
            got = self._conn.execute(
                "SELECT descriptions, paragraphs FROM terms WHERE term = ?", (term,)
            ).fetchone()
            found = self._rows[term] = got or (None, None)
            for packed, size in zip(found, self.sizes, strict=True):
                _check(term, packed, size)
        return found


def _check(term: str, packed: bytes | None, size: int) -> None:
    """Postings a query is about to use hold whole pairs of ids the arrays know; else the index
    is damaged, and the caller builds it again rather than answer from it."""
    if not packed:
        return
    pairs = array("I")
    try:
        pairs.frombytes(packed)
    except (ValueError, TypeError):
        raise cache.CacheDamaged(f"the postings of {term!r} are cut") from None
    if len(pairs) % 2 or max(pairs[::2]) >= size:
        raise cache.CacheDamaged(f"the postings of {term!r} name unknown documents")


class _Postings(Mapping[str, bytes]):
    """One column of the terms table as a read-only mapping, fetched term by term."""

    def __init__(self, terms: _Terms, column: int) -> None:
        self._terms, self._column = terms, column

    def __getitem__(self, term: str) -> bytes:
        found = self._terms.row(term)[self._column]
        if not found:
            raise KeyError(term)
        return found

    def get(self, term: str, default: Any = None) -> Any:  # type: ignore[override]
        return self._terms.row(term)[self._column] or default

    def __contains__(self, term: object) -> bool:
        """Held by either column: the vocabulary test."""
        return isinstance(term, str) and self._terms.row(term) != (None, None)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("the index is read term by term")

    def __len__(self) -> int:
        raise TypeError("the index is read term by term")


def split_paragraphs(body: str, first_line: int) -> list[tuple[int, int, str]]:
    """Paragraphs of `body` as (start, end, text), line numbers counted from `first_line`.

    Blank lines separate paragraphs; a heading starts a new one and belongs to the text under
    it (blank lines between them included); a fenced code block is never split.
    """
    found: list[tuple[int, int, str]] = []
    lines: list[str] = []
    start = end = first_line
    heading_only = in_fence = False
    for number, raw in enumerate(split_lines(body), first_line):
        line = raw.rstrip("\r\n")
        if not line.strip() and not in_fence:
            if lines and not heading_only:
                found.append((start, end, "\n".join(lines)))
                lines = []
            continue
        heading = not in_fence and _HEADING.match(line) is not None
        if heading and lines and not heading_only:
            found.append((start, end, "\n".join(lines)))
            lines = []
        if not lines:
            start = number
        lines.append(line)
        end = number
        heading_only = heading or (heading_only and not line.strip())
        if _FENCE.match(line):
            in_fence = not in_fence
    if lines:
        found.append((start, end, "\n".join(lines)))
    return found


def build(memory: Memory, mtime: float) -> tuple[Entry, Tokens]:
    """A memory's entry and tokens."""
    fields = {
        "description": memory.description,
        "name": memory.name,
        "aliases": " ".join(memory.aliases),
        "tags": " ".join(memory.tags),
        "file": re.sub(r"[_\-]+", " ", memory.file[:-3]),
    }
    described: Counter[str] = Counter()
    for field, weight in FIELD_WEIGHTS:
        for token in document_tokens(fields[field]):
            described[token] += weight
    paragraphs, counts = [], []
    left = MAX_SEGMENTED_CHARS  # what jieba may still cut in this memory; then pairs only
    for start, end, text in split_paragraphs(memory.body, memory.body_line):
        tf = Counter(document_tokens(text, words=left))
        left -= len(text)
        if tf:
            paragraphs.append(Paragraph(start, end))
            counts.append(dict(tf))
    body_lines = len(split_lines(memory.body))
    entry = Entry(
        file=memory.file,
        version=memory.version,
        name=memory.name,
        description=memory.description,
        type=memory.type,
        updated=memory.updated,
        mtime=mtime,
        baseline=memory.baseline,
        baseline_priority=memory.baseline_priority,
        body_start=memory.body_line,
        body_end=memory.body_line + max(body_lines, 1) - 1,
        paragraphs=tuple(paragraphs),
    )
    return entry, Tokens(dict(described), tuple(counts))


def index_file(
    name: str, data: bytes, mtime: float
) -> tuple[tuple[Any, ...], tuple[dict[str, int], list[dict[str, int]]]] | str | None:
    """What the cache stores for one file: its entry's fields and its tokens; "merge-conflict"
    for a memory with unresolved git conflict markers (left out, and the injection says so:
    half of each side, markers and all, is no memory to act on); None when the file is not a
    usable memory (`list` and `check` say why)."""
    from ..store.memory import parse_memory  # YAML is loaded only when a file needs indexing

    if conflict_marker_line(data.decode("utf-8", "replace")) is not None:
        return MERGE_CONFLICT
    try:
        entry, tokens = build(parse_memory(name, data), mtime)
    except SagememError:
        return None
    return _fields(entry), (dict(tokens.description), [dict(p) for p in tokens.paragraphs])


def load(
    memory_dir: Path,
    state_dir: Path,
    *,
    use_cache: bool = True,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> Corpus:
    """The corpus of `memory_dir`, brought up to date, or as far as `deadline` allows (see
    `cache.open_index`)."""
    snapshot = cache.open_index(
        memory_dir, state_dir, index_file, use_cache=use_cache, progress=progress, deadline=deadline
    )
    return Corpus(snapshot)


def using(
    memory_dir: Path,
    state_dir: Path,
    work: Callable[[Corpus], T],
    *,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> T:
    """`work(corpus)` on a freshly loaded corpus, closed afterwards. When the work finds the
    index damaged (`cache.CacheDamaged` where postings or entries are read, or SQLite's own
    `no such table`, `database disk image is malformed`), the index is deleted and built
    again, once, and the work done on the new one; damaged again, the work is done on an
    index built in memory, so the call still answers."""
    for use_cache in (True, True, False):
        with load(memory_dir, state_dir, use_cache=use_cache, progress=progress, deadline=deadline) as corpus:
            try:
                return work(corpus)
            except (cache.CacheDamaged, sqlite3.DatabaseError) as exc:
                if not use_cache or not cache.damaged(exc):
                    raise
                corpus.discard()
    raise AssertionError("unreachable: the last attempt returns or raises")


def using_all(
    places: Sequence[tuple[Path, Path]],
    work: Callable[[list[Corpus]], T],
    *,
    deadline: float | None = None,
) -> T:
    """`using` for several directories at once ((memory dir, state dir) each): the work gets
    their corpora in order. Damage found by the work rebuilds them all once (it cannot tell
    which), then, found again, the work is done on indexes built in memory."""
    if len(places) == 1:
        return using(*places[0], lambda corpus: work([corpus]), deadline=deadline)
    for use_cache in (True, True, False):
        corpora = [load(m, s, use_cache=use_cache, deadline=deadline) for m, s in places]
        try:
            return work(corpora)
        except (cache.CacheDamaged, sqlite3.DatabaseError) as exc:
            if not use_cache or not cache.damaged(exc):
                raise
            for corpus in corpora:
                corpus.discard()
        finally:
            for corpus in corpora:
                corpus.close()
    raise AssertionError("unreachable: the last attempt returns or raises")


def verify(memory_dir: Path, state_dir: Path) -> str | None:
    """Read the whole persisted index once (`check`): None when it was sound, else what was
    wrong with it. A damaged index is deleted and built again on the way (it is derived from
    the memory files, which are not touched)."""
    with load(memory_dir, state_dir) as corpus:
        try:
            corpus.audit()
            return corpus.repaired or None
        except (cache.CacheDamaged, sqlite3.DatabaseError) as exc:
            if not cache.damaged(exc):
                raise
            corpus.discard()
            problem = str(exc) or type(exc).__name__
    load(memory_dir, state_dir).close()
    return problem


def _decode(name: Any, raw: Any) -> Entry:
    """An entry as the index stores it. Its file name passes the rule every name from outside
    passes, and is the row's own name, so nothing read from an index (which may have come with
    a clone) can point outside the directory."""
    try:
        entry = _entry(json.loads(raw))
    except (ValueError, TypeError, RecursionError) as exc:
        raise cache.CacheDamaged(f"an entry does not decode: {exc}") from None
    if not isinstance(name, str) or entry.file != name or not is_memory_name(name):
        raise cache.CacheDamaged(f"an entry names {entry.file!r}, not a memory file of this directory")
    return entry


def _fields(entry: Entry) -> tuple[object, ...]:
    values = list(entry)
    values[-1] = tuple((p.start, p.end) for p in entry.paragraphs)
    return tuple(values)


def _entry(fields: Any) -> Entry:
    *head, paragraphs = fields
    return Entry(*head, tuple(Paragraph(*p) for p in paragraphs))
