"""MEMORY.md: one line per memory, `- [Title](file.md) — description`, among the person's own text.

The entries are derived from the memory files; everything else in MEMORY.md (headings, notes,
their order) belongs to the person and is kept. An entry is a list item whose first link
points at a top-level `.md` file. These are pure functions on text; the store reads and
writes the file.

An entry never copies a secret: harnesses put MEMORY.md into every session's prompt, so its
title and description are written with what the pattern pass finds redacted
(`secrets.shown`), and an entry that holds one is stale.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from .names import is_reserved, name_key
from .records import Record
from .secrets import shown
from .text import split_lines

# NamedTuples, not dataclasses: a session start reads the index, and `dataclasses` would
# import `inspect` and `ast` for it.
if TYPE_CHECKING:  # nor YAML
    from .memory import Memory

HEADING = "# Memory\n\n"
MAX_DESCRIPTION_CHARS = 120

_ENTRY = re.compile(
    r"^(?P<prefix>[ \t]*[-*+][ \t]+)\[(?P<title>(?:\\.|[^\]\\\n])*)\]"
    r"\([ \t]*(?:<(?P<angle>[^>\n]*)>|(?P<bare>[^)\s]*))[ \t]*\)(?P<rest>[^\r\n]*)"
)
_ENTRY_LINES = re.compile(_ENTRY.pattern, re.MULTILINE)
# Characters a link target cannot carry as they are: written percent-encoded.
_TARGET_SPECIAL = frozenset("%#<>()[]")
_SEPARATOR = re.compile(r"\A\s*(?:[—–:-]\s*)?")


class Entry(Record):
    """An index line that lists a memory: its 1-based line number, target file and text."""

    line: int
    target: str
    title: str
    description: str
    text: str


class IndexReport(Record):
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
    """The canonical index line for a memory (without line ending), its secrets redacted."""
    return f"- [{_escape_title(_title(title))}]({_target(file)})" + _tail(description)


def line_for(memory: Memory) -> str:
    return entry_line(memory.file, memory.title, memory.description)


def parse_entry(line: str, number: int = 0) -> Entry | None:
    """The entry on `line`, or None if the line is not an index line.

    Links with an `#anchor`, into sub-directories, with a scheme, or to the reserved files
    (`session-log.md`) are the person's own references, not index lines.
    """
    found = _ENTRY.match(line)
    target = _target_of(found) if found else None
    if found is None or target is None:
        return None
    return Entry(
        line=number,
        target=target,
        title=re.sub(r"\\(.)", r"\1", found.group("title")),
        description=_SEPARATOR.sub("", found.group("rest")).strip(),
        text=line.rstrip("\r\n"),
    )


def _target_of(found: re.Match[str]) -> str | None:
    raw = found.group("angle") if found.group("angle") is not None else found.group("bare")
    if "#" in raw:
        return None
    target = unquote(raw.strip())
    if not target.lower().endswith(".md") or "/" in target or "\\" in target or is_reserved(target):
        return None
    return target


def targets(text: str) -> list[str]:
    """The files the entries of `text` list, in line order: `entries`' targets, found in one
    pass over the text (no line can hold a part of another's match)."""
    found = (_target_of(m) for m in _ENTRY_LINES.finditer(text))
    return [target for target in found if target is not None]


def entries(text: str) -> list[Entry]:
    lines = [line.rstrip("\r\n") for line in split_lines(text)]
    return [e for n, line in enumerate(lines, 1) if (e := parse_entry(line, n))]


def check(text: str, files: Iterable[str], memories: Mapping[str, Memory]) -> IndexReport:
    """Compare the index with the live memory `files` (`memories`: the parsed ones, by name_key)."""
    live = {name_key(f): f for f in files}
    roles = _roles(entries(text), live, memories)
    found = {name_key(e.target) for e, role in roles.values() if role in ("entry", "stale")}

    def pick(role: str) -> tuple[Entry, ...]:
        return tuple(e for e, r in roles.values() if r == role)

    unlisted = sorted((f for k, f in live.items() if k not in found), key=name_key)
    return IndexReport(pick("dangling"), pick("duplicate"), tuple(unlisted), pick("stale"))


def rebuild(text: str, files: Iterable[str], memories: Mapping[str, Memory]) -> str:
    """The index with dangling and duplicate entries dropped, stale ones refreshed in place and
    unlisted memories appended in name order. Deterministic, and the identity on a healthy index."""
    live = {name_key(f): f for f in files}
    eol = _eol(text)
    roles = _roles(entries(text), live, memories)
    out: list[str] = []
    for number, line in enumerate(split_lines(text), 1):
        entry, role = roles.get(number, (None, "text"))
        if role == "stale" and entry is not None:
            out.append(_refresh(line, memories[name_key(entry.target)], eol))
        elif role not in ("dangling", "duplicate"):
            out.append(line)
    found = {name_key(e.target) for e, role in roles.values() if role in ("entry", "stale")}
    missing = sorted((f for k, f in live.items() if k not in found), key=name_key)
    lines = [
        line_for(memories[name_key(f)]) if name_key(f) in memories else entry_line(f, f[:-3], "")
        for f in missing
    ]
    return _append("".join(out), lines, eol)


def upsert(text: str, memory: Memory) -> str:
    """The index with `memory`'s entry brought up to date in place, or appended if it has none."""
    key = name_key(memory.file)
    mine = [e for e in entries(text) if name_key(e.target) == key]
    roles = _roles(mine, {key: memory.file}, {key: memory})
    for entry, role in roles.values():
        if role == "stale":
            lines = split_lines(text)
            lines[entry.line - 1] = _refresh(lines[entry.line - 1], memory, _eol(text))
            return "".join(lines)
        if role == "entry":
            return text
    return _append(text, [line_for(memory)], _eol(text))


def remove(text: str, file: str) -> str:
    """The index without any line that lists `file` (for a memory being archived)."""
    key = name_key(file)
    return "".join(
        line for line in split_lines(text) if not ((e := parse_entry(line)) and name_key(e.target) == key)
    )


def _roles(
    found: Iterable[Entry], live: Mapping[str, str], memories: Mapping[str, Memory]
) -> dict[int, tuple[Entry, str]]:
    """What each index line is, by line number: the `entry` of a memory (or `stale` if it needs
    refreshing), a `dangling` line, a `duplicate` of the entry, or the person's own `note`.

    A memory's entry is its first line carrying the memory's title (else its first line);
    later lines with that same title are duplicates, as a git union merge leaves them, and
    lines with another title are the person's annotations, kept as they are.
    """
    roles: dict[int, tuple[Entry, str]] = {}
    groups: dict[str, list[Entry]] = {}
    for e in found:
        key = name_key(e.target)
        if key in live:
            groups.setdefault(key, []).append(e)
        else:
            roles[e.line] = (e, "dangling")
    for key, group in groups.items():
        memory = memories.get(key)
        title = _title(memory.title) if memory else None
        chosen = next((e for e in group if e.title == title), group[0])
        for e in group:
            if e is chosen:
                role = "stale" if memory and _is_stale(e, memory) else "entry"
            else:
                role = "duplicate" if e.title == chosen.title else "note"
            roles[e.line] = (e, role)
    return roles


def _is_stale(entry: Entry, memory: Memory) -> bool:
    """An entry is stale when its description no longer matches the memory's, or it holds a
    secret. The title is the person's to choose (Claude Code writes "User prefers uv" for
    `name: prefers-uv`), but not a secret in it."""
    return entry.description != _cut(" ".join(shown(memory.description).split())) or (
        shown(entry.title) != entry.title
    )


def _refresh(line: str, memory: Memory, eol: str) -> str:
    """The entry with the memory's current description, keeping its prefix and title (a
    secret in it redacted)."""
    found = _ENTRY.match(line)
    if found is None:
        return entry_line(memory.file, memory.title, memory.description) + eol
    title = found.group("title")
    plain = re.sub(r"\\(.)", r"\1", title)
    if shown(plain) != plain:
        title = _escape_title(_title(plain))
    return f"{found.group('prefix')}[{title}]({_target(memory.file)}){_tail(memory.description)}{eol}"


def _title(title: str) -> str:
    return " ".join(shown(title).split())


def _target(file: str) -> str:
    return "".join(quote(c, safe="") if c in _TARGET_SPECIAL or c.isspace() else c for c in file)


def _tail(description: str) -> str:
    description = _cut(" ".join(shown(description).split()))
    return f" — {description}" if description else ""


def _escape_title(title: str) -> str:
    return re.sub(r"([\\\[\]])", r"\\\1", title)


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
