"""The searchable form of a memory directory, cached in the state dir.

Per memory: the tokens of its description fields (stage 1 of retrieval) and of each body
paragraph with its 1-based line range (stage 2), gathered into two inverted indexes.
Building them means parsing YAML and, for Chinese, loading jieba, so two cache files keep
the work between calls:

* `<state>/cache/index`: the inverted indexes and every file's stat. When no memory's stat
  (mtime, size, inode, ctime) changed, this one read is all a call needs.
* `<state>/cache/tokens`: each file's tokens. When some files changed, only those are read
  again, and a file whose stat changed but whose bytes hash the same is not re-tokenised;
  the indexes are then rebuilt from the tokens.

A cache that is missing, damaged (each file carries a checksum) or of another format is
ignored and rebuilt, never trusted; results are the same with and without it. Cache writes
are atomic, so two processes refreshing it at once each leave a whole file. Where the state
dir cannot be written (a sandbox), the cache goes to the user's cache directory instead.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import re
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bm25 import Index
from .config import user_cache_dir
from .errors import SagememError
from .files import read_bytes, write_atomic
from .names import check_name, is_reserved, name_key
from .text import split_lines
from .tokenize import document_tokens

if TYPE_CHECKING:
    from .memory import Memory

FORMAT = 2
# Stage-1 fields and their weights, applied by repeating the field's tokens.
FIELD_WEIGHTS = (("description", 3), ("name", 2), ("aliases", 2), ("tags", 1), ("file", 1))
_HEADING = re.compile(r"^#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")
Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class Paragraph:
    """A body paragraph: lines `start`..`end` of the file (1-based, inclusive)."""

    start: int
    end: int


@dataclass(frozen=True)
class Entry:
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


@dataclass(frozen=True)
class Tokens:
    """One memory's tokens: its description fields, and each paragraph's, in order."""

    description: Mapping[str, int]
    paragraphs: tuple[Mapping[str, int], ...]


@dataclass(frozen=True)
class Corpus:
    """Every memory's entry in name order, an index over their description fields (document
    id = entry position) and one over all their paragraphs (`owners[id]` = (entry position,
    paragraph position))."""

    entries: tuple[Entry, ...]
    descriptions: Index
    paragraphs: Index
    owners: tuple[tuple[int, int], ...]

    @property
    def vocabulary(self) -> _Vocabulary:
        return _Vocabulary(self.descriptions.postings, self.paragraphs.postings)


class _Vocabulary:
    """Every indexed term, without building a set on each call."""

    def __init__(self, *postings: Mapping[str, bytes]) -> None:
        self._postings = postings

    def __contains__(self, term: object) -> bool:
        return any(term in p for p in self._postings)


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


def load(memory_dir: Path, state_dir: Path, *, use_cache: bool = True) -> Corpus:
    """The corpus of `memory_dir`, from the cache where files have not changed."""
    folders = _cache_folders(memory_dir, state_dir) if use_cache else []
    stamps = dict(_memory_files(memory_dir))
    for folder in folders:
        ready = _read_index(folder / "index", stamps)
        if ready is not None:
            return ready
    known = next((found for f in folders if (found := _read_tokens(f / "tokens"))), {})
    files: dict[str, tuple[Stamp, Entry, Tokens]] = {}
    for name, stamp in stamps.items():
        hit = known.get(name)
        if hit is not None and hit[0] == stamp:
            files[name] = hit
            continue
        fresh = _index_file(memory_dir / name, stamp, hit)
        if fresh is not None:
            files[name] = fresh
    order = sorted(files, key=lambda n: (name_key(n), n))
    entries = tuple(files[n][1] for n in order)
    owners = tuple((e, p) for e, entry in enumerate(entries) for p in range(len(entry.paragraphs)))
    corpus = Corpus(
        entries,
        Index.build(files[n][2].description for n in order),
        Index.build(tf for n in order for tf in files[n][2].paragraphs),
        owners,
    )
    for folder in folders:
        if _save(folder, corpus, files, stamps):
            break
    return corpus


def _cache_folders(memory_dir: Path, state_dir: Path) -> list[Path]:
    """Where the cache may live: the state dir, else the user's cache dir (keyed by memory dir)."""
    key = hashlib.sha256(str(memory_dir.absolute()).encode("utf-8")).hexdigest()[:16]
    return [state_dir / "cache", user_cache_dir() / key]


def _memory_files(memory_dir: Path) -> list[tuple[str, Stamp]]:
    if not memory_dir.is_dir():
        raise SagememError(f"{memory_dir}: memory directory does not exist (run `sagemem init`)")
    found = []
    with os.scandir(memory_dir) as items:
        for item in items:
            name = item.name
            if not name.lower().endswith(".md") or name.startswith(".") or is_reserved(name):
                continue
            if not item.is_file(follow_symlinks=False):
                continue
            try:
                check_name(name)
            except SagememError:
                continue
            info = item.stat(follow_symlinks=False)
            # ctime too: an edit that keeps the size and restores the mtime (cp -p, rsync -t,
            # tar) still changes it.
            found.append((name, (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)))
    return found


def _index_file(
    path: Path, stamp: Stamp, previous: tuple[Stamp, Entry, Tokens] | None
) -> tuple[Stamp, Entry, Tokens] | None:
    """A fresh (stamp, entry, tokens) for `path`, or None if it is not a usable memory (`list`
    and `check` say why)."""
    try:
        data = read_bytes(path)
        mtime = stamp[0] / 1e9
        if previous is not None and previous[1].version == hashlib.sha256(data).hexdigest():
            return stamp, Entry(**{**previous[1].__dict__, "mtime": mtime}), previous[2]
        from .memory import parse_memory  # YAML is loaded only when a file needs indexing

        return (stamp, *build(parse_memory(path.name, data), mtime))
    except SagememError:
        return None


def _read_index(path: Path, stamps: dict[str, Stamp]) -> Corpus | None:
    data = _read(path)
    if data is None or data.get("stamps") != {n: list(s) for n, s in stamps.items()}:
        return None
    try:
        entries = tuple(_entry(fields) for fields in data["entries"])
        described, paragraphs, owners = data["descriptions"], data["paragraphs"], array("I")
        owners.frombytes(data["owners"])
        it = iter(owners)
        return Corpus(
            entries,
            Index(described[0], _unpack(described[1])),
            Index(paragraphs[0], _unpack(paragraphs[1])),
            tuple(zip(it, it, strict=True)),
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def _read_tokens(path: Path) -> dict[str, tuple[Stamp, Entry, Tokens]]:
    data = _read(path)
    if data is None:
        return {}
    try:
        return {
            name: (tuple(stamp), _entry(entry), Tokens(described, tuple(paragraphs)))  # type: ignore[misc]
            for name, (stamp, entry, described, paragraphs) in data["files"].items()
        }
    except (KeyError, TypeError, ValueError):
        return {}


def _save(
    folder: Path,
    corpus: Corpus,
    files: dict[str, tuple[Stamp, Entry, Tokens]],
    listed: dict[str, Stamp],
) -> bool:
    owners = array("I", (n for pair in corpus.owners for n in pair))
    index = {
        # Files that are not memories (broken ones) are listed too, so they do not make every
        # call look like a change.
        "stamps": {n: list(s) for n, s in listed.items()},
        "entries": [_fields(e) for e in corpus.entries],
        "descriptions": (dict(corpus.descriptions.postings), _pack(corpus.descriptions.lengths)),
        "paragraphs": (dict(corpus.paragraphs.postings), _pack(corpus.paragraphs.lengths)),
        "owners": owners.tobytes(),
    }
    tokens = {
        "files": {
            n: (list(stamp), _fields(entry), dict(t.description), [dict(p) for p in t.paragraphs])
            for n, (stamp, entry, t) in files.items()
        }
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _write(folder / "tokens", tokens)
        _write(folder / "index", index)
    except OSError:
        return False  # an unwritable place costs speed, never results
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    digest, payload = raw[:32], raw[32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        data = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def _write(path: Path, data: dict[str, Any]) -> None:
    payload = marshal.dumps({**data, "format": FORMAT})
    write_atomic(path, hashlib.sha256(payload).digest() + payload)


def _pack(numbers: Any) -> bytes:
    return array("I", numbers).tobytes()


def _unpack(raw: bytes) -> array[int]:
    numbers = array("I")
    numbers.frombytes(raw)
    return numbers


def _fields(entry: Entry) -> tuple[object, ...]:
    values = [getattr(entry, f) for f in Entry.__dataclass_fields__]
    values[-1] = tuple((p.start, p.end) for p in entry.paragraphs)
    return tuple(values)


def _entry(fields: Any) -> Entry:
    *head, paragraphs = fields
    return Entry(*head, tuple(Paragraph(*p) for p in paragraphs))
