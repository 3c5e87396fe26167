"""Line handling shared by the file format modules.

`str.splitlines` also breaks on form feeds, NEL, U+2028 and other characters that are
ordinary content in a Markdown or YAML file; sagemem's lines end at LF (CRLF included) only,
as they do for git, grep and editors' line numbers.
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """`text` cut after each LF; the pieces keep their endings and join back to `text`."""
    lines = text.split("\n")
    pieces = [line + "\n" for line in lines[:-1]]
    return pieces + [lines[-1]] if lines[-1] else pieces


def to_lf(text: str) -> str:
    """`text` with CRLF and lone CR line endings made LF, as sagemem writes new content."""
    return text.replace("\r\n", "\n").replace("\r", "\n")
