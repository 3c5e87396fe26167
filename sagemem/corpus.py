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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from . import cache
from .bm25 import Index
from .cache import Progress
from .errors import SagememError
from .names import name_key
from .text import split_lines
from .tokenize import document_tokens

if TYPE_CHECKING:
    from .memory import Memory

T = TypeVar("T")
# Stage-1 fields and their weights, applied by repeating the field's tokens.
FIELD_WEIGHTS = (("description", 3), ("name", 2), ("aliases", 2), ("tags", 1), ("file", 1))
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
            row = self._conn.execute("SELECT entry FROM files WHERE doc = ?", (doc,)).fetchone()
            if row is None or row[0] is None:
                raise cache.CacheDamaged(f"no entry for document {doc}")
            try:
                found = self._entries[doc] = _entry(json.loads(row[0]))
            except (ValueError, TypeError) as exc:
                raise cache.CacheDamaged(f"entry {doc} does not decode: {exc}") from None
        return found

    def entries(self) -> list[Entry]:
        """Every memory, in name order."""
        rows = self._conn.execute("SELECT entry FROM files WHERE entry IS NOT NULL")
        return sorted((_entry(json.loads(e)) for (e,) in rows), key=lambda e: (name_key(e.file), e.file))

    def baseline(self) -> list[Entry]:
        rows = self._conn.execute("SELECT entry FROM files WHERE baseline AND entry IS NOT NULL")
        return [_entry(json.loads(e)) for (e,) in rows]


class _Terms:
    """The terms table, read row by row and kept: a query asks for each of its terms twice."""

    def __init__(self, conn: sqlite3.Connection, sizes: tuple[int, int]) -> None:
        self._conn = conn
        self._sizes = sizes  # how many description and paragraph ids there are
        self._rows: dict[str, tuple[bytes | None, bytes | None]] = {}

    def row(self, term: str) -> tuple[bytes | None, bytes | None]:
        found = self._rows.get(term)
        if found is None:
            got = self._conn.execute(
                "SELECT descriptions, paragraphs FROM terms WHERE term = ?", (term,)
            ).fetchone()
            found = self._rows[term] = got or (None, None)
            for packed, size in zip(found, self._sizes, strict=True):
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
    for start, end, text in split_paragraphs(memory.body, memory.body_line):
        tf = Counter(document_tokens(text))
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
) -> tuple[tuple[Any, ...], tuple[dict[str, int], list[dict[str, int]]]] | None:
    """What the cache stores for one file: its entry's fields and its tokens, or None when the
    file is not a usable memory (`list` and `check` say why)."""
    from .memory import parse_memory  # YAML is loaded only when a file needs indexing

    try:
        entry, tokens = build(parse_memory(name, data), mtime)
    except SagememError:
        return None
    return _fields(entry), (dict(tokens.description), [dict(p) for p in tokens.paragraphs])


def load(
    memory_dir: Path, state_dir: Path, *, use_cache: bool = True, progress: Progress | None = None
) -> Corpus:
    """The corpus of `memory_dir`, brought up to date (see `cache`)."""
    return Corpus(cache.open_index(memory_dir, state_dir, index_file, use_cache=use_cache, progress=progress))


def using(
    memory_dir: Path,
    state_dir: Path,
    work: Callable[[Corpus], T],
    *,
    progress: Progress | None = None,
) -> T:
    """`work(corpus)` on a freshly loaded corpus, closed afterwards. When the work finds the
    index damaged (`cache.CacheDamaged`, raised where postings or entries are read), the index
    is deleted and built again, once, and the work done on the new one."""
    for attempt in (1, 2):
        with load(memory_dir, state_dir, progress=progress) as corpus:
            try:
                return work(corpus)
            except cache.CacheDamaged:
                if attempt == 2:
                    raise
                corpus.discard()
    raise AssertionError("unreachable: the second attempt returns or raises")


def _fields(entry: Entry) -> tuple[object, ...]:
    values = list(entry)
    values[-1] = tuple((p.start, p.end) for p in entry.paragraphs)
    return tuple(values)


def _entry(fields: Any) -> Entry:
    *head, paragraphs = fields
    return Entry(*head, tuple(Paragraph(*p) for p in paragraphs))
