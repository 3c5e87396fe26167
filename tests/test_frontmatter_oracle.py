"""python-frontmatter as an oracle for sagemem's own frontmatter parsing.

sagemem cuts and parses the block itself, so that it can change single keys in place
(docs/decisions.md). Where python-frontmatter and sagemem are meant to read a file the same
way, they must: an LF file that opens with a `---` line, holds a YAML mapping, closes with a
`---` line and has no byte order mark, then a body. The generators below stay inside that
domain; each place where the two differ on purpose is left out, with the reason beside it.
"""

from __future__ import annotations

import datetime as dt
import os
import string
from typing import Any

import frontmatter as pyfm  # the python-frontmatter library, not sagemem.store.frontmatter
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sagemem.store.frontmatter import parse, split
from sagemem.store.memory import KNOWN_KEYS, parse_memory

# CI runs a few hundred examples; a local hunt for differences can ask for many more.
EXAMPLES = int(os.environ.get("SAGEMEM_ORACLE_EXAMPLES", "300"))

# PyYAML's own scanner refuses a tab after a plain scalar, which libyaml accepts. Both
# libraries use libyaml when it is there, so trailing tabs are only generated then.
TABS = hasattr(yaml, "CSafeLoader")

# -- the pieces of YAML text ---------------------------------------------------------------

_CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
_KANA = st.characters(min_codepoint=0x3041, max_codepoint=0x30FA)
_LETTER = st.one_of(st.sampled_from(string.ascii_letters + "éüßøĀżЖж"), _CJK, _KANA)
_DIGIT = st.sampled_from(string.digits)
# Inside a plain scalar in block context (never first): no ':' and no '#', which are added
# only where they stay content (`a:b`, `a#b`).
_PLAIN_INNER = st.one_of(_LETTER, _DIGIT, st.sampled_from("_-.~/()!?+=;'\"%@*&|>`,$^[]{}"))
# Inside a plain scalar in a flow collection: no `,[]{}` either.
_FLOW_INNER = st.one_of(_LETTER, _DIGIT, st.sampled_from("_-.~/()!?+=;'\"%@*&|>`$^"))
# Any character YAML allows in a quoted scalar or a comment, except line breaks (LF files;
# NEL, U+2028 and U+2029 are line breaks to YAML), plus the characters that matter here.
_TEXT_CHAR = st.one_of(
    st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Zl", "Zp")),
    st.sampled_from("#:*&!'\"\t -|>[]{},"),
)


def _word(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.tuples(st.one_of(_LETTER, _DIGIT), st.text(inner, max_size=7)).map("".join)


_WORD = _word(_PLAIN_INNER)
_PLAIN = st.lists(
    st.one_of(_WORD, st.tuples(_WORD, st.sampled_from(":#"), _WORD).map("".join)), min_size=1, max_size=5
).flatmap(lambda words: st.sampled_from([" ", "  "]).map(lambda sep: sep.join(words)))
_FLOW_PLAIN = st.lists(_word(_FLOW_INNER), min_size=1, max_size=3).map(" ".join)
_SINGLE = st.text(_TEXT_CHAR, max_size=20).map(lambda s: "'" + s.replace("'", "''") + "'")
_ESCAPES = ["\\\\", '\\"', "\\n", "\\t", "\\/", "\\0", "\\a", "\\e", "\\ ", "\\_", "\\N", "\\L", "\\P"]
_DOUBLE = st.lists(
    st.one_of(
        _TEXT_CHAR.map(lambda c: {"\\": "\\\\", '"': '\\"'}.get(c, c)),
        st.sampled_from(_ESCAPES),
        st.integers(0x20, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF).map(lambda c: f"\\U{c:08x}"),
        st.integers(0x20, 0xFF).map(lambda c: f"\\x{c:02X}"),
    ),
    max_size=12,
).map(lambda parts: '"' + "".join(parts) + '"')
_NUMBER = st.one_of(
    st.integers(-(10**15), 10**15).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    # YAML 1.1 forms PyYAML reads as numbers (or, for some, as strings); both sides use PyYAML.
    st.sampled_from(
        ["0x1F", "0o17", "017", "0b101", "1_000", "+12", "-0", "1:30", "190:20:30", "6.8523015e+5"]
        + ["685.230_15e+03", ".inf", "-.Inf", ".NaN", ".5", "1.", "12e3", "0.", "1e+3"]
    ),
)
_BOOL_NULL = st.sampled_from(
    ["true", "false", "True", "FALSE", "yes", "No", "on", "OFF", "y", "n", "null", "Null", "NULL", "~"]
)
_DATE = st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)).map(dt.date.isoformat)
_TZ = st.sampled_from(["", "Z", "+05:30", "-08", " +01:00", "-00:00"])
_DATETIME = st.builds(
    lambda moment, sep, fraction, tz: f"{moment:%Y-%m-%d}{sep}{moment:%H:%M:%S}{fraction}{tz}",
    st.datetimes(dt.datetime(1000, 1, 1)),
    st.sampled_from(["T", "t", " "]),
    st.sampled_from(["", ".5", ".123456", ".1234567"]),
    _TZ,
)
_SCALAR = st.one_of(_PLAIN, _SINGLE, _DOUBLE, _NUMBER, _BOOL_NULL, _DATE, _DATETIME)
_FLOW_SCALAR = st.one_of(_FLOW_PLAIN, _SINGLE, _DOUBLE, _NUMBER, _BOOL_NULL, _DATE)


def _flow(depth: int) -> st.SearchStrategy[str]:
    """A flow list or mapping on one line, `[a, 'b c']` or `{k: v}`, spaced in different ways."""
    item = _FLOW_SCALAR if depth >= 2 else st.one_of(_FLOW_SCALAR, st.deferred(lambda: _flow(depth + 1)))
    sep = st.sampled_from([", ", ",", " , "])
    pair = st.tuples(st.one_of(_FLOW_PLAIN, _SINGLE, _DOUBLE), item).map(lambda kv: f"{kv[0]}: {kv[1]}")
    return st.one_of(
        st.tuples(st.lists(item, max_size=4), sep, st.sampled_from(["", " "])).map(
            lambda t: f"[{t[2]}{t[1].join(t[0])}{t[2]}]"
        ),
        st.tuples(st.lists(pair, max_size=3), sep).map(lambda t: "{" + t[1].join(t[0]) + "}"),
    )


_CJK_TEXT = st.text(st.one_of(_CJK, _KANA), min_size=1, max_size=4)
_QUOTED_PART = st.text(_TEXT_CHAR.filter(lambda c: c not in "'\"\\"), min_size=1, max_size=15)
# A block scalar's line: text that starts with something other than a space, or a line that
# looks like a fence, a comment, a key or a list item.
_BLOCK_TEXT = st.one_of(
    st.tuples(
        st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Zl", "Zp", "Zs")),
        st.text(_TEXT_CHAR, max_size=20),
    ).map("".join),
    st.sampled_from(["---", "...", "--- x", "# not a comment", "key: value", "- item", "---   "]),
)
_INLINE = st.one_of(
    _SCALAR,
    _SCALAR,
    _flow(0),
    st.tuples(st.just("!!str "), st.one_of(_PLAIN, _NUMBER, _SINGLE)).map("".join),
)
_COMMENT = st.text(_TEXT_CHAR, max_size=15).map(lambda text: "#" + text)
_TRAILING = st.sampled_from(["", " ", "   ", "\t", " \t "] if TABS else ["", " ", "   "])
_SPACE_COMMENT = st.one_of(st.just(""), _COMMENT.map(lambda c: " " + c))
_LINE_END = st.tuples(_SPACE_COMMENT, _TRAILING).map(lambda end: end[0] + end[1] + "\n")


@st.composite
def _value(draw: st.DrawFn, indent: int, depth: int) -> str:
    """What follows `key:`: the rest of its line and any lines that belong to it."""
    kinds = ["inline", "inline", "inline", "empty", "block scalar", "multi-line"]
    if depth < 2:
        kinds += ["block list", "mapping"]
    kind = draw(st.sampled_from(kinds))
    if kind == "inline":
        return " " + draw(_INLINE) + draw(_LINE_END)
    if kind == "empty":
        return draw(_LINE_END)
    if kind == "block scalar":
        return draw(_block_scalar(indent))
    if kind == "multi-line":
        return draw(_multi_line(indent))
    if kind == "block list":
        return "\n" + draw(_block_list(indent + draw(st.sampled_from([0, 2]))))
    return "\n" + draw(_mapping(indent + draw(st.sampled_from([2, 4])), depth + 1))


@st.composite
def _block_scalar(draw: st.DrawFn, indent: int) -> str:
    """`|` or `>` with a chomping indicator, maybe an explicit indentation, and its lines:
    text that looks like fences, comments or keys, blank lines, and trailing blank lines."""
    step = draw(st.integers(1, 4))
    explicit = draw(st.booleans())
    style, chomping = draw(st.sampled_from("|>")), draw(st.sampled_from(["", "-", "+"]))
    header = style + chomping + (str(step) if explicit else "")
    pad = " " * (indent + step)
    lines: list[str] = []
    started = explicit
    for kind in draw(st.lists(st.sampled_from(["text", "text", "blank"]), max_size=5)):
        if kind == "blank":
            lines.append(draw(st.sampled_from(["", pad])) + "\n")
        else:
            # Extra indentation is content, except on the first text line without an explicit
            # indentation, where it would set the indentation instead.
            extra = " " * draw(st.integers(0, 2)) if started else ""
            lines.append(pad + extra + draw(_BLOCK_TEXT) + "\n")
            started = True
    return " " + header + draw(_LINE_END) + "".join(lines)


@st.composite
def _multi_line(draw: st.DrawFn, indent: int) -> str:
    """A plain or quoted scalar that goes on over indented lines (and maybe a blank line)."""
    pad = " " * (indent + draw(st.integers(1, 3)))
    quote = draw(st.sampled_from(["", "'", '"']))
    parts = draw(st.lists(_QUOTED_PART if quote else _PLAIN, min_size=2, max_size=3))
    gaps = [draw(st.sampled_from(["\n" + pad, "\n\n" + pad])) for _ in parts[1:]]
    text = parts[0] + "".join(gap + part for gap, part in zip(gaps, parts[1:], strict=True))
    end = draw(_LINE_END) if not quote else draw(_TRAILING) + "\n"
    return f" {quote}{text}{quote}{end}"


@st.composite
def _block_list(draw: st.DrawFn, indent: int) -> str:
    """`- item` lines: scalars, flow collections, empty items, one-key mappings, comments."""
    pad = " " * indent
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["item", "item", "empty", "pair", "comment"]))
        if kind == "item":
            lines.append(pad + "- " + draw(_INLINE) + draw(_LINE_END))
        elif kind == "empty":
            # Spaces only: PyYAML (both scanners) refuses a tab right after a bare `-`.
            lines.append(pad + "-" + draw(_SPACE_COMMENT) + draw(st.sampled_from(["", " ", "  "])) + "\n")
        elif kind == "pair":
            lines.append(f"{pad}- {draw(_KEY)}: {draw(_SCALAR)}{draw(_LINE_END)}")
        else:
            lines.append(pad + draw(_COMMENT) + "\n")
    if not any(line.lstrip(" ").startswith("-") for line in lines):
        lines.append(pad + "- " + draw(_SCALAR) + "\n")
    return "".join(lines)


@st.composite
def _mapping(draw: st.DrawFn, indent: int, depth: int) -> str:
    pad = " " * indent
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            lines.append(draw(_filler))
        lines.append(pad + draw(_KEY) + draw(_COLON) + draw(_value(indent, depth)))
    return "".join(lines)


_KEY = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,12}", fullmatch=True),
    _PLAIN,
    _CJK_TEXT,
    st.tuples(_CJK_TEXT, st.sampled_from("_-"), _WORD).map("".join),
    _SINGLE,
    _DOUBLE,
    # Keys that YAML 1.1 reads as something other than a string, and the keys sagemem reads.
    st.sampled_from(["yes", "no", "on", "off", "true", "null", "~", "1", "-2", "3.5", "0x1F", "2026-01-02"]),
    st.sampled_from(KNOWN_KEYS + ("metadata", "originSessionId", "content", "handler")),
)
_COLON = st.sampled_from([":", ":", " :"])
# Comment and blank lines between keys. Blank lines hold spaces only. PyYAML refuses a tab on
# a blank line almost everywhere (libyaml takes " \t" only right after a value), and right
# after the opening fence python-frontmatter never shows such a line to YAML: its fence
# pattern `^-{3,}\s*$` swallows the whitespace-only lines that follow, so it reads
# "---\n\t\nname: x\n---\n" and sagemem, which hands YAML the block as it is, refuses it.
_filler = st.one_of(
    _COMMENT.map(lambda c: c + "\n"),
    _COMMENT.map(lambda c: "  " + c + "\n"),
    st.sampled_from(["\n", "  \n"]),
)


@st.composite
def hand_written(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """YAML written the way people write it, and the keys it holds (as YAML reads them)."""
    lines: list[str] = []
    keys: list[Any] = []
    # An anchor (never an alias: sagemem refuses those by design) on the first value; a
    # second anchor of the same name would be invalid YAML.
    anchor = draw(st.sampled_from(["", "", " &first"]))
    for n in range(draw(st.integers(0, 6))):
        lines += draw(st.lists(_filler, max_size=2))
        key, colon = draw(_KEY), draw(_COLON)
        keys.append(next(iter(yaml.safe_load(f"{key}{colon} 0\n"))))
        lines.append(key + colon + (anchor if n == 0 else "") + draw(_value(0, 0)))
    lines += draw(st.lists(_filler, max_size=2))
    return "".join(lines), keys


# No NEL, U+2028 or U+2029: with allow_unicode PyYAML writes them raw, which makes them line
# breaks in the YAML (outside LF files), and it reads them back folded.
_PY_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85\u2028\u2029"), max_size=30
)
_ZONES = st.sampled_from([None, dt.timezone.utc, dt.timezone(-dt.timedelta(hours=5, minutes=30))])
_PY_SCALAR = st.one_of(
    _PY_TEXT,
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.dates(dt.date(1000, 1, 1)),
    st.datetimes(dt.datetime(1000, 1, 1), timezones=_ZONES),
)
_PY_VALUE = st.recursive(
    _PY_SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PY_TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def dumped(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """YAML written by `yaml.safe_dump` in its different styles, and the keys it holds."""
    data = draw(st.dictionaries(st.one_of(_PY_TEXT, st.sampled_from(KNOWN_KEYS)), _PY_VALUE, max_size=6))
    text = yaml.safe_dump(
        data,
        default_flow_style=draw(st.sampled_from([False, None, True])),
        default_style=draw(st.sampled_from([None, '"', "'", "|", ">"])),
        allow_unicode=draw(st.booleans()),
        sort_keys=draw(st.booleans()),
        width=draw(st.sampled_from([20, 80, 1_000_000])),
        indent=draw(st.sampled_from([2, 4])),
    )
    return text, list(data)


# -- the body --------------------------------------------------------------------------------

# Characters `str.strip()` removes; python-frontmatter strips the body with it.
_STRIPPED = " \t\n\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u3000"
_BODY_LINE = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=30),
    st.text(_CJK, min_size=1, max_size=10),
    # A second fence (and things like it) in the body stays in the body for both.
    st.sampled_from(["---", "--- ", "----", "...", "---\t", "***", "+++", "# Title", "key: value", ""]),
    st.text(st.sampled_from(" \t"), min_size=1, max_size=3),
)
_BODY = st.tuples(
    st.text(st.sampled_from(_STRIPPED), max_size=4),
    st.lists(_BODY_LINE, max_size=6).map("\n".join),
    st.text(st.sampled_from(_STRIPPED), max_size=4),
).map("".join)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """A whole file in the shared domain, and the top-level keys its frontmatter holds."""
    matter, keys = draw(st.one_of(hand_written(), dumped()))
    # Spaces or a tab after a fence: both read the line as a fence. (Other whitespace there,
    # such as a form feed or U+3000, makes it a fence for python-frontmatter only; sagemem's
    # fence is `---` followed by spaces or tabs.)
    opening, closing = (draw(st.sampled_from(["---", "---", "--- ", "---\t", "---   "])) for _ in "oc")
    body = draw(_BODY)
    # The closing line may be the file's last line, with no line break after it.
    end = "" if not body and draw(st.booleans()) else "\n"
    text = f"{opening}\n{matter}{closing}{end}{body}"
    assert "\r" not in text and not text.startswith("\ufeff")  # LF only, no byte order mark
    return text, keys


# -- comparing -------------------------------------------------------------------------------


def _typed(value: Any) -> Any:
    """`value` with each scalar as its type and repr and each mapping as its items in order,
    so that 1, 1.0 and True differ, a NaN equals a NaN, and key order counts."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def _body_as_python_frontmatter_gives_it(body: str) -> str:
    """python-frontmatter 1.x returns `content.strip()`: its `u()` makes CRLF LF, `parse()`
    strips the whole text, splits at the fences and strips the content again, all with
    `str.strip()` and no argument (every character for which `str.isspace()` is true). Its
    fence pattern `^-{3,}\\s*$` also swallows whitespace after the closing line, which the
    strip would remove anyway. So the body it gives is sagemem's body, LF, stripped."""
    return body.replace("\r\n", "\n").strip()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(documents())
# A '*' anywhere in the block must not change what parses: libyaml takes the tab after `x`,
# PyYAML's own scanner does not.
@example(("---\nname: x\t\nwho: '*args'\n---\nbody\n", ["name", "who"]))
@example(("---\n---\n\n---\nbody ---\n---", []))
@example(("---\n# only a comment\n\n---\n\n\n  body\n\n", []))
def test_sagemem_reads_what_python_frontmatter_reads(doc: tuple[str, list[Any]]) -> None:
    text, keys = doc
    # `parse` is what `loads` is built on. `loads` then passes the keys to `Post(content,
    # handler, **metadata)`, so it raises TypeError on a key that is not a string (`yes:` is
    # True, `1:` is 1) or is named `content` or `handler`; sagemem keeps such keys.
    metadata, content = pyfm.parse(text)
    if all(isinstance(k, str) for k in metadata) and not {"content", "handler"} & set(metadata):
        post = pyfm.loads(text)
        assert (_typed(post.metadata), post.content) == (_typed(metadata), content)
    parts = split(text, "x.md")
    ours = parse(parts.matter, "x.md")
    assert set(ours) == set(keys)  # the generator made the keys it meant to
    assert _typed(ours) == _typed(metadata)
    assert _body_as_python_frontmatter_gives_it(parts.body) == content
    memory = parse_memory("x.md", text.encode("utf-8"))
    extra = {k: v for k, v in metadata.items() if k not in KNOWN_KEYS}
    assert _typed(dict(memory.extra)) == _typed(extra)
    assert _body_as_python_frontmatter_gives_it(memory.body) == content
