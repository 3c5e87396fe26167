"""Line handling shared by the file format modules.

`str.splitlines` also breaks on form feeds, NEL, U+2028 and other characters that are
ordinary content in a Markdown or YAML file; sagemem's lines end at LF (CRLF included) only,
as they do for git, grep and editors' line numbers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from .records import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

# Conflict markers. git writes them at the start of the line, seven characters each unless
# `conflict-marker-size` says more: `<<<<<<< HEAD`, `=======`, `>>>>>>> branch`.
_OPEN = re.compile(r"(<{7,})(?:[ \t]\S.*)?")
_SEPARATOR = re.compile(r"={7,}")
_CLOSE = re.compile(r"(>{7,})(?:[ \t]\S.*)?")
_HALF = re.compile(r"(?:<{7}|>{7})(?: \S.*)?")  # one half alone: git's size, git's label
_FENCE_OPEN = re.compile(r" {0,3}(`{3,})(?!.*`)| {0,3}(~{3,})")


def split_lines(text: str) -> list[str]:
    """`text` cut after each LF; the pieces keep their endings and join back to `text`."""
    lines = text.split("\n")
    pieces = [line + "\n" for line in lines[:-1]]
    return pieces + [lines[-1]] if lines[-1] else pieces


def to_lf(text: str) -> str:
    """`text` with CRLF and lone CR line endings made LF, as sagemem writes new content."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def conflict_marker_line(text: str) -> int | None:
    """The line of the first conflict marker, else None.

    A conflict git left is three lines at the start of the line, in order and of one length
    (`<<<<<<< HEAD`, `=======`, `>>>>>>> branch`): it counts wherever it is, inside a fenced
    code block too (git writes into a config block as into any other line). Outside code, half
    of one counts too, as a person resolving by hand may leave it (an opening line without
    its closing one, or the reverse), when it has git's shape: seven characters, alone or with
    a label after a blank; and a whole conflict counts indented by up to three blanks. Code is
    a fenced block (one never closed is no block: it would hide the rest of the file) or a
    line indented by four blanks or a tab (Markdown's indented code): that is how a memory
    shows what a conflict looks like. A line of `=======` alone is a heading's underline, and
    a long line of `>` a separator."""
    if "<<<<<<<" not in text and ">>>>>>>" not in text:
        return None
    lines = [line.rstrip("\r") for line in text.split("\n")]
    fences = _fences(lines)
    first = _whole(enumerate(lines))  # git's own, at the start of the line, wherever it is
    for number, line in enumerate(lines):
        body = line.lstrip(" ")
        if number not in fences and len(line) - len(body) <= 3 and _HALF.fullmatch(body):
            first = number if first is None else min(first, number)
            break
    outside = ((n, line) for n, line in enumerate(lines) if n not in fences and _indent(line) <= 3)
    indented = _whole(outside, indented=True)
    found = [n for n in (first, indented) if n is not None]
    return min(found) + 1 if found else None


def _indent(line: str) -> int:
    """Columns of leading blanks, a tab counting as four (Markdown's code indentation)."""
    body = line.lstrip(" \t")
    return len(line[: len(line) - len(body)].expandtabs(4))


def _whole(lines: Iterable[tuple[int, str]], *, indented: bool = False) -> int | None:
    """The index of the opening line of the first whole conflict among `lines` ((index, line)
    pairs): an opening line, then a separator and then a closing line of its length (and, when
    `indented`, its indentation). One pass: the earliest opening of each length waits for its
    separator, then for its closing line."""
    waiting: dict[tuple[str, int], list[Any]] = {}  # (indent, length) → [opening, separated]
    for number, line in lines:
        body = line.lstrip(" ") if indented else line
        indent = line[: len(line) - len(body)]
        if body[:1] not in "<=>":
            continue
        if opened := _OPEN.fullmatch(body):
            waiting.setdefault((indent, len(opened.group(1))), [number, False])
        elif _SEPARATOR.fullmatch(body):
            if (indent, len(body)) in waiting:
                waiting[indent, len(body)][1] = True
        elif closed := _CLOSE.fullmatch(body):
            pending = waiting.get((indent, len(closed.group(1))))
            if pending and pending[1]:
                return pending[0]
    return None


def _fences(lines: list[str]) -> set[int]:
    """The indexes of the lines in fenced code blocks, fences included; a fence never closed
    opens no block."""
    inside: set[int] = set()
    opening, fence = -1, ""
    for number, line in enumerate(lines):
        if fence:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped == fence[0] * len(stripped):
                inside.update(range(opening, number + 1))
                fence = ""
            continue
        opened = _FENCE_OPEN.match(line)
        if opened:
            opening, fence = number, opened.group(1) or opened.group(2)
    return inside


# Characters that a terminal or a prompt would not show as themselves: controls (escape
# sequences start with one), format characters (bidi overrides), line and paragraph separators.
_HIDDEN = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))


def printable(text: str) -> str:
    """`text` with each hidden character written as an escape (`\\n`, `\\x1b`, `\\u202e`), so a
    name or a line from a file cannot move the cursor, colour the terminal or start a line."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


def quoted(text: str, limit: int = 200) -> str:
    """`text` in double quotes, escaped as `printable` does (quotes and backslashes too), cut
    in the middle past `limit` characters: a path or a name put into text for an agent reads
    as data, never as words of the text around it."""
    if len(text) > limit:
        text = text[: limit // 2] + "…" + text[-(limit // 2) :]
    inner = printable(text.replace("\\", "\\\\").replace('"', '\\"'))
    return f'"{inner}"'


def _escape(ch: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
