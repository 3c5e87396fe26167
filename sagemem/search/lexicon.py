"""How common a word is in the language at large: what a query word weighs beside its idf.

A directory's own statistics cannot tell `process` from `Istio` when neither is in any
memory, nor `towards` from `tattoo` when each is in one: idf gives them the same weight. The
language can. `wordfreq` (its word lists: CC BY-SA 4.0, read from the installed package,
never shipped with sagemem) gives each English and Chinese word its Zipf frequency, the
base-10 log of its occurrences per billion words. A query word's weight is its idf times

    (6 - Zipf) / 3, between 0.2 and 1: 1 for a word at most as common as once per million
    words (Zipf 3, or not listed at all), about 0.6 for `deploy` or `tattoo` (Zipf 4.1),
    0.5 at Zipf 4.5, a quarter for `process` (5.3), and 0.2 from Zipf 5.4 (`say`) on.

Importing wordfreq and reading its lists takes most of a second, too slow for a prompt hook,
so they are read once into a small SQLite file (`lexicon-v1.sqlite` in the user's cache
dir): every English word by its Snowball stem, as the index holds it, at the frequency of
the commonest word with that stem; every Chinese word as it is; only words common enough to
weigh less than 1. A query then costs one lookup of its own terms. Without the file, or
without wordfreq, every word weighs 1, as if rare: the hook builds the
file only when the call has time for it (`current`); other commands do it anyway.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..store.config import lexicon_folders, model_folder
from . import bilingual, related
from .tables import MAX_TERMS, Pairs, open_table, writable, write_table
from .tokenize import is_chinese, normalize, stems

FORMAT = 1
NAME = f"lexicon-v{FORMAT}.sqlite"
FULL = 3.0  # a word at most this common (Zipf) keeps its idf whole
COMMON = 6.0  # where the line from 1 at FULL reaches 0
LEAST = 0.2  # no word weighs less
BUILD_SECONDS = 3.0  # what a build may take on a slow machine (about 1.5 s on a fast one)


def weight(zipf: float) -> float:
    """The share of its idf a word keeps, from its Zipf frequency."""
    return min(1.0, max(LEAST, (COMMON - zipf) / (COMMON - FULL)))


class Lexicon:
    """An open lexicon file: `weights(terms)` for the terms of one query."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.bilingual: Pairs | None = None
        self.related: related.Related | None = None

    def weights(self, terms: Iterable[str]) -> dict[str, float]:
        """Each listed term's weight; a term not listed weighs 1 (rare, or no word at all)."""
        wanted = list(dict.fromkeys(terms))[:MAX_TERMS]
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        try:
            rows = self._conn.execute(f"SELECT term, zipf FROM words WHERE term IN ({marks})", wanted)  # noqa: S608
            return {term: weight(zipf / 100) for term, zipf in rows if isinstance(zipf, int)}
        except sqlite3.Error:  # a damaged file: every word weighs as a rare one
            return {}

    def others(self, terms: Iterable[str]) -> dict[str, list[str]]:
        """Each listed term's counterparts: in the other language (`bilingual.py`), then
        related in meaning (`related.py`); none without the `semantic` extra."""
        terms = list(terms)
        found: dict[str, list[str]] = {}
        for table in (self.bilingual, self.related):
            for term, others in (table.others(terms) if table is not None else {}).items():
                found[term] = list(dict.fromkeys([*found.get(term, []), *others]))
        return found

    def close(self) -> None:
        self._conn.close()
        for table in (self.bilingual, self.related):
            if table is not None:
                table.close()


def load(path: Path) -> Lexicon | None:
    """The lexicon at `path`, read-only; None when it is missing, not a regular file, too
    large or not one sagemem wrote (the caller goes on without it)."""
    conn = open_table(path, FORMAT, "words")
    return Lexicon(conn) if conn is not None else None


@contextlib.contextmanager
def opened(deadline: float | None = None) -> Iterator[Lexicon | None]:
    """`current`, closed again after the block."""
    found = current(deadline)
    try:
        yield found
    finally:
        if found is not None:
            found.close()


def current(deadline: float | None = None) -> Lexicon | None:
    """The lexicon of this machine (`config.lexicon_folders`), built if there is none and the
    call has time for it: no `deadline` (a `time.monotonic()` value), or BUILD_SECONDS left
    before it. None without one (every word then weighs 1)."""
    found = _find(deadline)
    return found[1] if found is not None else None


def where(deadline: float | None = None) -> Path | None:
    """The folder holding this machine's lexicon, built there first as `current` would."""
    found = _find(deadline)
    if found is None:
        return None
    found[1].close()
    return found[0]


def _find(deadline: float | None) -> tuple[Path, Lexicon] | None:
    for folder in lexicon_folders():
        found = load(folder / NAME)
        if found is not None:
            return folder, _with_pairs(found, folder, deadline)
    if deadline is not None and deadline - time.monotonic() < BUILD_SECONDS:
        return None  # the prompt hook: the next call builds it
    for folder in lexicon_folders():
        if build(folder / NAME) and (found := load(folder / NAME)) is not None:
            return folder, _with_pairs(found, folder, deadline)
    return None


def _with_pairs(found: Lexicon, folder: Path, deadline: float | None) -> Lexicon:
    """The lexicon with the pairs files beside it (`bilingual.py`, `related.py`), built first
    when the `semantic` extra is installed, there is none yet (or its model changed) and the
    call is a command (no `deadline`): a prompt hook never builds them."""
    path = folder / bilingual.NAME
    pairs = bilingual.load(path)
    if pairs is None and deadline is None and bilingual.source() is not None and bilingual.build(path):
        pairs = bilingual.load(path)
    found.bilingual = pairs
    path = folder / related.NAME
    kin = related.load(path) if model_folder()[0] else None
    if deadline is None:
        model = related.source()
        if model is None and kin is not None:
            kin.close()
            kin = None
        if model is None:  # turned off, or the model is gone: so are the words it related
            with contextlib.suppress(OSError):
                path.unlink()
        elif kin is None or kin.model != _signature(model):
            if kin is not None:
                kin.close()
            kin = related.load(path) if related.build(path, model) else None
    found.related = kin
    return found


def _signature(model: related.Model) -> str:
    try:
        return model.signature()
    except OSError:
        return ""


def build(path: Path) -> bool:
    """Read wordfreq's English and Chinese lists into a new lexicon at `path` (`tables.py`).
    False when wordfreq is not installed or the folder cannot be written."""
    if not writable(path):
        return False
    try:
        import wordfreq
    except ImportError:
        return False
    rows = _rows(wordfreq.get_frequency_dict("en"), wordfreq.get_frequency_dict("zh"))
    schema = "words(term TEXT PRIMARY KEY, zipf INTEGER NOT NULL)"
    return write_table(path, FORMAT, schema, sorted(rows.items()))


def _rows(english: dict[str, float], chinese: dict[str, float]) -> dict[str, int]:
    """Term -> Zipf frequency x 100, for the terms common enough to weigh less than 1."""
    found: dict[str, float] = {}
    plain = [(normalize(w), share) for w, share in english.items() if w.isascii() and w.isalpha()]
    for term, (_, share) in zip(stems([w for w, _ in plain]), plain, strict=True):
        found[term] = max(found.get(term, 0.0), share)
    for word, share in chinese.items():
        word = normalize(word)
        if is_chinese(word):
            found[word] = max(found.get(word, 0.0), share)
    floor = 10 ** (FULL - 9)  # Zipf FULL as a share of all words
    return {term: round(100 * (9 + math.log10(share))) for term, share in found.items() if share > floor}
