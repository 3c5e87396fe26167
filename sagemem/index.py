"""MEMORY.md: one line per memory, `- [Title](file.md) — description`, among the person's own text.

The entries are derived from the memory files; everything else in MEMORY.md (headings, notes,
their order) belongs to the person and is kept. An entry is a list item whose first link
points at a top-level `.md` file. These are pure functions on text; the store reads and
writes the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from .memory import Memory
from .names import name_key
from .text import split_lines

HEADING = "# Memory\n\n"
MAX_DESCRIPTION_CHARS = 120

_ENTRY = re.compile(
    r"^(?P<prefix>[ \t]*[-*+][ \t]+)\[(?P<title>(?:\\.|[^\]\\\n])*)\]"
    r"\([ \t]*(?:<(?P<angle>[^>\n]*)>|(?P<bare>[^)\s]*))[ \t]*\)(?P<rest>[^\r\n]*)"
)
_SEPARATOR = re.compile(r"\A\s*(?:[—–:-]\s*)?")


@dataclass(frozen=True)
class Entry:
    """An index line that lists a memory: its 1-based line number, target file and text."""

    line: int
    target: str
    title: str
    description: str
    text: str


@dataclass(frozen=True)
class IndexReport:
    """What is wrong with an index, each list in line or name order; empty lists mean healthy.

    `dangling`: entries for files that are not live memories. `duplicates`: second and later
    entries for one memory (a git union merge leaves these). `unlisted`: memories with no
    entry. `stale`: entries whose title or description no longer match the memory.
    """

    dangling: tuple[Entry, ...]
    duplicates: tuple[Entry, ...]
    unlisted: tuple[str, ...]
    stale: tuple[Entry, ...]

    @property
    def ok(self) -> bool:
        return not (self.dangling or self.duplicates or self.unlisted or self.stale)

    def to_dict(self) -> dict[str, object]:
        def rows(entries: Iterable[Entry]) -> list[dict[str, object]]:
            return [{"line": e.line, "file": e.target, "text": e.text} for e in entries]

        return {
            "ok": self.ok,
            "dangling": rows(self.dangling),
            "duplicates": rows(self.duplicates),
            "unlisted": list(self.unlisted),
            "stale": rows(self.stale),
        }


def entry_line(file: str, title: str, description: str) -> str:
    """The canonical index line for a memory (without line ending)."""
    title = " ".join(title.split()).replace("[", "\\[").replace("]", "\\]")
    target = f"<{file}>" if re.search(r"[\s()<>]", file) else file
    description = _cut(" ".join(description.split()))
    return f"- [{title}]({target})" + (f" — {description}" if description else "")


def line_for(memory: Memory) -> str:
    return entry_line(memory.file, memory.title, memory.description)


def parse_entry(line: str, number: int = 0) -> Entry | None:
    found = _ENTRY.match(line)
    if not found:
        return None
    target = unquote(found.group("angle") if found.group("angle") is not None else found.group("bare"))
    target = target.split("#", 1)[0].strip()
    if not target.lower().endswith(".md") or "/" in target or "\\" in target:
        return None
    title = re.sub(r"\\(.)", r"\1", found.group("title"))
    return Entry(
        line=number,
        target=target,
        title=title,
        description=_SEPARATOR.sub("", found.group("rest")).strip(),
        text=line.rstrip("\r\n"),
    )


def entries(text: str) -> list[Entry]:
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    return [e for n, line in enumerate(lines, 1) if (e := parse_entry(line, n))]


def check(text: str, files: Iterable[str], memories: Mapping[str, Memory]) -> IndexReport:
    """Compare the index with the live memory `files` (`memories`: the parsed ones, by name_key)."""
    live = {name_key(f): f for f in files}
    seen: set[str] = set()
    dangling, duplicates, stale = [], [], []
    for entry in entries(text):
        key = name_key(entry.target)
        if key not in live:
            dangling.append(entry)
        elif key in seen:
            duplicates.append(entry)
        else:
            seen.add(key)
            if key in memories and _is_stale(entry, memories[key]):
                stale.append(entry)
    unlisted = sorted((f for k, f in live.items() if k not in seen), key=name_key)
    return IndexReport(tuple(dangling), tuple(duplicates), tuple(unlisted), tuple(stale))


def rebuild(text: str, files: Iterable[str], memories: Mapping[str, Memory]) -> str:
    """The index with dangling and duplicate entries dropped, stale ones refreshed in place and
    unlisted memories appended in name order. Deterministic, and the identity on a healthy index."""
    live = {name_key(f): f for f in files}
    eol = _eol(text)
    seen: set[str] = set()
    out: list[str] = []
    for number, line in enumerate(split_lines(text), 1):
        entry = parse_entry(line, number)
        if entry is None:
            out.append(line)
            continue
        key = name_key(entry.target)
        if key not in live or key in seen:
            continue
        seen.add(key)
        memory = memories.get(key)
        out.append(_refresh(line, memory, eol) if memory and _is_stale(entry, memory) else line)
    missing = sorted((f for k, f in live.items() if k not in seen), key=name_key)
    lines = [
        line_for(memories[name_key(f)]) if name_key(f) in memories else entry_line(f, f[:-3], "")
        for f in missing
    ]
    return _append("".join(out), lines, eol)


def upsert(text: str, memory: Memory) -> str:
    """The index with `memory`'s entry brought up to date in place, or appended if it has none."""
    key = name_key(memory.file)
    lines = split_lines(text)
    for i, line in enumerate(lines):
        entry = parse_entry(line)
        if entry and name_key(entry.target) == key:
            if _is_stale(entry, memory):
                lines[i] = _refresh(line, memory, _eol(text))
                return "".join(lines)
            return text
    return _append(text, [line_for(memory)], _eol(text))


def _is_stale(entry: Entry, memory: Memory) -> bool:
    return entry.title != " ".join(memory.title.split()) or entry.description != _cut(
        " ".join(memory.description.split())
    )


def _refresh(line: str, memory: Memory, eol: str) -> str:
    found = _ENTRY.match(line)
    prefix = found.group("prefix") if found else "- "
    return prefix + line_for(memory)[2:] + eol


def _append(text: str, lines: list[str], eol: str) -> str:
    if not lines:
        return text
    if not text:
        text = HEADING.replace("\n", eol)
    elif not text.endswith("\n"):
        text += eol
    return text + "".join(line + eol for line in lines)


def _eol(text: str) -> str:
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"
