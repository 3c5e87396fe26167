"""Frontmatter: split a file into its YAML block and body, parse the block safely, and change
single keys in place.

A change never re-serialises the whole block. Only the lines of the changed key are replaced;
every other byte (other keys, their order, comments, blank lines, line endings, the body)
stays as it was. Re-dumping with PyYAML or python-frontmatter would reorder keys, drop
comments and strip whitespace, and so change a file's version for nothing. After each change
the new block is parsed again and compared with what was intended, so an edit that would
disturb another key is refused instead of written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from .errors import InvalidMemory
from .text import split_lines

MAX_FRONTMATTER_BYTES = 64 * 1024
DELETE = object()  # a value for `set_keys` that removes the key

_OPEN = re.compile(r"\A\ufeff?---[ \t]*(\r?\n)")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
# A top-level `key:` line. The key is plain or quoted; the colon is followed by a blank or
# the end of the line, as YAML requires.
_KEY_LINE = re.compile(
    r"""^(?:"(?P<dq>[^"\\\n]*)"|'(?P<sq>[^'\n]*)'|(?P<plain>[^\s#:'"\-?\[\]{},&*!|>%@`][^\n]*?))"""
    r"""[ \t]*:(?=[ \t]|\r?\n|$)"""
)


@dataclass(frozen=True)
class Parts:
    """A file's text cut into pieces; `head + matter + tail + body` is the text exactly."""

    head: str  # the opening fence line with its line ending (and a BOM, if any); "" if none
    matter: str  # the YAML between the fences, line endings as in the file
    tail: str  # the closing fence line; "" if there is no frontmatter
    body: str

    @property
    def has_frontmatter(self) -> bool:
        return bool(self.head)

    @property
    def eol(self) -> str:
        return "\r\n" if self.head.endswith("\r\n") else "\n"

    @property
    def body_line(self) -> int:
        """1-based line number of the body's first line in the file (one past the end when the
        file stops at the closing fence)."""
        before = self.head + self.matter + self.tail
        return before.count("\n") + (1 if before.endswith("\n") or not before else 2)


_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")
_FastLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def split(text: str, file: str) -> Parts:
    """Cut `text` into fence, YAML and body. A block that opens but never closes is invalid."""
    opened = _OPEN.match(text)
    if not opened:
        return Parts("", "", "", text)
    closed = _CLOSE.search(text, opened.end())
    if not closed:
        raise InvalidMemory(file, "frontmatter opens with '---' but has no closing '---' line")
    return Parts(
        head=text[: opened.end()],
        matter=text[opened.end() : closed.start()],
        tail=closed.group(0),
        body=text[closed.end() :],
    )


def parse(matter: str, file: str) -> dict[str, Any]:
    """The YAML mapping in `matter`; `InvalidMemory` names the rule it breaks.

    A top-level value with a `: ` in it (`description: Deploy flow: how code reaches prod`)
    is not YAML, yet it is how people and agents write a sentence, and Claude Code reads it
    as text. Such values are read as the text they hold (`unquoted`); anything else that
    strict YAML refuses stays refused."""
    if len(matter.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        raise InvalidMemory(file, f"frontmatter is larger than {MAX_FRONTMATTER_BYTES // 1024} KiB")
    try:
        return _load(matter, file)
    except InvalidMemory:
        mended, lines = _mended(matter)
        if not lines:
            raise
    return _load(mended, file)  # lines are as they were: an error still names the right one


def unquoted(matter: str) -> list[int]:
    """The 0-based lines of `matter` whose value `parse` reads as text although strict YAML
    refuses it (a `: ` inside an unquoted value); none when the block is unreadable anyway."""
    try:
        _load(matter, "")
        return []
    except InvalidMemory:
        pass
    mended, lines = _mended(matter)
    try:
        _load(mended, "")
    except InvalidMemory:
        return []
    return lines


MAX_MENDED = 64  # lines of one block mended at most


def _mended(matter: str) -> tuple[str, list[int]]:
    """`matter` with each line YAML stops at for a `: ` inside an unquoted top-level value
    quoted, one at a time, as YAML reports them: a line inside a quoted or block value is
    never touched, since YAML reads past it."""
    lines, done = split_lines(matter), []
    for _ in range(MAX_MENDED):
        try:
            yaml.load("".join(lines), Loader=_FastLoader)  # noqa: S506 - a safe loader
            break
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            if mark is None or "mapping values are not allowed" not in str(exc.problem):
                break
            at = mark.line
            fixed = _quoted_line(lines[at]) if at < len(lines) else None
            if fixed is None or fixed == lines[at]:
                break
            lines[at] = fixed
            done.append(at)
        except yaml.YAMLError:
            break
    return "".join(lines), done


# `key: value` at the start of a line, with a plain key and a value that is no YAML
# construct of its own: no quote, flow collection, block scalar, anchor, tag or comment.
_PLAIN_VALUE = re.compile(
    r"""^(?P<key>[A-Za-z_][\w.-]*):[ \t]+(?P<value>[^\s"'\[{|>&*!%@`#][^\r\n]*?)[ \t]*(?P<eol>\r?\n|)$"""
)


def _quoted_line(line: str) -> str:
    """`line` with its value in double quotes, when the value holds a `: ` that makes the
    line unreadable on its own; else `line` as it is. A ` #` ends the value, as it ends a
    plain YAML value: what follows is a comment."""
    found = _PLAIN_VALUE.match(line)
    if not found or ": " not in found["value"] and not found["value"].endswith(":"):
        return line
    try:
        yaml.load(line, Loader=_FastLoader)  # noqa: S506 - a safe loader
        return line
    except yaml.YAMLError:
        pass
    value = re.split(r"[ \t]#", found["value"], maxsplit=1)[0].rstrip()
    return render_key(found["key"], value).removesuffix("\n") + found["eol"]


def _load(matter: str, file: str) -> dict[str, Any]:
    try:
        # Aliases are refused before anything is built, so a 'billion laughs' block cannot
        # expand; the parser's events show them without building anything. One loader does
        # both, so whether a block parses never depends on a '*' somewhere in it (PyYAML's
        # own scanner refuses tabs that libyaml accepts).
        if "*" in matter and _has_alias(matter):
            raise InvalidMemory(file, "frontmatter uses YAML aliases (*name), which are not allowed")
        data = yaml.load(matter, Loader=_FastLoader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        # Marks count from 0 within the block; the file has the opening fence line before it.
        where = f" at line {exc.problem_mark.line + 2}" if exc.problem_mark else ""
        context = f" ({exc.context} at line {exc.context_mark.line + 2})" if exc.context_mark else ""
        raise InvalidMemory(file, f"frontmatter is not valid YAML{where}: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise InvalidMemory(file, f"frontmatter is not valid YAML: {exc}") from None
    except RecursionError:
        raise InvalidMemory(file, "frontmatter is nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidMemory(file, "frontmatter must be a YAML mapping of 'key: value' lines")
    return data


def _has_alias(matter: str) -> bool:
    return any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(matter, Loader=_FastLoader))


def render_key(key: str, value: Any, eol: str = "\n") -> str:
    """`key: value` as YAML lines, quoted where YAML needs it, ending in `eol`.

    The key is always in block style; a list of scalars is written in flow style (`[a, b]`).
    """
    style = {"default_flow_style": None if isinstance(value, (list, dict)) else False}
    text = _dump({key: value}, **style)
    if _LINE_BREAKS.search(text) or yaml.safe_load(text) != {key: value}:
        # PyYAML writes NEL and U+2028/9 raw, and reads NEL back as a space; escaped
        # double quotes carry every character exactly.
        text = _dump({key: value}, default_style='"', **style)
    return text.replace("\n", eol)


def _dump(data: dict[str, Any], **style: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=1_000_000, **style)


def set_keys(text: str, changes: Mapping[str, Any], file: str) -> str:
    """`text` with each top-level key in `changes` set (or removed, for `DELETE`), in place."""
    parts = split(text, file)
    if not parts.has_frontmatter:
        # Match the body's line endings, and keep a byte order mark at the very start.
        eol = "\r\n" if "\r\n" in text.split("\n", 1)[0] + "\n" else "\n"
        bom, body = ("\ufeff", text[1:]) if text.startswith("\ufeff") else ("", text)
        new = "".join(render_key(k, v, eol) for k, v in changes.items() if v is not DELETE)
        return f"{bom}---{eol}{new}---{eol}{body}" if new else text
    eol = parts.eol
    original = parse(parts.matter, file)
    # A key whose value would not change keeps its lines (block style, comments and all).
    changes = {k: v for k, v in changes.items() if not _already(original, k, v)}
    lines = split_lines(parts.matter)
    blocks = _top_level_blocks(lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        key = next((k for k, (start, _) in blocks.items() if start == i and k in changes), None)
        if key is None:
            out.append(lines[i])
            i += 1
            continue
        if changes[key] is not DELETE:
            out.append(render_key(key, changes[key], eol))
        i = blocks[key][1]
    out += [render_key(k, v, eol) for k, v in changes.items() if k not in blocks and v is not DELETE]
    matter = "".join(out)
    expected = dict(original)
    for key, value in changes.items():
        if value is DELETE:
            expected.pop(key, None)
        else:
            expected[key] = value
    _verify(matter, expected, file)
    return parts.head + matter + parts.tail + parts.body


def set_nested(text: str, parent: str, key: str, value: Any, file: str) -> str:
    """Set `parent.key` (one level down, block style) in place; the parent must exist."""
    parts = split(text, file)
    original = parse(parts.matter, file)
    lines = split_lines(parts.matter)
    start, end = _top_level_blocks(lines).get(parent, (0, 0))
    children = [
        j for j in range(start + 1, end) if lines[j].strip() and not lines[j].lstrip().startswith("#")
    ]
    if not children or not isinstance(original.get(parent), dict):
        raise InvalidMemory(file, f"cannot change '{parent}.{key}' in place")
    indent = lines[children[0]][: len(lines[children[0]]) - len(lines[children[0]].lstrip())]
    for j in children:
        line = lines[j]
        if not line.startswith(indent) or line[len(indent)] in " \t":
            continue
        found = _KEY_LINE.match(line[len(indent) :])
        if found and _key_of(found) == key:
            stop = j + 1
            while stop < end and (not lines[stop].strip() or lines[stop][: len(indent) + 1].isspace()):
                stop += 1
            while stop > j + 1 and not lines[stop - 1].strip():
                stop -= 1
            rendered = split_lines(render_key(key, value, parts.eol))
            lines[j:stop] = [indent + r for r in rendered]
            break
    else:
        raise InvalidMemory(file, f"cannot change '{parent}.{key}' in place")
    matter = "".join(lines)
    expected = dict(original)
    expected[parent] = {**original[parent], key: value}
    _verify(matter, expected, file)
    return parts.head + matter + parts.tail + parts.body


def _already(original: Mapping[str, Any], key: str, value: Any) -> bool:
    if value is DELETE:
        return key not in original
    return key in original and original[key] == value and type(original[key]) is type(value)


def key_lines(matter: str) -> dict[str, tuple[int, int]]:
    """Each top-level key's lines in `matter`: [start, end) as 0-based line indexes."""
    return _top_level_blocks(split_lines(matter))


def _verify(matter: str, expected: dict[str, Any], file: str) -> None:
    if parse(matter, file) != expected:
        raise InvalidMemory(file, "cannot change the frontmatter in place without disturbing other keys")


def _key_of(match: re.Match[str]) -> str:
    for group in ("dq", "sq", "plain"):
        if match.group(group) is not None:
            return match.group(group).strip()
    return ""


def _top_level_blocks(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Each top-level key's line range [start, end): its line plus indented or `- ` lines after it.

    Blank lines inside a block belong to it; blank lines and column-0 comments after it do not.
    A repeated key maps to its last block, the one YAML keeps.
    """
    blocks: dict[str, tuple[int, int]] = {}
    i = 0
    while i < len(lines):
        found = _KEY_LINE.match(lines[i])
        if not found:
            i += 1
            continue
        end = j = i + 1
        while j < len(lines):
            line = lines[j]
            if not line.strip():
                j += 1
            elif line[0] in " \t" or line.startswith("- ") or line.rstrip("\r\n") == "-":
                j += 1
                end = j
            else:
                break
        blocks[_key_of(found)] = (i, end)
        i = end
    return blocks
