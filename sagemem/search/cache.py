"""The persisted search index of a memory directory: `<state>/cache/index-v<FORMAT>-<key>.sqlite`.

SQLite, from the standard library, because it gives what a cache on the hot path needs:

* **Incremental.** Each file's row keeps its stat, its version and its terms. A call lists
  the directory (names and stat only, never contents) and compares a digest of the listing
  with the one stored: when nothing changed, nothing else is read. When some files changed,
  only those are read; a file whose stat changed but whose bytes hash the same (`touch`) is
  not re-tokenised; and only the postings of the terms those files hold are written (with
  the per-id arrays, four bytes per id): postings only added are one more part of a term's
  row, never a copy of it.
* **Read only what a query needs.** Postings are packed blobs per term, fetched for the
  query's terms alone, and an entry is decoded only when it becomes a result; what grows
  with the directory is the listing, its digest and the per-id arrays.
* **Safe under concurrency.** Files are tokenised outside any lock; the changes are then
  applied in one `BEGIN IMMEDIATE` transaction that checks every row again: a state another
  process stored meanwhile is kept when its ctime is newer, and a row that came back is not
  deleted. Readers hold one WAL snapshot for one call. A large build commits in batches and
  skips what another builder has stored, so an interrupted build keeps its progress.
* **Never trusted blindly.** A file SQLite reports damaged, or whose content does not decode,
  is deleted and built again (it is derived data); one odd memory file is only left out. The
  format and a key of the memory dir are in the file's name, so another sagemem version's
  index, or another directory's in a shared state dir, is left alone; links are never
  written through. An unwritable place (a sandbox) moves the index to the user's cache
  directory, then to a private folder in the system temp dir, and failing both to memory:
  slower, same results.

Document ids: a memory keeps its description id (`files.doc`) while it lives; paragraph ids
are reused from freed ones. BM25 depends on ids only through the statistics kept beside them
(`documents`, `total`), so results are the same with and without the cache, fresh or updated.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import stat
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from ..store import forms, journal
from ..store.config import temp_dir, user_cache_dir
from ..store.digests import sha256_hex
from ..store.errors import SagememError
from ..store.files import read_bytes, safe_folder
from ..store.names import is_memory_name
from ..store.records import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

    from ..store.forms import EntryForm

    # Given the jobs of a batch and the deadline: what gives their results.
    Reader = Callable[[list[tuple[Any, ...]], float | None], Callable[[], list["_Fresh"]]]

# 13: the per-id arrays are stored in slices, read as a query needs them; 14: a term's
# postings in parts, so a batch adds its own instead of rewriting the row
FORMAT = forms.INDEX
MAX_DB_BYTES = 4 * 1024 * 1024 * 1024

DEAD = 0xFFFFFFFF  # a free paragraph id
BATCH = 500  # files tokenised per transaction, to begin with (`_batches`)
MAX_BATCH = 4000
_ROWS_AT_ONCE = 500  # term rows read, merged and written back together (SQLite allows 999 `?`)
# A term's postings are the concatenation of its parts, in order: a batch that only adds
# postings to a term writes them as one more part, and a term's parts are merged into one
# when it loses postings or has this many (a query reads every part of its terms).
MAX_PARTS = 16
PARALLEL_FROM = 1000  # files to read before worker processes repay their start
BUSY_MS = 20_000
# What BM25 needs besides the postings: document counts and summed lengths.
STATISTICS = ("descriptions_count", "descriptions_total", "paragraphs_count", "paragraphs_total")
ARRAYS = (
    "description_lengths",
    "paragraph_lengths",
    "paragraph_owners",
    "paragraph_starts",
    "paragraph_ends",
)
PARAGRAPH_ARRAYS = ARRAYS[1:]
# Each array is stored in slices of this many ids (8 KB), so a query reads only the slices
# holding the ids of its terms' postings, and a change rewrites only the slices it touched.
SLICE = 2048  # a power of two
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files(
    doc INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    stamp TEXT NOT NULL,
    version TEXT,
    baseline INTEGER NOT NULL DEFAULT 0,
    entry BLOB,
    terms TEXT,
    pids BLOB,
    problem TEXT,
    scanned INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS files_baseline ON files(baseline) WHERE baseline;
CREATE INDEX IF NOT EXISTS files_unscanned ON files(doc) WHERE NOT scanned;
CREATE INDEX IF NOT EXISTS files_problem ON files(problem) WHERE problem IS NOT NULL;
CREATE TABLE IF NOT EXISTS terms(
    term TEXT NOT NULL, part INTEGER NOT NULL, descriptions BLOB, paragraphs BLOB, PRIMARY KEY(term, part)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS arrays(
    name TEXT NOT NULL, slice INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY(name, slice)
) WITHOUT ROWID;
"""

Progress = Callable[[int, int], None]
# What reading one file gives: (entry fields by name, tokens) for a memory; the name of a
# problem for a memory left out on purpose ("merge-conflict": injection says so); None for a
# file that is not a memory (`check` says why). Tokens are (description tf, [paragraph tf,
# ...]). The last argument says whether secrets are looked for by the full scan (else by the
# pattern pass: the prompt hook's, within its deadline).
Indexed = Callable[
    [str, bytes, float, bool],
    "tuple[EntryForm, tuple[dict[str, int], list[dict[str, int]]]] | str | None",
]


class CacheDamaged(Exception):
    """The index holds something no sagemem wrote: discard it and build again."""


class _Fresh(Record):
    """One changed file as read: its new stat, and either new tokens, the same bytes as
    before (`same`: only the stat and mtime change), or nothing usable (entry None). What
    the index stores of it comes ready made from the process that read it: the entry as
    JSON, the paragraphs' lines, and the terms it holds (see `_stored_terms`)."""

    stamp: str
    version: str | None
    entry: str | None
    tokens: tuple[dict[str, int], list[dict[str, int]]] | None
    spans: list[list[int]] | None = None
    baseline: bool = False
    terms: str | None = None
    same: bool = False
    problem: str | None = None
    scanned: bool = True  # its secrets looked for by the full scan


def listing(memory_dir: Path) -> dict[str, str]:
    """Every candidate memory file with its stat stamp: what a call reads when nothing changed."""
    if not memory_dir.is_dir():
        raise SagememError(f"{memory_dir}: memory directory does not exist (run `sagemem init`)")
    found = {}
    with os.scandir(memory_dir) as items:
        for item in items:
            name = item.name
            if not is_memory_name(name) or not item.is_file(follow_symlinks=False):
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while the directory was being listed
            found[name] = _stamp(info)
    return found


def _stamp(info: os.stat_result) -> str:
    # ctime too: an edit that keeps the size and restores the mtime (cp -p, rsync -t, tar)
    # still changes it.
    return f"{info.st_mtime_ns} {info.st_size} {info.st_ino} {info.st_ctime_ns}"


def stamp_of(path: Path) -> str | None:
    """A file's stamp as `listing` gives it; None when it is no regular file (gone, a link)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return _stamp(info) if stat.S_ISREG(info.st_mode) else None


class _Look:
    """What a call knows of the directory's files: every file's stamp (`listing`, taken once
    a call, when needed), or, when this process has the change journal (a hook the resident
    process runs) and it can answer for the mark the index stored, the stamps of the files
    changed since that mark alone."""

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = memory_dir
        self._files: dict[str, str] | None = None
        self._journal = journal.current()
        self.folder = str(memory_dir.absolute())
        # Taken before any file is looked at: the index then matches the directory as of it.
        self.mark = None if self._journal is None else self._journal.mark(self.folder)
        if self._journal is not None and self.mark is None:
            journal.wanted.add(self.folder)  # the resident process watches it from now on

    def files(self) -> dict[str, str]:
        if self._files is None:
            self._files = listing(self.memory_dir)
        return self._files

    def since(self, stored: object) -> dict[str, str | None] | None:
        """The stamps now of the files changed since the index's mark `stored` (None for one
        that is no file now); None when every file must be looked at."""
        if self._journal is None or self.mark is None:
            return None
        names = self._journal.since(self.folder, stored)
        if names is None:
            return None
        return {name: stamp_of(self.memory_dir / name) for name in names}


def open_index(
    memory_dir: Path,
    state_dir: Path,
    index_file: Indexed,
    *,
    use_cache: bool = True,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> Snapshot:
    """The index as it matches `memory_dir` now: the state dir's, else the user cache dir's,
    else one in memory. With a `deadline` (a `time.monotonic()` value; the prompt hook has
    one), files still unread when it passes are left for the next call, which goes on where
    this one stopped: the answer comes from what is indexed (`Snapshot.pending` counts the
    rest), never after the harness has given up on the hook."""
    look = _Look(memory_dir)
    for place in _places(memory_dir, state_dir) if use_cache else []:
        found = _open_at(place, memory_dir, look, index_file, progress, deadline)
        if found is not None:
            return found
    conn = _connect(None)  # in memory: nothing to be damaged or unwritable
    pending = refresh(conn, memory_dir, look, index_file, progress, deadline)
    return _snapshot(conn, pending=pending)


# What reading the index's own data raises when a file holds what sagemem did not write there.
DAMAGE = (sqlite3.DatabaseError, CacheDamaged, ValueError, TypeError, EOFError, IndexError, KeyError)
# SQLite's primary result codes that say "not now" (busy, locked, read-only, I/O, full, cannot
# open, out of memory, interrupted, no permission), not "this file is wrong".
_TRANSIENT = {3, 5, 6, 7, 8, 9, 10, 13, 14, 23}
_TRANSIENT_WORDS = ("locked", "busy", "readonly", "read-only", "disk i/o", "full", "unable to open")


def damaged(exc: BaseException) -> bool:
    """Whether an error reading or writing the index means its file is damaged (delete and
    build again), as opposed to a place that cannot be used right now. `no such table` and
    `database disk image is malformed` are damage; `database is locked` is not."""
    if isinstance(exc, CacheDamaged):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return isinstance(exc, DAMAGE) and not isinstance(exc, OSError)
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF not in _TRANSIENT
    return not any(word in str(exc).lower() for word in _TRANSIENT_WORDS)


def _open_at(
    place: Path,
    memory_dir: Path,
    look: _Look,
    index_file: Indexed,
    progress: Progress | None,
    deadline: float | None = None,
) -> Snapshot | None:
    """The index at `place`, brought up to date; a damaged one is deleted and built once more.
    None when the place cannot be used (unwritable, full, locked for too long)."""
    repaired = ""
    for attempt in (1, 2):
        conn = None
        try:
            conn = _connect(place)
            pending = refresh(conn, memory_dir, look, index_file, progress, deadline)
            return _snapshot(conn, place, repaired, pending)
        except (OSError, sqlite3.OperationalError) as exc:
            if conn is not None:
                conn.close()
            if not damaged(exc) or attempt == 2:
                return None  # busy, read-only, full: this place cannot be used now
            repaired = str(exc)
            _remove(place)
        except DAMAGE as exc:
            if conn is not None:
                conn.close()
            if attempt == 2:
                return None
            repaired = str(exc) or type(exc).__name__
            _remove(place)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
    return None


class Snapshot(Record):
    """An open read transaction on the index, with the statistics loaded. Postings, entries
    and the per-id arrays (`Columns`) are read through `conn` as a query needs them, so they
    come from the same committed state however many processes write meanwhile."""

    conn: sqlite3.Connection
    meta: dict[str, Any]
    columns: Columns
    path: Path | None  # the index's file; None in memory
    repaired: str = ""  # what was wrong with the file when this call found it damaged
    pending: int = 0  # changed files left unread when the call's deadline passed
    unscanned: int = 0  # files whose secrets only the pattern pass has looked for

    def discard(self) -> None:
        """Close it and delete the file: it held something no sagemem wrote there."""
        self.conn.close()
        if self.path is not None:
            _remove(self.path)


def _snapshot(
    conn: sqlite3.Connection, path: Path | None = None, repaired: str = "", pending: int = 0
) -> Snapshot:
    conn.execute("BEGIN")
    meta = _meta(conn)
    columns = Columns(conn, _sizes(conn))
    (top,) = conn.execute("SELECT COALESCE(MAX(doc), -1) FROM files").fetchone()
    if top >= columns.size("description_lengths"):
        raise CacheDamaged("the arrays do not match the files")
    (unscanned,) = conn.execute("SELECT COUNT(*) FROM files WHERE NOT scanned").fetchone()
    return Snapshot(conn, meta, columns, path, repaired, pending, unscanned)


def _sizes(conn: sqlite3.Connection) -> dict[str, int]:
    """Each array's length in ids, from its slices' lengths (read without their bytes):
    whole slices but the last, the paragraph arrays all of one length; else damage. So what
    a query later allocates is bounded by what the file holds."""
    sizes = dict.fromkeys(ARRAYS, 0)
    query = "SELECT name, COUNT(*), SUM(length(data)), MIN(slice), MAX(slice) FROM arrays GROUP BY name"
    for name, count, total, low, top in conn.execute(query):
        # slices 0 to count - 1, each of SLICE ids but the last, which holds at least one
        ids = total // 4 if isinstance(total, int) and total % 4 == 0 else -1
        whole = (count - 1) * SLICE < ids <= count * SLICE
        if name not in sizes or not whole or (low, top) != (0, count - 1):
            raise CacheDamaged(f"the slices of {name!r} are not whole")
        sizes[name] = ids
    if len({sizes[name] for name in PARAGRAPH_ARRAYS}) != 1:
        raise CacheDamaged("paragraph arrays differ in length")
    return sizes


class Columns:
    """A snapshot's per-id arrays, read a slice at a time: a query reads the slices holding
    the ids its terms' postings name (`need`), so its cost follows the query, not the size of
    the directory (the whole arrays are 4 MB at 50,000 memories). Indexing stays a plain
    array's; a slice not read yet holds zeros."""

    def __init__(self, conn: sqlite3.Connection, sizes: dict[str, int]) -> None:
        self._conn = conn
        self.arrays = {name: array("I", [0]) * size for name, size in sizes.items()}
        self._read: dict[str, set[int]] = {name: set() for name in sizes}

    def size(self, name: str) -> int:
        return len(self.arrays[name])

    def need(self, names: Sequence[str], ids: Iterable[int]) -> None:
        """Read the slices of `names` that hold `ids` (ids the arrays know: `corpus._check`)."""
        shift = SLICE.bit_length() - 1
        wanted = {i >> shift for i in ids}
        for name in names:
            missing = sorted(wanted - self._read[name])
            for start in range(0, len(missing), 500):
                self._fetch(name, missing[start : start + 500])

    def need_all(self) -> None:
        for name, values in self.arrays.items():
            self.need([name], range(0, len(values), SLICE))

    def _fetch(self, name: str, slices: list[int]) -> None:
        values = self.arrays[name]
        marks = ",".join("?" * len(slices))
        query = f"SELECT slice, data FROM arrays WHERE name = ? AND slice IN ({marks})"  # noqa: S608
        got = 0
        for number, data in self._conn.execute(query, (name, *slices)):
            first = number * SLICE
            part = array("I")
            part.frombytes(data)
            if len(part) != min(SLICE, len(values) - first):
                raise CacheDamaged(f"a slice of {name!r} is cut")
            values[first : first + len(part)] = part
            got += 1
        if got != len(slices):
            raise CacheDamaged(f"a slice of {name!r} is missing")
        self._read[name].update(slices)


def db_name(memory_dir: Path) -> str:
    """The index's file name. The format is in it, so two sagemem versions sharing a directory
    keep one index each; so is a key of the memory dir, so directories that share a state dir
    (`SAGEMEM_STATE_DIR`) or a cache dir never share an index."""
    key = sha256_hex(str(memory_dir.absolute()).encode("utf-8"))[:16]
    return f"index-v{FORMAT}-{key}.sqlite"


def _places(memory_dir: Path, state_dir: Path) -> Iterator[Path]:
    """Where the index may live, in order of preference; a place whose folders are links (a
    state dir that came with a clone) or cannot be made is skipped."""
    name = db_name(memory_dir)
    with contextlib.suppress(OSError, SagememError):
        yield safe_folder(state_dir, "cache") / name
    with contextlib.suppress(OSError, SagememError):
        yield safe_folder(user_cache_dir()) / name
    temp = temp_dir()  # made only when the others failed
    if temp is not None:
        yield temp / name


def _connect(db: Path | None) -> sqlite3.Connection:
    if db is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    else:
        # The state dir may come with a cloned repository: never open a link, a FIFO or a
        # device in its place, and never trust a file far larger than an index grows.
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                info = os.lstat(db.with_name(db.name + suffix))
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode):
                raise OSError(f"{db.name}{suffix}: not a regular file; the index is not opened through it")
            if info.st_size > MAX_DB_BYTES:
                raise CacheDamaged(f"{db.name}{suffix}: larger than an index grows")
        conn = sqlite3.connect(db, timeout=BUSY_MS / 1000, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA trusted_schema=OFF")
        # WAL: a reader keeps one consistent snapshot while writers go on committing. NORMAL:
        # a commit is not flushed to the disk (a power cut may lose the last ones, never the
        # index's consistency), since the index is derived and a lost change is read again.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    found = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if found is not None and _objects(conn) != _expected_objects():
        # A view, a trigger, a column with a default or a check of someone else's: SQL that
        # would run inside our queries (trusted_schema=OFF stops functions, not plain SQL).
        raise CacheDamaged("the index holds objects sagemem does not make")
    if found is None:
        with _writing(conn):
            for statement in SCHEMA.split(";"):
                conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (FORMAT,))
    elif _meta(conn).get("format") != FORMAT:
        raise CacheDamaged("written by another format")
    return conn


def _objects(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    """Every object of the schema, as SQLite records it: reading it runs nothing."""
    return sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))


@functools.cache
def _expected_objects() -> list[tuple[str, str, str, str | None]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        return _objects(conn)
    finally:
        conn.close()


def _remove(db: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            db.with_name(db.name + suffix).unlink()


@contextlib.contextmanager
def _writing(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _meta(conn: sqlite3.Connection) -> dict[str, Any]:
    return dict(conn.execute("SELECT key, value FROM meta"))


def digest(files: dict[str, str]) -> str:
    text = "\n".join(sorted(f"{name}\t{stamp}" for name, stamp in files.items()))
    return sha256_hex(text.encode("utf-8", "surrogateescape"))


def refresh(
    conn: sqlite3.Connection,
    memory_dir: Path,
    look: _Look,
    index_file: Indexed,
    progress: Progress | None = None,
    deadline: float | None = None,
) -> int:
    """Bring the index up to date with the directory, or as far as `deadline` allows (at
    least one file a call, so a slow one is not put off for ever); returns how many changed
    files are left unread.

    With a deadline (the prompt hook) a file's secrets are looked for by the pattern pass,
    which needs no detect-secrets; without one, by the full scan, and a file the pattern
    pass alone has seen is read again, so what the index redacts is the full scan's."""
    full = deadline is None
    meta = _meta(conn)
    unscanned = full and conn.execute("SELECT 1 FROM files WHERE NOT scanned LIMIT 1").fetchone() is not None
    changed = None if unscanned else look.since(meta.get("journal"))
    if changed is not None:  # the journal names what changed: only those are looked at
        files = {name: stamp for name, stamp in changed.items() if stamp is not None}
        seen = _stored(conn, list(changed))
        gone = {name: row[0] for name, row in seen.items() if name not in files}
        listed = None
    else:
        files = listed = look.files()
        if not unscanned and meta.get("digest") == digest(files):
            if look.mark is not None and meta.get("journal") != look.mark:
                with _writing(conn):
                    _put_meta(conn, {"journal": look.mark})
            return 0
        seen = _stored(conn)
        gone = {name: stamp for name, (stamp, _, _) in seen.items() if name not in files}
    todo = sorted(name for name, stamp in files.items() if _stale(seen.get(name), stamp, full))
    if not todo and not gone and look.mark == meta.get("journal") and listed is None:
        return 0  # only files with several links were looked at, and none changed
    bounds = _batches(len(todo), grow=deadline is None)
    with _readers(len(todo)) as reader:

        def submit(start: int, end: int) -> tuple[list[str], Callable[[], list[_Fresh]]]:
            # Another process may be building too: skip what it has stored since.
            names = _behind(conn, todo[start:end], files, full)
            jobs = [
                (memory_dir / n, files[n], _known(seen.get(n), files[n]), index_file, full) for n in names
            ]
            return names, reader(jobs, deadline)

        ahead = None
        for i, (start, end) in enumerate(bounds):
            if start and _past(deadline):
                return len(todo) - start
            names, results = ahead or submit(start, end)
            read = results()
            # Without a deadline the next batch is read while this one is written.
            ahead = submit(*bounds[i + 1]) if deadline is None and i + 1 < len(bounds) else None
            fresh = dict(zip(names, read, strict=False))  # `read` is shorter past the deadline
            done = i == len(bounds) - 1 and len(read) == len(names)
            # The listing's digest once it is all in; the journal's mark once what changed
            # since the last one is (until then the last one still says what to look at).
            marks: dict[str, Any] = {"digest": digest(listed) if done and listed is not None else None}
            if done and look.mark is not None:
                marks["journal"] = look.mark
            with _writing(conn):
                _apply(conn, fresh, gone if start == 0 else {}, marks)
            if progress is not None:
                progress(end, len(todo))
            if len(read) < len(names):
                return len(todo) - start - len(read)
    return 0


def _stored(
    conn: sqlite3.Connection, names: list[str] | None = None
) -> dict[str, tuple[str, str | None, bool]]:
    """(stamp, version, scanned) of every file the index holds, or of `names` among them."""
    query = "SELECT name, stamp, version, scanned FROM files"
    if names is None:
        rows = conn.execute(query).fetchall()
    else:
        rows = []
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            rows += conn.execute(f"{query} WHERE name IN ({','.join('?' * len(chunk))})", chunk).fetchall()  # noqa: S608
    return {name: (stamp, version, bool(scanned)) for name, stamp, version, scanned in rows}


def _put_meta(conn: sqlite3.Connection, values: dict[str, Any]) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(values.items()))


def _batches(count: int, grow: bool) -> list[tuple[int, int]]:
    """Where each transaction's files start and end (one, empty, when there are none). Each
    transaction adds a part to every term its files hold (`_Changes.write`), so a build
    without a deadline doubles its batches up to `MAX_BATCH`: a first build of 10,000 files
    leaves 5 parts to a common term, not 20, and the first batch, small, starts the writing
    soon; with a deadline they stay small, so it is checked often."""
    bounds: list[tuple[int, int]] = []
    start, size = 0, BATCH
    while start < count or not bounds:
        bounds.append((start, min(start + size, count)))
        start += size
        size = min(size * 2, MAX_BATCH) if grow else size
    return bounds


def _stale(row: tuple[str, str | None, bool] | None, stamp: str, full: bool) -> bool:
    """Whether a file must be read: its stamp changed, or (`full`) only the pattern pass has
    looked for its secrets."""
    return row is None or row[0] != stamp or (full and not row[2])


def _known(row: tuple[str, str | None, bool] | None, stamp: str) -> str | None:
    """The version a file had, when its bytes may be the same and so need no reading again
    (`touch`); None when it must be indexed whatever its bytes (its secrets were looked for
    by the pattern pass alone)."""
    if row is None or (row[0] == stamp and not row[2]):
        return None
    return row[1]


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _in_process(jobs: list[tuple[Any, ...]], deadline: float | None) -> list[_Fresh]:
    """Read the files of `jobs` in order, stopping once `deadline` has passed (after one)."""
    done: list[_Fresh] = []
    for job in jobs:
        if done and _past(deadline):
            break
        done.append(_read(*job))
    return done


def _behind(conn: sqlite3.Connection, names: list[str], files: dict[str, str], full: bool) -> list[str]:
    if not names:
        return names
    marks = ",".join("?" * len(names))
    query = f"SELECT name, stamp, scanned FROM files WHERE name IN ({marks})"  # noqa: S608
    stored = {name: (stamp, None, bool(scanned)) for name, stamp, scanned in conn.execute(query, names)}
    return [n for n in names if _stale(stored.get(n), files[n], full)]


@contextlib.contextmanager
def _readers(count: int) -> Iterator[Reader]:
    """Reads files in worker processes when there are enough to repay starting them (a first
    build; Chinese text costs most), else in this one. Either way a reader is given the jobs
    and returns what gives their results: the workers start on them at once, so the caller
    can write one batch while the next is read. Workers are spawned, not forked: the caller
    may hold threads (a watcher) and an open database."""
    cpus = os.cpu_count() or 1
    if count < PARALLEL_FROM or cpus < 2:
        yield lambda jobs, deadline: lambda: _in_process(jobs, deadline)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        pool = ProcessPoolExecutor(min(cpus, 4), mp_context=multiprocessing.get_context("spawn"))
    except (OSError, ValueError):  # no processes allowed here: read in this one
        yield lambda jobs, deadline: lambda: _in_process(jobs, deadline)
        return

    def read(jobs: list[tuple[Any, ...]], deadline: float | None) -> Callable[[], list[_Fresh]]:
        def here() -> list[_Fresh]:  # workers killed or not allowed: read in this process
            return _in_process(jobs, deadline)

        try:  # a whole batch at a time: the deadline is checked between batches
            results = pool.map(_read_job, jobs, chunksize=25)
        except (BrokenProcessPool, OSError, RuntimeError):
            return here

        def gather() -> list[_Fresh]:
            try:
                return list(results)
            except (BrokenProcessPool, OSError):
                return here()

        return gather

    with pool:
        yield read


def _read_job(job: tuple[Any, ...]) -> _Fresh:
    return _read(*job)


def _read(path: Path, stamp: str, version: str | None, index_file: Indexed, full: bool = True) -> _Fresh:
    """One file as the index needs it. Whatever goes wrong with one file (unreadable, gone,
    YAML its parser rejects) leaves that file out, as `check` reports it; never the index."""
    try:
        data = read_bytes(path)
    except (SagememError, OSError):
        return _Fresh(stamp, None, None, None)
    now = sha256_hex(data)
    if now == version:
        return _Fresh(stamp, now, None, None, same=True)
    try:
        built = index_file(path.name, data, int(stamp.split()[0]) / 1e9, full)
    except Exception:  # noqa: BLE001 - one odd file must not take search down
        built = None
    if built is None or isinstance(built, str):
        return _Fresh(stamp, now, None, None, problem=built)
    fields, tokens = built
    return _Fresh(
        stamp,
        now,
        json.dumps(fields, ensure_ascii=False),
        tokens,
        spans=fields["paragraphs"],
        baseline=bool(fields["baseline"]),
        terms=_stored_terms(tokens),
        scanned=full,
    )


def _stored_terms(tokens: tuple[dict[str, int], list[dict[str, int]]]) -> str:
    """What the index keeps of a file's tokens, to take its postings out again when it
    changes: its description's terms and the terms of its paragraphs, as JSON (the counts
    and which paragraph holds which term are in the postings; its paragraph ids are kept
    beside them)."""
    described, paragraphs = tokens
    held = dict.fromkeys(term for tf in paragraphs for term in tf)  # in order: the same bytes each build
    return json.dumps([list(described), list(held)], ensure_ascii=False)


class _Arrays:
    """The per-id arrays, loaded whole (four bytes per id) and saved by the slices that
    changed, and the statistics kept beside them, changed as ids are taken and released
    (never summed over every id)."""

    def __init__(self, conn: sqlite3.Connection, meta: dict[str, Any]) -> None:
        columns = Columns(conn, _sizes(conn))
        columns.need_all()
        self.data = columns.arrays
        self._stored = {name: values.tobytes() for name, values in self.data.items()}
        self._free: list[int] | None = None  # found when the first id is taken
        self.stats = {name: int(meta.get(name) or 0) for name in STATISTICS}

    def release(self, pid: int) -> None:
        free = self._free_ids()  # found before this id is marked free, so it is in it once
        self.stats["paragraphs_count"] -= 1
        self.stats["paragraphs_total"] -= self.data["paragraph_lengths"][pid]
        for name in ("paragraph_lengths", "paragraph_starts", "paragraph_ends"):
            self.data[name][pid] = 0
        self.data["paragraph_owners"][pid] = DEAD
        free.append(pid)

    def take(self, length: int, owner: int, start: int, end: int) -> int:
        values = {
            "paragraph_lengths": length,
            "paragraph_owners": owner,
            "paragraph_starts": start,
            "paragraph_ends": end,
        }
        free = self._free_ids()
        pid = free.pop() if free else len(self.data["paragraph_owners"])
        for name, value in values.items():
            column = self.data[name]
            if pid == len(column):
                column.append(value)
            else:
                column[pid] = value
        self.stats["paragraphs_count"] += 1
        self.stats["paragraphs_total"] += length
        return pid

    def describe(self, doc: int, length: int) -> None:
        lengths = self.data["description_lengths"]
        if doc >= len(lengths):
            lengths.extend([0] * (doc + 1 - len(lengths)))
        self.stats["descriptions_total"] += length - lengths[doc]
        lengths[doc] = length

    def _free_ids(self) -> list[int]:
        if self._free is None:
            owners = self.data["paragraph_owners"]
            self._free = [pid for pid in range(len(owners) - 1, -1, -1) if owners[pid] == DEAD]
        return self._free

    def save(self, conn: sqlite3.Connection) -> None:
        """Write the slices that differ from the stored ones; drop those past the end."""
        step = 4 * SLICE
        for name, values in self.data.items():
            new, old = values.tobytes(), self._stored[name]
            rows = [
                (name, at // step, new[at : at + step])
                for at in range(0, len(new), step)
                if new[at : at + step] != old[at : at + step]
            ]
            conn.executemany("INSERT OR REPLACE INTO arrays VALUES (?, ?, ?)", rows)
            conn.execute("DELETE FROM arrays WHERE name = ? AND slice >= ?", (name, -(-len(new) // step)))


class _Changes:
    """Postings to remove and to add, gathered per term so each term's row is written once
    (per column: descriptions, paragraphs)."""

    def __init__(self) -> None:
        self.drop: tuple[dict[str, set[int]], dict[str, set[int]]] = ({}, {})
        self.add: tuple[dict[str, array[int]], dict[str, array[int]]] = ({}, {})

    def remove(self, column: int, terms: Iterable[str], docs: set[int]) -> None:
        """Take `docs` out of the postings of `terms` (a term's row holds only the ids
        that have it, so every id of a file may be taken out of every term it holds)."""
        drop = self.drop[column]
        for term in terms:
            drop.setdefault(term, set()).update(docs)

    def put(self, column: int, tf: dict[str, int], doc: int) -> None:
        # Run once for each posting of a build: no tuple, no call but the lookup.
        add = self.add[column]
        row = add.get
        for term, count in tf.items():
            pairs = row(term)
            if pairs is None:
                add[term] = array("I", (doc, count))
            else:
                pairs.append(doc)
                pairs.append(count)

    def write(self, conn: sqlite3.Connection) -> None:
        """Each term's changes written, a few hundred terms at a time. Postings only added
        become one more part of the term (a first build's growing rows are never read back
        nor copied); a term that loses postings, or has `MAX_PARTS`, is read, merged into
        one part and written back: a large index's common terms hold long rows, and all of
        them at once would be most of the index in memory."""
        described, found = self.add
        dropped = self.drop[0].keys() | self.drop[1].keys()
        terms = sorted(dropped | described.keys() | found.keys())
        for start in range(0, len(terms), _ROWS_AT_ONCE):
            chunk = terms[start : start + _ROWS_AT_ONCE]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT term, max(part) FROM terms WHERE term IN ({marks}) GROUP BY term"  # noqa: S608
            last: dict[str, int] = dict(conn.execute(query, chunk).fetchall())
            merged = {t for t in chunk if t in last and (t in dropped or last[t] + 1 >= MAX_PARTS)}
            stored = _rows(conn, sorted(merged))
            rows = []
            for term in chunk:
                if term in merged:
                    old = stored.get(term, (None, None))
                    new = [self._merge(old[c], self.drop[c].get(term), self.add[c].get(term)) for c in (0, 1)]
                    if new[0] or new[1]:
                        rows.append((term, 0, *new))
                elif term in described or term in found:
                    rows.append(
                        (term, last.get(term, -1) + 1, _blob(described.get(term)), _blob(found.get(term)))
                    )
            conn.executemany("DELETE FROM terms WHERE term = ?", [(t,) for t in merged])
            conn.executemany("INSERT INTO terms VALUES (?, ?, ?, ?)", rows)

    @staticmethod
    def _merge(old: bytes | None, drop: set[int] | None, add: array[int] | None) -> bytes | None:
        pairs = array("I")
        if old:
            pairs.frombytes(old)
        if drop:
            it = iter(pairs)
            pairs = array(
                "I", [n for doc, f in zip(it, it, strict=True) if doc not in drop for n in (doc, f)]
            )
        if add:
            pairs.extend(add)
        return pairs.tobytes() if pairs else None


def _blob(pairs: array[int] | None) -> bytes | None:
    return None if pairs is None else pairs.tobytes()


def _rows(conn: sqlite3.Connection, terms: list[str]) -> dict[str, tuple[bytes | None, bytes | None]]:
    """The stored rows of `terms`, in one query (one query each cost more than the merge of
    a large batch), each term's parts joined."""
    if not terms:
        return {}
    query = (
        "SELECT term, descriptions, paragraphs FROM terms"
        f" WHERE term IN ({','.join('?' * len(terms))}) ORDER BY term, part"  # noqa: S608
    )
    parts: dict[str, tuple[list[bytes], list[bytes]]] = {}
    for term, described, found in conn.execute(query, terms):
        held = parts.setdefault(term, ([], []))
        if described:
            held[0].append(described)
        if found:
            held[1].append(found)
    return {term: (b"".join(d) or None, b"".join(p) or None) for term, (d, p) in parts.items()}


def postings(conn: sqlite3.Connection, term: str) -> tuple[bytes | None, bytes | None]:
    """The postings of `term` (descriptions, paragraphs): packed (id, count) pairs."""
    return _rows(conn, [term]).get(term, (None, None))


def _apply(
    conn: sqlite3.Connection, fresh: dict[str, _Fresh], gone: dict[str, str], marks: dict[str, Any]
) -> None:
    """Write one batch of changes, checked against the rows as they are now (another process
    may have written some of them since this one looked), and `marks` into the meta table
    (the listing's digest, the journal's mark)."""
    arrays = _Arrays(conn, _meta(conn))
    changes = _Changes()

    def release(doc: int, terms: str | None, held: bytes | None) -> None:
        if terms is None:
            return
        arrays.stats["descriptions_count"] -= 1
        described, found = json.loads(terms)
        if type(described) is not list or type(found) is not list:
            raise CacheDamaged("a file's terms are not two lists")
        pids = array("I")
        pids.frombytes(held or b"")
        changes.remove(0, described, {doc})
        changes.remove(1, found, set(pids))
        for pid in pids:
            arrays.release(pid)
        arrays.describe(doc, 0)

    for name, seen in gone.items():
        row = conn.execute("SELECT doc, terms, pids, stamp FROM files WHERE name = ?", (name,)).fetchone()
        if row is not None and row[3] == seen:  # else it came back since this process looked
            release(*row[:3])
            conn.execute("DELETE FROM files WHERE doc = ?", (row[0],))
    # New files take the ids after the last, as SQLite would give them: one statement each.
    last = conn.execute("SELECT max(doc) FROM files").fetchone()[0] or 0
    rows = _file_rows(conn, list(fresh))  # in this transaction: as they are now
    for name, item in fresh.items():
        row = rows.get(name)
        if row is not None and (
            (row.stamp == item.stamp and (row.scanned or not item.scanned))
            or _ctime(row.stamp) > _ctime(item.stamp)
        ):
            continue  # another process wrote this state, or a newer one, meanwhile
        if item.same and row is not None and row.version == item.version:
            entry = None if row.entry is None else _restamp(row.entry, int(item.stamp.split()[0]) / 1e9)
            conn.execute("UPDATE files SET stamp = ?, entry = ? WHERE doc = ?", (item.stamp, entry, row.doc))
            continue
        if item.same:
            continue  # the row moved on meanwhile; the next call reads the file again
        if row is None:
            doc = last = last + 1
        else:
            doc = row.doc
            release(doc, row.terms, row.pids)
        terms = pids = None
        arrays.describe(doc, 0)
        if item.entry is not None and item.tokens is not None and item.spans is not None:
            described, paragraphs = item.tokens
            arrays.stats["descriptions_count"] += 1
            changes.put(0, described, doc)
            arrays.describe(doc, sum(described.values()))
            taken = array("I")
            for (start, end), tf in zip(item.spans, paragraphs, strict=True):
                pid = arrays.take(sum(tf.values()), doc, start, end)
                changes.put(1, tf, pid)
                taken.append(pid)
            terms, pids = item.terms, taken.tobytes()
        values = (
            item.stamp,
            item.version,
            item.baseline,
            item.entry,
            terms,
            pids,
            item.problem,
            item.scanned,
        )
        if row is None:
            conn.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (doc, name, *values))
        else:
            conn.execute(
                "UPDATE files SET stamp = ?, version = ?, baseline = ?, entry = ?, terms = ?, pids = ?,"
                " problem = ?, scanned = ? WHERE doc = ?",
                (*values, doc),
            )
    changes.write(conn)
    arrays.save(conn)
    _put_meta(conn, {**arrays.stats, **marks})


class _Stored(Record):
    """What the index holds of a file, as a write needs it."""

    doc: int
    stamp: str
    version: str | None
    entry: str | None
    terms: str | None
    pids: bytes | None
    scanned: bool


def _file_rows(conn: sqlite3.Connection, names: list[str]) -> dict[str, _Stored]:
    """The stored row of each of `names` the index holds, a few hundred a query (one query a
    file cost a build more than its rows' merge)."""
    found: dict[str, _Stored] = {}
    for start in range(0, len(names), _ROWS_AT_ONCE):
        chunk = names[start : start + _ROWS_AT_ONCE]
        query = (
            "SELECT name, doc, stamp, version, entry, terms, pids, scanned FROM files"
            f" WHERE name IN ({','.join('?' * len(chunk))})"  # noqa: S608
        )
        found.update((row[0], _Stored(*row[1:])) for row in conn.execute(query, chunk))
    return found


def _restamp(entry: str, mtime: float) -> str:
    """An entry with a new mtime: the bytes are unchanged, the stat is not."""
    fields = json.loads(entry)
    fields["mtime"] = mtime
    return json.dumps(fields, ensure_ascii=False)


def _ctime(stamp: str) -> int:
    """A stamp's ctime: it only grows as a file changes, so of two states the newer has the
    larger one (stamps are `mtime size inode ctime`, in nanoseconds)."""
    return int(stamp.rsplit(" ", 1)[-1])
