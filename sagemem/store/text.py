"""Line handling shared by the file format modules.

`str.splitlines` also breaks on form feeds, NEL, U+2028 and other characters that are
ordinary content in a Markdown or YAML file; sagemem's lines end at LF (CRLF included) only,
as they do for git, grep and editors' line numbers.
"""

from __future__ import annotations

import re
import unicodedata

_MARKER_OPEN = re.compile(r"^<{7}(?: |\r?$)", re.M)
_MARKER_CLOSE = re.compile(r"^>{7}(?: |\r?$)", re.M)


def split_lines(text: str) -> list[str]:
    """`text` cut after each LF; the pieces keep their endings and join back to `text`."""
    lines = text.split("\n")
    pieces = [line + "\n" for line in lines[:-1]]
    return pieces + [lines[-1]] if lines[-1] else pieces


def to_lf(text: str) -> str:
    """`text` with CRLF and lone CR line endings made LF, as sagemem writes new content."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def conflict_marker_line(text: str) -> int | None:
    """The line of the first unresolved git conflict (a `<<<<<<<` line followed later by a
    `>>>>>>>` line), else None."""
    opened = _MARKER_OPEN.search(text)
    if opened and _MARKER_CLOSE.search(text, opened.end()):
        return text.count("\n", 0, opened.start()) + 1
    return None


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
