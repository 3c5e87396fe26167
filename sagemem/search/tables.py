"""This machine's word tables (the lexicon, the bilingual pairs): small SQLite files in the
user's cache, opened read-only when used, and written whole under another name, then renamed
into place, so a reader never sees half of one."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from ..store.errors import SagememError
from ..store.files import safe_folder
from ..store.records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 64 * 1024 * 1024  # far above the few MB a table grows to: a larger file is not read
MAX_TERMS = 900  # SQLite's limit on parameters is 999


def open_table(path: Path, format: int, table: str) -> sqlite3.Connection | None:
    """The file at `path`, read-only; None when it is missing, not a regular file, too large,
    not of `format` or without `table` (one kind of file put where the other is looked for)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
    except (OSError, ValueError, sqlite3.Error):
        return None
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        named = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
        if row is None or row[0] != format or named.fetchone() is None:
            conn.close()
            return None
    except sqlite3.Error:
        conn.close()
        return None
    return conn


def writable(path: Path) -> bool:
    """Whether a table can be written at `path`: its folder is one sagemem may use (no link)
    and can be written. Asked before the rows are worked out, which takes a second or two."""
    try:
        folder = safe_folder(path.parent)
    except (OSError, ValueError, SagememError):
        return False
    return os.access(folder, os.W_OK)


def write_table(
    path: Path,
    format: int,
    schema: str,
    rows: Iterable[tuple[Any, ...]],
    meta: Iterable[tuple[str, Any]] = (),
) -> bool:
    """A new file at `path` with a `meta` table (its `format`, and `meta`) and one table of
    `rows` (`schema`: `name(columns)`); False when it cannot be written."""
    if not writable(path):
        return False
    table, columns = schema.split("(", 1)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with contextlib.closing(sqlite3.connect(partial)) as conn:
            conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID")
            conn.execute(f"CREATE TABLE {schema} WITHOUT ROWID")
            conn.executemany("INSERT INTO meta VALUES (?, ?)", [("format", format), *meta])
            marks = ",".join("?" * (columns.count(",") + 1))  # one a column
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)  # noqa: S608
            conn.commit()
        os.replace(partial, path)
    except (OSError, sqlite3.Error):
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True


class Pairs:
    """An open file of words and their counterparts (`bilingual.py`, `related.py`):
    `others(terms)` for the terms of one query."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def others(self, terms: Iterable[str]) -> dict[str, list[str]]:
        """Each listed term's counterparts, best first."""
        wanted = list(dict.fromkeys(terms))[:MAX_TERMS]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        try:
            rows = self.conn.execute(f"SELECT term, others FROM pairs WHERE term IN ({marks})", wanted)  # noqa: S608
            return {term: found.split(" ") for term, found in rows if isinstance(found, str) and found}
        except sqlite3.Error:  # a damaged file: no counterparts
            return {}

    def close(self) -> None:
        self.conn.close()
