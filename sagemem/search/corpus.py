"""The searchable form of a memory directory.

Per memory: the tokens of its description fields (stage 1 of retrieval) and of each body
paragraph with its 1-based line range (stage 2), gathered into two inverted indexes. They
are kept in the cache (`cache.py`), which re-reads only files that changed; `Corpus` is the
read side, fetching postings term by term and entries only when they become results.

Secrets are found when a file is indexed: by the full scan, or, when the prompt hook indexes
a file within its deadline, by the pattern pass (`secrets.scan_patterns`). Such a file is
read again with the full scan by the next call without a deadline, and the hook starts one
itself, detached, once it has answered (`full_scan_later`). The entry keeps where they are
(`secrets`, offsets in the file's text); its name and description, and the tokens, are taken
from the text with them redacted, so the index holds none of them and a search for one finds
nothing. The file on disk is the person's and stays as it is (`check` names what it holds).
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import re
import sqlite3
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from ..store import secrets
from ..store.errors import SagememError
from ..store.names import is_memory_name, name_key
from ..store.records import TYPE_CHECKING, Record
from ..store.text import conflict_marker_line, split_lines
from . import cache
from .bm25 import Index
from .cache import Progress
from .tokenize import MAX_SEGMENTED_CHARS, document_tokens

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from ..store.forms import EntryForm
    from ..store.memory import Memory

    T = TypeVar("T")

# Stage-1 fields and their weights, applied by repeating the field's tokens.
FIELD_WEIGHTS = (("description", 3), ("name", 2), ("aliases", 2), ("tags", 1), ("file", 1))
MERGE_CONFLICT = "merge-conflict"
_HEADING = re.compile(r"^#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A list item's first line (`- x`, `* x`, `+ x`, `1. x`, `2) x`), indented at most three
# spaces (more is code in Markdown); a table row, and the rule under a table's header row.
_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])[ \t]+\S")
_ROW = re.compile(r"^ {0,3}\|")
_RULE = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
LEAD_LINES = 2  # the lead of a list or table: at most its last two lines


class Paragraph(Record):
    """A retrieval unit: lines `start`..`end` of the file (1-based, inclusive). A list item
    or a table row also names its context, shown and searched with it: the line of the
    heading it is under (`heading`) and the lines that lead into its list or table
    (`lead`..`lead_end`: a lead-in such as "Steps:", a table's header row); 0 for none."""

    start: int
    end: int
    heading: int = 0
    lead: int = 0
    lead_end: int = 0

    @property
    def context(self) -> tuple[int, ...]:
        """The context's line numbers, in order."""
        lead = range(self.lead, self.lead_end + 1) if self.lead else range(0)
        return tuple(n for n in (self.heading, *lead) if n)


class Entry(Record):
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
    secrets: tuple[tuple[int, int], ...] = ()  # (start, end) in the file's text, to redact


class Tokens(Record):
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
        meta, columns = snapshot.meta, snapshot.columns
        arrays = columns.arrays
        self._terms = _Terms(snapshot.conn, columns)
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

    @property
    def connection(self) -> sqlite3.Connection:
        """The index's SQLite connection (its tables: docs/performance.md), for looking at
        what the index holds; never for writing. Retrieval reads it through the methods."""
        return self._conn

    def close(self) -> None:
        self._conn.close()

    @property
    def pending(self) -> int:
        """Changed files not read yet: the call's deadline passed first (the next goes on)."""
        return self._snapshot.pending

    @property
    def unscanned(self) -> Path | None:
        """The index file, when it is kept on disk and holds files only the pattern pass has
        read (the prompt hook indexed them within its deadline): `full_scan_later` reads them
        again."""
        return self._snapshot.path if self._snapshot.unscanned else None

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
        self.read_arrays()
        if sum(self.descriptions.lengths) != self.descriptions.total:
            raise cache.CacheDamaged("the arrays do not match the files")
        if sum(self.paragraphs.lengths) != self.paragraphs.total:
            raise cache.CacheDamaged("the arrays do not match the statistics")
        for row in self._conn.execute("SELECT name, entry FROM files WHERE entry IS NOT NULL"):
            _decode(*row)
        for term, described, paragraphs in self._conn.execute(
            "SELECT term, descriptions, paragraphs FROM terms"
        ):
            _check(term, described, self._terms.sizes[0])
            _check(term, paragraphs, self._terms.sizes[1])

    def read_arrays(self) -> None:
        """Read the per-id arrays whole: a query reads only the slices its terms need, and a
        walk over every id (an audit, a comparison) needs them all."""
        self._snapshot.columns.need_all()

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

    def file(self, doc: int) -> str:
        """A memory's file name, from its row: what ranking needs to break a tie, without
        decoding the entry. A name no memory may have is damage, as in an entry."""
        found = self._entries.get(doc)
        if found is not None:
            return found.file
        query = "SELECT name FROM files WHERE doc = ? AND entry IS NOT NULL"
        row = self._conn.execute(query, (doc,)).fetchone()
        if row is None or not isinstance(row[0], str) or not is_memory_name(row[0]):
            raise cache.CacheDamaged(f"no entry for document {doc}")
        return row[0]

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
    """The terms table, read row by row and kept: a query asks for each of its terms twice.
    A row read brings in the slices of the per-id arrays its ids fall in."""

    COLUMNS = (("description_lengths",), cache.PARAGRAPH_ARRAYS)  # what each column's ids index

    def __init__(self, conn: sqlite3.Connection, columns: cache.Columns) -> None:
        self._conn = conn
        self._columns = columns
        # how many description and paragraph ids there are
        self.sizes = (columns.size("description_lengths"), columns.size("paragraph_lengths"))
        self._rows: dict[str, tuple[bytes | None, bytes | None]] = {}

    def row(self, term: str) -> tuple[bytes | None, bytes | None]:
        found = self._rows.get(term)
        if found is None:
            found = cache.postings(self._conn, term)
            for packed, size, names in zip(found, self.sizes, self.COLUMNS, strict=True):
                ids = _check(term, packed, size)
                if ids:
                    self._columns.need(names, ids)
            self._rows[term] = found
        return found


def _check(term: str, packed: bytes | None, size: int) -> array[int] | None:
    """The ids of postings a query is about to use, which must be whole pairs of ids the
    arrays know; else the index is damaged, and the caller builds it again rather than
    answer from it."""
    if not packed:
        return None
    pairs = array("I")
    try:
        pairs.frombytes(packed)
    except (ValueError, TypeError):
        raise cache.CacheDamaged(f"the postings of {term!r} are cut") from None
    ids = pairs[::2]
    if len(pairs) % 2 or max(ids) >= size:
        raise cache.CacheDamaged(f"the postings of {term!r} name unknown documents")
    return ids


class _Postings(Mapping[str, bytes]):
    """One column of the terms table as a read-only mapping, fetched term by term."""

    def __init__(self, terms: _Terms, column: int) -> None:
        self._terms, self._column = terms, column

    def __getitem__(self, term: str) -> bytes:
        found = self._terms.row(term)[self._column]
        if not found:
            raise KeyError(term)
        return found

    def get(self, term: str, default: Any = None) -> Any:
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
    found = _paragraphs(body, first_line)
    return [(rows[0].number, rows[-1].number, "\n".join(r.text for r in rows)) for rows in found]


class _Row(Record):
    number: int
    text: str
    fenced: bool  # a line of a fenced code block, its fences included


def _paragraphs(body: str, first_line: int) -> list[list[_Row]]:
    """Each paragraph's lines (see `split_paragraphs`), blank ones left out."""
    found: list[list[_Row]] = []
    rows: list[_Row] = []
    heading_only = in_fence = False
    for number, raw in enumerate(split_lines(body), first_line):
        line = raw.rstrip("\r\n")
        if not line.strip() and not in_fence:
            if rows and not heading_only:
                found.append(rows)
                rows = []
            continue
        heading = not in_fence and _HEADING.match(line) is not None
        if heading and rows and not heading_only:
            found.append(rows)
            rows = []
        fence = _FENCE.match(line) is not None
        rows.append(_Row(number, line, in_fence or fence))
        heading_only = heading or (heading_only and not line.strip())
        if fence:
            in_fence = not in_fence
    if rows:
        found.append(rows)
    return found


def split_units(body: str, first_line: int) -> list[tuple[Paragraph, str]]:
    """The retrieval units of `body`, each with the text it is searched by.

    A paragraph (`split_paragraphs`) is a unit, except a list of two or more items, or a
    table: then each item (with its indented lines and sub-items) and each row is one, with
    its context: the heading it is under and the lead of its list (the paragraph's lines
    before the first item, at most `LEAD_LINES`, or a paragraph ending in a colon just before
    a list whose items are paragraphs of their own), or its table's lead and header row. A
    question about one step of a ten-step runbook then gets that step and where it stands,
    not the whole list.
    """
    found: list[tuple[Paragraph, str]] = []
    heading: _Row | None = None  # the last heading seen
    loose: list[_Row] = []  # the lead of a list whose items are paragraphs of their own

    def unit(items: list[_Row], lead: list[_Row]) -> tuple[Paragraph, str]:
        above = heading if heading is not None and heading.number < (lead or items)[0].number else None
        context = ([above] if above else []) + lead
        place = Paragraph(
            items[0].number,
            items[-1].number,
            above.number if above else 0,
            lead[0].number if lead else 0,
            lead[-1].number if lead else 0,
        )
        return place, "\n".join(r.text for r in context + items)

    for rows in _paragraphs(body, first_line):
        top = 0
        while top < len(rows) and not rows[top].fenced and _HEADING.match(rows[top].text):
            heading, top = rows[top], top + 1
        listed = _list(rows, top)
        parts = listed or _table(rows, top)
        if parts is None:
            if top == 0 and loose and _ITEM.match(rows[0].text):  # an item of a loose list
                found.append(unit(rows, loose))
                continue
            found.append((Paragraph(rows[0].number, rows[-1].number), "\n".join(r.text for r in rows)))
            last = rows[-1]
            loose = [last] if last.text.rstrip().endswith((":", "：")) and not last.fenced else []
            continue
        lead, spans = parts
        if not lead and top == 0 and loose:
            lead = loose
        found += [unit(rows[a : b + 1], lead) for a, b in spans]
        loose = lead if listed and not rows[-1].fenced else []
    return found


def _list(rows: list[_Row], top: int) -> tuple[list[_Row], list[tuple[int, int]]] | None:
    """A list in `rows` from row `top` on: its lead's rows (the last `LEAD_LINES` before the
    first item), and each item's first and last row index; None when there are fewer than
    two items. Every row after the first item belongs to an item: one indented more than the
    items' markers, a sub-item or a code block, to the item above it."""
    first = next((i for i in range(top, len(rows)) if _ITEM.match(rows[i].text) and not rows[i].fenced), None)
    if first is None or any(r.fenced for r in rows[top:first]):
        return None
    indent = _indent(rows[first].text)
    starts = [
        i
        for i in range(first, len(rows))
        if not rows[i].fenced and _ITEM.match(rows[i].text) and _indent(rows[i].text) <= indent
    ]
    if len(starts) < 2:
        return None
    spans = [(a, b - 1) for a, b in zip(starts, [*starts[1:], len(rows)], strict=True)]
    return rows[max(top, first - LEAD_LINES) : first], spans


def _table(rows: list[_Row], top: int) -> tuple[list[_Row], list[tuple[int, int]]] | None:
    """A table in `rows` from row `top` on: its lead (the last `LEAD_LINES` before it) with
    its header row and rule, and each further row's index; None when the rows are no table
    (a header row, a rule such as `|---|:--:|`, one row or more, and nothing after them)."""
    first = next((i for i in range(top, len(rows)) if _ROW.match(rows[i].text)), None)
    if first is None or first + 2 >= len(rows) or not _RULE.match(rows[first + 1].text):
        return None
    if any(r.fenced for r in rows[top:]) or not all(_ROW.match(r.text) for r in rows[first + 2 :]):
        return None
    return rows[max(top, first - LEAD_LINES) : first + 2], [(i, i) for i in range(first + 2, len(rows))]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def build(memory: Memory, mtime: float, text: str = "", *, full: bool = True) -> tuple[Entry, Tokens]:
    """A memory's entry and tokens. The secrets in its file's `text` are found by the full
    scan, or (`full` False) the pattern pass; what the entry shows and the tokens come from
    the memory with them redacted."""
    scan = secrets.scan if full else secrets.scan_patterns
    found = [(s.start, s.end) for s in scan(text)] if text else []
    shown = _shown(memory, text, found, scan) if found else memory
    fields = {
        "description": shown.description,
        "name": shown.name,
        "aliases": " ".join(shown.aliases),
        "tags": " ".join(shown.tags),
        "file": re.sub(r"[_\-]+", " ", memory.file[:-3]),
    }
    described: Counter[str] = Counter()
    for field, weight in FIELD_WEIGHTS:
        for token in document_tokens(fields[field]):
            described[token] += weight
    paragraphs, counts = [], []
    left = MAX_SEGMENTED_CHARS  # what jieba may still cut in this memory; then pairs only
    for unit, text in split_units(shown.body, memory.body_line):
        tf = Counter(document_tokens(text, words=left))
        left -= len(text)
        if tf:
            paragraphs.append(unit)
            counts.append(dict(tf))
    body_lines = len(split_lines(memory.body))
    entry = Entry(
        file=memory.file,
        version=memory.version,
        name=shown.name,
        description=shown.description,
        type=memory.type,
        updated=memory.updated,
        mtime=mtime,
        baseline=memory.baseline,
        baseline_priority=memory.baseline_priority,
        body_start=memory.body_line,
        body_end=memory.body_line + max(body_lines, 1) - 1,
        paragraphs=tuple(paragraphs),
        secrets=tuple(sorted(found)),
    )
    return entry, Tokens(dict(described), tuple(counts))


class _Shown(Record):
    """What of a memory is indexed and shown, its secrets redacted."""

    name: str
    description: str
    aliases: tuple[str, ...]
    tags: tuple[str, ...]
    body: str


def _shown(
    memory: Memory, text: str, found: list[tuple[int, int]], scan: Callable[[str], list[Any]]
) -> _Shown:
    """`memory` with the secrets at `found` (in its file's `text`) redacted from its body, and
    those `scan` finds in each field (parsed from YAML, a field is not the file's text)."""
    lines = split_lines(text)
    offset = sum(len(line) for line in lines[: memory.body_line - 1])
    raw = text[offset:]
    if raw.replace("\r\n", "\n") == memory.body:
        body = secrets.redact(raw, [(a - offset, b - offset) for a, b in found if b > offset])
        body = body.replace("\r\n", "\n")
    else:  # not the file's own text: scan the body by itself
        body = secrets.redact(memory.body, scan(memory.body))

    def clean(value: str) -> str:
        return secrets.redact(value, scan(value)) if value else value

    return _Shown(
        clean(memory.name),
        clean(memory.description),
        tuple(clean(a) for a in memory.aliases),
        tuple(clean(t) for t in memory.tags),
        body,
    )


def index_file(
    name: str, data: bytes, mtime: float, full: bool = True
) -> tuple[EntryForm, tuple[dict[str, int], list[dict[str, int]]]] | str | None:
    """What the cache stores for one file: its entry's fields (by name) and its tokens;
    "merge-conflict" for a memory with unresolved git conflict markers (left out, and the
    injection says so: half of each side, markers and all, is no memory to act on); None when
    the file is not a usable memory (`list` and `check` say why). Its secrets are found by
    the full scan, or (`full` False: the prompt hook, within its deadline) the pattern pass."""
    from ..store.memory import parse_memory  # YAML is loaded only when a file needs indexing

    if conflict_marker_line(data.decode("utf-8", "replace")) is not None:
        return MERGE_CONFLICT
    try:
        memory = parse_memory(name, data)
        entry, tokens = build(memory, mtime, data.decode("utf-8"), full=full)
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
    a clone) can point outside the directory; every field has its type (`shown` redacts what
    it shows)."""
    try:
        entry = _entry(json.loads(raw))
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise cache.CacheDamaged(f"an entry does not decode: {exc}") from None
    if not isinstance(name, str) or entry.file != name or not is_memory_name(name):
        raise cache.CacheDamaged(f"an entry names {entry.file!r}, not a memory file of this directory")
    return entry


def shown(value: str) -> str:
    """Text of an entry (its description) as it may be shown: with what the pattern pass finds
    redacted, as the index did when it built the entry (`secrets.shown`). Applied where an
    entry is shown, not where it is ranked: a forged index's entry shows no secret either."""
    return secrets.shown(value)


# How an entry is stored: each field by its name, of its JSON type exactly (JSON's `true` is
# no line number). Checked as one tuple of types against the allowed ones: an entry is
# decoded for every candidate of a query.
_TYPES: dict[str, tuple[type, ...]] = {
    "file": (str,),
    "version": (str,),
    "name": (str,),
    "description": (str,),
    "type": (str,),
    "updated": (str, type(None)),
    "mtime": (int, float),
    "baseline": (bool,),
    "baseline_priority": (int, float),
    "body_start": (int,),
    "body_end": (int,),
}
_VALUES = operator.itemgetter(*_TYPES)
_ALLOWED = frozenset(itertools.product(*_TYPES.values()))
MAX_SPANS = 100_000  # a 512 KiB memory holds fewer findings than this
MAX_OFFSET = 1 << 24


def _fields(entry: Entry) -> EntryForm:
    """An entry as the index stores it (`forms.EntryForm`): a field added to `Entry` is not
    stored until it is added here, with the index's format number."""
    found: EntryForm = {
        "file": entry.file,
        "version": entry.version,
        "name": entry.name,
        "description": entry.description,
        "type": entry.type,
        "updated": entry.updated,
        "mtime": entry.mtime,
        "baseline": entry.baseline,
        "baseline_priority": entry.baseline_priority,
        "body_start": entry.body_start,
        "body_end": entry.body_end,
        "paragraphs": [[p.start, p.end] for p in entry.paragraphs],
        "secrets": [list(span) for span in entry.secrets],
    }
    if any(p.heading or p.lead for p in entry.paragraphs):
        found["contexts"] = [[p.heading, p.lead, p.lead_end] for p in entry.paragraphs]
    return found


def _entry(fields: Any) -> Entry:
    if type(fields) is not dict:
        raise TypeError("an entry is a JSON object")
    values = _VALUES(fields)
    if tuple(map(type, values)) not in _ALLOWED:
        wrong = next(k for k, v in zip(_TYPES, values, strict=True) if type(v) not in _TYPES[k])
        raise TypeError(f"{wrong} is {type(fields[wrong]).__name__}")
    return Entry(  # type: ignore[misc]  # `values` are the fields before these two
        *values,
        paragraphs=_units(_pairs(fields["paragraphs"], "a paragraph's lines"), fields.get("contexts")),
        secrets=tuple(_pairs(fields.get("secrets", []), "a secret's place")),
    )


def _units(lines: list[tuple[int, int]], contexts: Any) -> tuple[Paragraph, ...]:
    """The units of an entry: their lines, and the lines of their context (each before the
    unit it belongs to, the lead's in order), when the entry names any."""
    if contexts is None:
        return tuple(itertools.starmap(Paragraph, lines))
    if type(contexts) is not list or len(contexts) != len(lines):
        raise TypeError("contexts: one for each paragraph is expected")
    units = []
    for (start, end), context in zip(lines, contexts, strict=True):
        if type(context) is not list or len(context) != 3 or not all(type(n) is int for n in context):
            raise TypeError("a context is not three whole numbers")
        heading, lead, lead_end = context
        if not (0 <= heading < start and 0 <= lead <= lead_end < start and (lead or not lead_end)):
            raise TypeError("a context is not lines before its paragraph")
        units.append(Paragraph(start, end, heading, lead, lead_end))
    return tuple(units)


def _pairs(value: Any, what: str) -> list[tuple[int, int]]:
    """A list of pairs of whole numbers, the first not above the second: line numbers or
    offsets."""
    if type(value) is not list or len(value) > MAX_SPANS:
        raise TypeError(f"{what}: a list of at most {MAX_SPANS:,} pairs is expected")
    try:
        pairs = [(first, second) for first, second in value]
    except (TypeError, ValueError):
        raise TypeError(f"{what} is not a pair") from None
    if not all(type(a) is int and type(b) is int and 0 <= a <= b <= MAX_OFFSET for a, b in pairs):
        raise TypeError(f"{what} is not two whole numbers in order")
    return pairs


# --- the full scan the prompt hook leaves for later -----------------------------------------

# `python -c` with the current directory taken off the path: neither the project nor a state
# directory that came with it can shadow this installation's sagemem.
_FULL_SCAN = (
    "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "from sagemem.search.corpus import full_scan; full_scan(sys.argv[1:])"
)
FULL_SCAN_AFTER = 60.0  # seconds: a scan started this recently and not done (running, failed) waits


def full_scan_later(places: Sequence[tuple[Path, Path, Path]]) -> bool:
    """Start, detached, a process that reads again with the full scan the files that the
    prompt hook indexed with the pattern pass alone, for each (memory dir, state dir, index
    file); whether one was started. Never waited for: its own session, standard streams on the
    null device (never a pipe a harness reads to its end, never a FIFO), run from `/` by this
    Python. A scan that started in the last `FULL_SCAN_AFTER` seconds and has not finished
    (it is running, or it failed) is not started again, and the scan's lock keeps two from
    running on one index."""
    argv: list[str] = []
    for memory_dir, state_dir, index in places:
        try:
            stamp = os.stat(_scan_lock(index)).st_mtime
        except OSError:
            stamp = 0.0
        if time.time() - stamp >= FULL_SCAN_AFTER:
            argv += [str(p.absolute()) for p in (memory_dir, state_dir, index)]
    if not argv:
        return False
    actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    command = [sys.executable, "-c", _FULL_SCAN, *argv]
    try:
        os.posix_spawn(sys.executable, command, os.environ, file_actions=actions, setsid=True)
    except NotImplementedError:  # no POSIX_SPAWN_SETSID here: its own process group will do
        os.posix_spawn(sys.executable, command, os.environ, file_actions=actions, setpgroup=0)
    return True


def full_scan(argv: Sequence[str]) -> None:
    """The detached process's work: for each memory dir, state dir and index file in `argv`,
    under the index's scan lock (taken at once, or left to the process that holds it), bring
    the index up to date without a deadline, so every file the pattern pass alone has read is
    read again with the full scan. Failures go to the hook's log; nothing is printed."""
    from ..store.locking import LockTimeout, exclusive
    from ..store.log import log_once

    os.chdir(os.sep)
    for memory_dir, state_dir, index in zip(argv[::3], argv[1::3], argv[2::3], strict=False):
        memory, state, lock = Path(memory_dir), Path(state_dir), _scan_lock(Path(index))
        if not memory.is_dir():
            continue  # gone since the hook ran: nothing to scan
        try:
            with exclusive(lock, 0):
                os.utime(lock)  # started: the hook starts no other for a while
                load(memory, state).close()
                os.utime(lock, (0, 0))  # done: the next file the hook indexes has its scan at once
        except LockTimeout:
            continue  # another process holds the lock: it is scanning now
        except Exception as exc:  # noqa: BLE001 - a detached process has no one else to tell
            message = f"full scan in the background failed: {type(exc).__name__}: {exc}"
            log_once(state, message, "hook.log", once=False)


def _scan_lock(index: Path) -> Path:
    """The full scan's lock and stamp, beside the index it scans for."""
    return index.with_name(index.name + ".scan")
