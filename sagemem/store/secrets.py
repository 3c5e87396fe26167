"""Likely secrets in memory text: where each one is, a digest to compare it by, redaction.

What is found, and how a finding is shaped, is specified in docs/maintenance.md ("What the
secret check finds"); `secret_shapes.py` holds sagemem's own shapes as data. This says why
the scanner is built as it is.

Two scans, because the prompt hook has no time for the full one. `scan` is detect-secrets
(Yelp's maintained scanner, through its Python API, in process, line by line) and our own
shapes: where there is time (a write, `check`, an index built outside the prompt's
deadline). `scan_patterns` is our shapes alone, without importing detect-secrets: for the
prompt hook, which redacts every snippet it injects and must answer in time. Our shapes
cover what detect-secrets finds but for a few rare vendors, so a file the prompt hook
indexes itself loses little by waiting for the full scan.

detect-secrets' high-entropy plugins are left out because memory files hold sha256 versions
and commit ids everywhere; its public-IP plugin because an address in a note is no secret.
Only the plugins' patterns run, never `verify`: nothing calls a vendor's API, nothing
touches the disk. Its keyword plugin runs with the regexes it uses for YAML and .env-style
files, because a memory is Markdown with YAML frontmatter and its code blocks are mostly
config, where values go unquoted. Its plugins' internals are read (their regexes, parsed
for `_gate`), so pyproject.toml pins the minor version tested (docs/decisions.md).

A finding grows to the whole run of token characters around it, so redaction leaves no
half of a token that reads as a new secret beside the marker. A labelled value is dropped
when it reads as a note rather than a secret (a word, a name, a path, a placeholder):
notes say "password: ask Dana" far more often than they leak one, and a refused write has
a cost. A digest is taken with whitespace removed, so a secret moved, re-indented or given
CRLF endings is the same secret.

Cost: nothing heavy at import; a shape's pattern is compiled only when a line holds one of
its needles, and detect-secrets is imported on the first full scan (about 110 ms), its
detectors built once per process. Each detect-secrets detector reads only the lines that
hold a literal every match of its patterns holds, derived from the parsed patterns
(`_gate`), so skipping the others loses nothing. detect-secrets' keyword and JWT regexes take
time quadratic in a long line of look-alikes; they are run so that they do not
(`_keyword_finder`, `_jwt_matches`). The figures are in docs/performance.md.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from itertools import accumulate

from .digests import sha256_hex
from .records import TYPE_CHECKING, Record
from .secret_shapes import (
    CHINESE_NOT_THE_SECRET,
    CHINESE_WORDS,
    KEY,
    KEY_QUALIFIERS,
    LABEL,
    NAMES,
    NOT_SECRET_KEYS,
    NOT_THE_SECRET,
    NOT_THE_SECRET_BEFORE,
    PROSE,
    SEPARATORS,
    SHAPES,
    TABLE_LABEL,
    TOKEN,
    URL,
    WORDS,
)

if TYPE_CHECKING:
    from typing import Any

MARKER = "[REDACTED by sagemem]"


class Secret(Record):
    """A likely secret: `text[start:end]` is its value, on 1-based `line` (where it starts).

    `digest` names the value without holding it: equal values give equal digests wherever
    they are. It is a plain sha256, so a short password's digest is as guessable as the
    password; compare digests, do not publish them.
    """

    line: int
    kind: str
    digest: str
    start: int
    end: int


def scan(text: str, *, gated: bool = True) -> list[Secret]:
    """Every likely secret in `text`, in order; overlapping findings are one secret.

    A detector reads only the lines that hold a literal of its gate. `gated` False has every
    detector read every line: slower, and the reference the gates must find the same as."""
    return _scan(text, detectors(True) if gated else _ungated())


def scan_patterns(text: str) -> list[Secret]:
    """What `scan` finds with sagemem's own shapes alone: no detect-secrets, for the prompt
    hook (a subset of `scan`, found the same way)."""
    return _scan(text, detectors(False))


def prepare() -> None:
    """Compile every pattern the pattern pass may use, now: for a process that starts hooks
    already loaded (the resident process), so that none of them compiles one."""
    detectors(False)
    for lazy in list(_Lazy.made):
        lazy.compiled  # noqa: B018 - compiled on first use


def redact(text: str, secrets: Iterable[Secret] | Iterable[tuple[int, int]] | None = None) -> str:
    """`text` with each secret's value (or each `(start, end)` span) replaced by MARKER; line
    endings and every other byte stay. A value that spans lines (a private key) becomes one
    MARKER per line, so line numbers keep their meaning."""
    found = scan(text) if secrets is None else secrets
    spans = sorted((s.start, s.end) if isinstance(s, Secret) else (s[0], s[1]) for s in found)
    pieces, done = [], 0
    for start, end in spans:
        start, end = max(start, done, 0), min(end, len(text))
        if end <= start:
            continue
        pieces += [text[done:start], _LINE_CONTENT.sub(MARKER, text[start:end])]
        done = end
    return "".join(pieces) + text[done:]


def shown(text: str) -> str:
    """`text` as sagemem shows it: with what the pattern pass finds redacted. For a field shown
    beside a memory, or put where a model reads it (a name, a description, an alias, a tag, a
    MEMORY.md line, a task's checklist item): cheap enough for the prompt hook, and in practice
    what the full scan finds."""
    found = scan_patterns(text) if text else []
    return redact(text, found) if found else text


def refusal(added: list[Secret]) -> str:
    """Why a write that adds `added` (not empty) is refused, and what to do: the rule of an
    `InvalidMemory` for the file (`sagemem write`, the MCP tools, Claude's own writes)."""
    more = f" (and {len(added) - 1} more)" if len(added) > 1 else ""
    return (
        f"line {added[0].line} looks like a {added[0].kind}{more}: keep secrets out of memory, which is "
        f"committed and put into prompts; say where the secret is kept instead. {NOT_A_SECRET}"
    )


# What a writer can do when the line is no secret: the comment detect-secrets reads, too.
NOT_A_SECRET = (
    "If it is no secret (a name, a hash, an example), end its line with the comment "
    "`pragma: allowlist secret` (`<!-- pragma: allowlist secret -->` in Markdown)."
)


def new_secrets(old_text: str | None, new_text: str) -> list[Secret]:
    """The secrets in `new_text` that `old_text` does not hold (by digest): what a write adds."""
    held = {s.digest for s in scan(old_text)} if old_text else set()
    return [s for s in scan(new_text) if s.digest not in held]


def _digest(value: str) -> str:
    return sha256_hex(_BLANKS.sub("", value).encode("utf-8", "surrogatepass"))


class _Lazy:
    """A regular expression compiled on first use: this module is imported on the prompt
    path, where most texts need few of them."""

    made: list[_Lazy] = []  # every one, for `prepare`

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        _Lazy.made.append(self)

    @property
    def compiled(self) -> re.Pattern[str]:
        found = self.__dict__.get("_compiled")
        if found is None:
            found = self.__dict__["_compiled"] = re.compile(*self._args)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled, name)


# --- the whole text -----------------------------------------------------------------------

_Found = tuple[int, int, int, str]  # start, end, precedence, kind


def _scan(text: str, detectors: tuple[Detector, ...]) -> list[Secret]:
    in_runs, others, needles = _split(detectors)
    folded = _fold(text)
    long_run = bool(in_runs) and _LONG_RUN.search(text) is not None
    # Each needle looked for once: a detector's gate then searches only those that are here.
    present = {(needle, fold) for needle, fold in needles if needle in (folded if fold else text)}
    if not ("|" in text or long_run or present):
        return []  # no line any detector reads: most names and descriptions
    lines = text.split("\n")
    starts = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    # Each detector looks only at the lines its gate marks: those holding a literal that every
    # match of its patterns holds, found with str.find. Our token shapes, most of them, look
    # only at the lines that hold a long run of token characters (every match holds one), and
    # there for their needles: few lines have one.
    todo: dict[int, list[Detector]] = {}
    held: dict[tuple[str, bool], set[int]] = {}  # the lines of each needle, as detectors share them
    for detector in others:
        if detector.gate is None:
            marked: Iterable[int] = range(len(lines))
        elif present.isdisjoint(detector.gate):
            continue  # none of its needles is here: most detectors, most texts
        else:
            marked = set().union(
                *(_holding(n, held, text, folded, starts) for n in detector.gate if n in present)
            )
        for number in marked:
            line = folded[starts[number] : starts[number] + len(lines[number])] if detector.needs else ""
            if not detector.needs or any(part in line for part in detector.needs):
                todo.setdefault(number, []).append(detector)
    if long_run:
        for number in sorted({bisect.bisect_right(starts, m.start()) - 1 for m in _LONG_RUN.finditer(text)}):
            line, low = lines[number], None
            for detector in in_runs:
                for needle, fold in detector.gate or ():
                    if fold and low is None:
                        low = _fold(line)
                    if needle in (low if fold else line):  # type: ignore[operator]
                        todo.setdefault(number, []).append(detector)
                        break
    found: list[_Found] = []
    for number in sorted(todo):
        body = lines[number].rstrip()  # as detect-secrets reads a line: no CR, no trailing blanks
        previous = lines[number - 1].rstrip() if number else ""
        offset = starts[number]
        for start, end, order, kind in _scan_line(body, previous, todo[number]):
            found.append((offset + start, offset + end, order, kind))
        for detector in todo[number]:
            if detector.hanging is not None and detector.hanging.match(body):
                found += _hanging(lines, starts, number, detector)
    if "|" in text:
        found += _tables(lines, starts)
    blocks = [(_key_block(text, s, e), r, k) for s, e, r, k in found if k == _PRIVATE_KEY]
    found = [f for f in found if f[3] != _PRIVATE_KEY] + [(*b, r, k) for b, r, k in blocks if b]
    found = [(*_whole_runs(text, s, e), r, k) for s, e, r, k in found]
    return [
        Secret(bisect.bisect_right(starts, start), kind, _digest(text[start:end]), start, end)
        for start, end, kind in _merge(found)
    ]


def _hanging(lines: list[str], starts: list[int], number: int, detector: Detector) -> list[_Found]:
    """The value of a label that ends line `number`: the next line that is not blank, when it
    is indented deeper (a YAML value or block scalar) and holds one value."""
    label = lines[number].rstrip()
    for after in range(number + 1, min(number + 3, len(lines))):
        line = lines[after].rstrip()
        if not line.strip():
            continue
        value = line.strip()
        indent = len(line) - len(line.lstrip())
        if indent <= len(label) - len(label.lstrip()) or _BLANKS.search(value) or value[-1:] == ":":
            return []  # not deeper, not one value, or a key of its own (`password:` then `  file:`)
        start = starts[after] + indent
        name = _label_name(_LABEL_TAIL.sub("", label))
        if _allowlisted(line, label) or not _keep(value, LABEL, name):
            return []
        return [(start, start + len(value), detector.precedence, _label(label, detector.kind))]
    return []


def _whole_runs(text: str, start: int, end: int) -> tuple[int, int]:
    """A finding that begins or ends inside a run of token characters takes in the whole
    run: else the marker that replaces it would leave half a word, which can read as a new
    token (a key glued onto a PuTTY `Private-MAC:` line)."""
    if 0 < end < len(text) and _TOKEN_CHARS.fullmatch(text[end - 1 : end + 1]):
        end = _TOKEN_RUN.match(text, end).end()
    while 0 < start < len(text) and _TOKEN_CHARS.fullmatch(text[start - 1 : start + 1]):
        start -= 1
    return start, end


def _holding(
    needle: tuple[str, bool],
    held: dict[tuple[str, bool], set[int]],
    text: str,
    folded: str,
    starts: list[int],
) -> set[int]:
    """The numbers (0-based) of the lines holding `needle` (folded, or as it is): one find
    per marked line, remembered in `held`."""
    marked = held.get(needle)
    if marked is None:
        marked = held[needle] = set()
        word, fold = needle
        haystack = folded if fold else text
        at = haystack.find(word)
        while at >= 0:
            number = bisect.bisect_right(starts, at) - 1
            marked.add(number)
            if number + 1 == len(starts):
                break
            at = haystack.find(word, starts[number + 1])
    return marked


def _fold(text: str) -> str:
    """`text`, same length, with each character that re.IGNORECASE matches to an ASCII letter
    made that lowercase letter: İ ı ſ and the Kelvin sign too (tests check every character)."""
    if not text.isascii():
        text = text.replace("İ", "i").replace("ı", "i").replace("ſ", "s")
    return text.lower()


def _merge(found: list[_Found]) -> Iterator[tuple[int, int, str]]:
    """Overlapping spans as one: their union, named by the most specific detector (a vendor's
    token shape, then a URL's password, then a labelled value; detect-secrets' before ours)."""
    group: list[Any] = []  # start, end, precedence, kind
    for start, end, order, kind in sorted(found):
        if group and start < group[1]:
            group[1] = max(group[1], end)
            if order < group[2]:
                group[2:] = order, kind
            continue
        if group:
            yield group[0], group[1], group[3]
        group = [start, end, order, kind]
    if group:
        yield group[0], group[1], group[3]


# --- one line -----------------------------------------------------------------------------

_BLANKS = _Lazy(r"\s+")
_NON_WORD = _Lazy(r"\W")
_LINE_CONTENT = _Lazy(r"[^\r\n]+")
_TOKEN_RUN = _Lazy(r"[A-Za-z0-9_-]+")
_TOKEN_CHARS = _Lazy(r"[A-Za-z0-9_-]{2}")
# What every match of our token shapes holds; tried at the start of each run only, so the
# search is linear in the text.
_LONG_RUN = _Lazy(r"(?<![A-Za-z0-9_+/=:.?&%~-])[A-Za-z0-9_+/=:.?&%~-]{16}")
_QUOTES = "'\"`"
_PRIVATE_KEY = "private key"
_MIN_ASSIGNED = 6  # a shorter labelled value is a note ("N/A", "TBD?") far more often than a password

_Finder = Callable[[str], Iterator[tuple[int, int]]]
_Needles = tuple[tuple[str, bool], ...]


class Detector(Record):
    """One kind of secret and how lines are searched for it."""

    kind: str
    rank: int  # secret_shapes.TOKEN, URL, LABEL, KEY or PROSE: how a value is judged
    find: _Finder  # spans of candidate values in one line
    gate: _Needles | None  # one of these literals is in every line `find` finds something in
    precedence: int = 0  # of overlapping findings, the lowest names the secret: rank, then order
    check: str = ""  # a further test of the value (secret_shapes.Shape.check)
    in_runs: bool = False  # every match holds a long run of token characters (`_LONG_RUN`)
    needs: tuple[str, ...] = ()  # and one of these (a separator, lowercase), besides a needle
    hanging: Any = None  # a line ending with its label (`_Lazy`): the value is on the next line


_Split = tuple[tuple[Detector, ...], tuple[Detector, ...], _Needles]
_SPLIT: dict[int, tuple[tuple[Detector, ...], _Split]] = {}


def _split(detectors: tuple[Detector, ...]) -> _Split:
    """The detectors that read only lines with a long run of token characters, the others,
    and the others' needles; worked out once per set of detectors (the set is kept, so its
    id stays its own)."""
    known = _SPLIT.get(id(detectors))
    if known is None or known[0] is not detectors:
        in_runs = tuple(d for d in detectors if d.in_runs and d.gate is not None)
        others = tuple(d for d in detectors if d not in in_runs)
        every = (("", False),)  # a detector without a gate reads every line
        needles = tuple(sorted({n for d in others for n in (every if d.gate is None else d.gate)}))
        known = _SPLIT[id(detectors)] = (detectors, (in_runs, others, needles))
    return known[1]


def _scan_line(line: str, previous: str, detectors: list[Detector]) -> list[_Found]:
    found = []
    runs: list[tuple[int, int]] = []  # the line's runs of token characters, once a token needs them
    for detector in detectors:
        seen = set()  # matches in one run of a token grow to one span: judge it once
        for start, end in detector.find(line):
            if detector.rank == TOKEN and detector.kind != _PRIVATE_KEY:
                runs = runs or [m.span() for m in _TOKEN_RUN.finditer(line)]
                start, end = _grown(start, end, runs)
            if (start, end) in seen:
                continue
            seen.add((start, end))
            if detector.kind == _PRIVATE_KEY:
                span: tuple[int, int] | None = start, end
            else:
                span = (_token if detector.rank == TOKEN else _value)(line, start, end)
            if span is None:
                continue
            label = "" if detector.rank == TOKEN else _label_name(line[: span[0]], detector.rank)
            if _keep(line[span[0] : span[1]], detector.rank, label, detector.check):
                # Named by its label: the last before it, else the one after (`"..." == password`).
                named = _label(line[: span[0]], "") or _label(line[span[1] : span[1] + 60], detector.kind)
                kind = detector.kind if detector.rank < LABEL else named
                kind = "key" if detector.rank == KEY else kind
                found.append((*span, detector.precedence, kind))
    if found and _allowlisted(line, previous):
        return []
    return found


def _grown(start: int, end: int, runs: list[tuple[int, int]]) -> tuple[int, int]:
    """A token match grown to the whole run of token characters it is in."""
    at = bisect.bisect_right(runs, (start, sys.maxsize)) - 1
    if at >= 0 and runs[at][0] <= start < runs[at][1]:
        start = runs[at][0]
    at = bisect.bisect_right(runs, (end - 1, sys.maxsize)) - 1
    if at >= 0 and runs[at][0] < end <= runs[at][1]:
        end = runs[at][1]
    return start, end


def _token(line: str, start: int, end: int) -> tuple[int, int] | None:
    """A grown token less what its match holds around it: a `Name=` label (Azure's match
    starts `AccountKey=`), the blank or quote Artifactory's starts and ends with, and what
    follows a blank (npm's runs to the line's end)."""
    edge = _TOKEN_EDGE.match(line, start, end)
    start = edge.end() if edge else start
    cut = _BLANKS.search(line, start, end)
    end = cut.start() if cut else end
    while end > start and line[end - 1] in _QUOTES:
        end -= 1
    return (start, end) if end > start else None


def _value(line: str, start: int, end: int) -> tuple[int, int] | None:
    """A labelled value or a URL's password up to where it ends: its closing quote, blanks and
    all (`secret = "Pq8 zz Lm2"`, as detect-secrets reads a quoted value), or else the first
    blank, quote or `,;)]}` (and not a sentence's final `.` or `:`)."""
    if start and line[start - 1] in _QUOTES:
        closing = line.find(line[start - 1], start)
        end = closing if closing >= 0 else end
    else:
        cut = _UNQUOTED_END.search(line, start, end)
        end = cut.start() if cut else end
        while end > start and line[end - 1] in ".:" and not line.endswith("...", start, end):
            end -= 1
        if start and line[start - 1] in "*_":  # emphasis around the value: `**hunter2**`
            end -= len(line[start:end]) - len(line[start:end].rstrip(line[start - 1]))
        else:  # emphasis closing after it that opened earlier: `**... tokens are shared**.`
            value = line[start:end]
            run = value[len(value.rstrip("*_")) :]
            if len(run) >= 2 and run in line[:start]:
                end -= len(run)
    return (start, end) if end > start else None


_TOKEN_EDGE = _Lazy(r"[\s=:\"']+|[A-Za-z]{1,40}=(?=.)")
_UNQUOTED_END = _Lazy(r"[\s'\"`,;)\]}]")
# A value's name, by the last label word before it: the tables' kinds, one pattern each.
_LABELS = tuple(
    (kind, _Lazy("(?i)" + pattern))
    for kind, pattern in (
        *NAMES,
        *(
            (kind, "|".join(w.pattern for w in (*WORDS, *CHINESE_WORDS) if w.kind == kind))
            for kind in dict.fromkeys(w.kind for w in WORDS)
            if kind != "secret"
        ),
    )
)


def _label(before: str, default: str = "secret") -> str:
    """What a labelled value is, by the last label word before it."""
    best, at = default, -1
    for kind, pattern in _LABELS:
        for match in pattern.finditer(before, max(0, len(before) - 60)):
            if match.start() > at:
                best, at = kind, match.start()
    return best


def _label_name(before: str, rank: int = LABEL) -> str:
    """The name a value is given: the last identifier (or CJK word) before its separator, and
    the word before it when a blank parts them (`cache key`, `continuation token`). In a
    sentence, the name that holds the label word (`password` in `the password for the admin
    console is ...`)."""
    before = before[-120:]
    if rank == PROSE:
        words = list(_PROSE_WORD.finditer(before))
        before = before[: words[-1].end()] if words else before
    match = _LABEL_NAME.search(_LABEL_TAIL.sub("", before))
    return match.group(0) if match else ""


_LABEL_TAIL = _Lazy(
    r"[\s*_'\"`\])）]*(?:" + "|".join(re.escape(s) for s in SEPARATORS) + r"|[|>])*[\s*_'\"`\[]*$"
)
_LABEL_NAME = _Lazy(r"(?:[\w.-]+[ \t])?[\w.-]+$")
_PROSE_WORD = _Lazy(r"(?i)[\w.-]*(?:" + "|".join(w.pattern for w in WORDS if w.prose) + r")[\w.-]*")
_EACH_WORD = tuple(_Lazy("(?i)" + w.pattern) for w in (*WORDS, *CHINESE_WORDS))
_LAST_WORD = _Lazy("(?is).*(" + "|".join(w.pattern for w in (*WORDS, *CHINESE_WORDS)) + ")")
_LABEL_WORD = _Lazy(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+|[^\W\d_a-zA-Z]+")


def _names_something_else(label: str) -> bool:
    """Whether a label that holds a secret's word names something other than the secret: an
    id (`client_id`, `tokenId`); a longer word (`tokenizer`, `passwordless`); a fact about the
    secret or what is around it, after its word (`token_type`, `secretName`,
    `credentials_provider`, `db_password_rotation`); another kind of token, before it
    (`page_token`, `max_tokens`); the same in Chinese (`密钥长度`, `密钥版本`). A label found
    by its context alone (`mysql -p`, `Bearer`) holds no such word and is not judged here."""
    if _ID_LABEL.search(label):
        return True
    last = _LAST_WORD.match(label)  # the word that starts last: `PASSWORD` in `DB_PASSWORD`
    if last is None:
        return False
    start = last.start(1)  # and of the words that start there, the longest: `secretkey`, not `secret`
    end = max(m.end() for w in _EACH_WORD if (m := w.match(label, start)))
    rest = label[end:]
    if not label.isascii():
        return rest.startswith(CHINESE_NOT_THE_SECRET)
    shouted = label[start:end].isupper()
    if rest[:1] in ("s", "S") and not (rest[1:2].islower() or (shouted and rest[1:2].isupper())):
        rest = rest[1:]  # a plural: `tokens`, `SECRETS`
    if rest[:1].islower() or (shouted and rest[:1].isupper()):
        return True  # the word goes on: `tokenizer`, `PASSWORDLESS`
    after = {w.lower() for w in _LABEL_WORD.findall(rest)}
    before = {w.lower() for w in _LABEL_WORD.findall(label[:start])}
    return bool(after & NOT_THE_SECRET or before & NOT_THE_SECRET_BEFORE)


# --- which values are secrets -------------------------------------------------------------


def _keep(value: str, rank: int, label: str, check: str = "") -> bool:
    """Whether a candidate found by a detector of `rank`, after `label`, is a likely secret."""
    if _PLACEHOLDER.search(value) or (value[:1] == "<" and value[-1:] == ">"):
        return False
    if rank == TOKEN:
        return True
    if check == "basic":
        return _basic_credentials(value)
    if rank == URL and "%" in value:
        from urllib.parse import unquote

        value = unquote(value)  # `a%20secret` is words
    if not _ASCII_LETTER.search(value) or value.startswith("$") or _sequential(value):
        return False
    if _NOT_A_VALUE.match(value) or _REFERENCE.search(value):
        return False
    if rank == URL:
        return True
    if " " in value and all(p.isalpha() or _NOT_A_VALUE.match(p) or _code_name(p) for p in value.split()):
        return False  # a quoted phrase of words and names: `OpenAI API key`, `italic #A3AAB2`
    if _names_something_else(label) or len(value) < _MIN_ASSIGNED:
        return False
    if _code_name(value) or _SLUG.fullmatch(value) and _slug(value):
        return False  # `AccessToken`, `self._secret`, `tls-cert-2024`: names, not values
    if _UUID.search(value):  # a UUID is an id, unless its label names a secret (Heroku, Postmark)
        return rank == LABEL and not _EXAMPLE_UUID.search(value)
    if rank == KEY:
        return _looks_random(value, label)
    if rank == PROSE:
        return _looks_like_password(value)
    return True


def _code_name(value: str) -> bool:
    """A name in code, not a value: a dotted path (`self._secret`, `cfg.openaiApiKey`,
    `process.env.CLIENT_SECRET!`), or an identifier made of words (`AccessToken`,
    `_AzureApiKeyT`, `keep_old_secret_active_for_24_hours`). Words are three letters or more,
    of one case (an acronym of up to four capitals), not glued to others through digits
    (`Tr0ub4dor`), with a vowel when longer than four; most of the letters are in words, one
    of five or more or three of them, or all of them in two: random characters rarely are. One
    word with digits (`hunter2`, `Summer2024`), or two and a digit (`MyPassword1`), is what
    people pick as a password, and stays a value."""
    if not _IDENTIFIER.fullmatch(value):
        return False
    name = value.rstrip("!?()")
    if "." in name:  # each part a name, digits only at its end: not `Tr0ub4dor.md`
        return all(_PATH_PART.fullmatch(part) for part in name.split("."))
    pieces = [piece for part in _NAME_BREAK.split(name) if part for piece in _pieces(part)]
    letters = [p for p, _ in pieces if not p.isdigit()]
    if len(letters) < 2 or (len(letters) == 2 and _DIGIT.search(name)):
        return False
    words = [p for p, whole in pieces if whole and _is_word(p)]
    if len(letters) == len(words) == 2:
        return True  # two words, no digit: a type's name (`SecretStr`, `APIKeys`)
    long = [w for w in words if _VOWEL.search(w)]
    enough = max(map(len, long), default=0) >= 5 or len(long) >= 3
    return enough and sum(map(len, words)) * 5 >= sum(map(len, letters)) * 4


def _is_word(piece: str) -> bool:
    if len(piece) < 3 or piece.isdigit() or (piece.isupper() and len(piece) > 4):
        return False
    return len(piece) <= 4 or bool(_VOWEL.search(piece))


def _pieces(part: str) -> list[tuple[str, bool]]:
    """A name's pieces (`AzureADToken` → Azure, AD, Token; digits apart), each with whether it is
    whole: not glued through digits to lower-case letters (`hunter2x`, `k8s`)."""
    pieces = _NAME_PIECE.findall(part)
    glued = set()
    for i, piece in enumerate(pieces):
        if piece.isdigit() and i + 1 < len(pieces) and pieces[i + 1][0].islower():
            glued |= {i - 1, i + 1}
    return [(piece, i not in glued) for i, piece in enumerate(pieces)]


def _slug(value: str) -> bool:
    """A lower-case name of parts (`tls-cert-2024`, `prod-db-creds-v2`, `tiktoken-0.7`,
    `k8s/prod-db`, `uploads/2024/03/report`): each part a word, a number, a version or a short
    code, and at least one a word of three letters or more."""
    parts = _SLUG_PART.split(value)
    return any(len(p) >= 3 and p.isalpha() for p in parts) and all(
        p.isalpha() or p.isdigit() or len(p) <= 6 for p in parts
    )


def _sequential(value: str) -> bool:
    """A run of the alphabet, of digits or hex digits (`abcdef123456`, `0123456789`)."""
    upper = value.upper()
    return any(upper in sequence for sequence in _SEQUENCES)


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_SEQUENCES = (
    _ALPHABET * 2 + "0123456789+/",
    "0123456789" * 2 + _ALPHABET * 2,
    "0123456789ABCDEF" * 2,
    (_ALPHABET + "0123456789") * 2,
)


def _looks_random(value: str, label: str) -> bool:
    """A value after a label that may name a key is one when it looks like key material: not
    after a public key's, an id's or a hash's label; base64 holding upper case, lower case and
    digits (or `+`, `/`) that is not made of words (an identifier such as `UserCacheKeyV2`
    has most of its letters in runs of three or more of one case, random characters rarely);
    or long hex after a label that says what the key is for."""
    if _NOT_SECRET_KEY.search(label) or value.startswith("AAAA"):
        return False  # `public_key`, `sort_key`, `cache_key`; an SSH public key's blob
    body = value.rstrip("=")
    if _HEX.fullmatch(body):
        return len(body) >= 32 and bool(_QUALIFIED_KEY.search(label))
    if len(body) < 20:
        return False
    kinds = sum(bool(p.search(body)) for p in (_UPPER, _LOWER, _DIGIT, _B64_SIGN))
    in_words = sum(len(run) for run in _WORDLIKE.findall(body))
    return kinds >= 3 and in_words * 5 < len(body) * 3


def _looks_like_password(value: str) -> bool:
    """A value in a sentence is a password when it is not made of words: it holds a letter and
    a digit or a symbol, and is not a lower-case name of parts (`sha256-hashed`) nor a term of
    words and short codes with digits (`RS256-signed`, `base32`, `sccache+S3`, `2048bit`)."""
    if not _DIGIT_OR_SYMBOL.search(value) or _PARTS_NAME.fullmatch(value):
        return False
    return not all(_TERM_PART.fullmatch(part) for part in _TERM_SEPARATOR.split(value))


def _basic_credentials(value: str) -> bool:
    """An HTTP Basic credential: base64 of `user:password`, both non-empty and printable."""
    import base64
    import binascii

    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


def _allowlisted(line: str, previous: str) -> bool:
    """A `pragma: allowlist secret` comment on the line, or `pragma: allowlist nextline
    secret` on the one above (detect-secrets' comments)."""
    return bool(_ALLOW_LINE.search(line) or _ALLOW_NEXT.search(previous))


_ALLOW_LINE = _Lazy(r"pragma:\s*allowlist[ -]secret")
_ALLOW_NEXT = _Lazy(r"pragma:\s*allowlist[ -]nextline[ -]secret")
_ASCII_LETTER = _Lazy(r"[A-Za-z]")
_DIGIT_OR_SYMBOL = _Lazy(r"[0-9!-/:-@\[-`{-~]")
_PARTS_NAME = _Lazy(r"[a-z]+[0-9]*(?:[-_.][a-z0-9]+)+")
# A term's part: a word, a number, or a short code of letters and digits (`RS256`, `S3`, `2048bit`).
_TERM_PART = _Lazy(r"[A-Za-z]+|\d+|[A-Za-z]{1,4}\d+|\d+[A-Za-z]{1,4}")
_TERM_SEPARATOR = _Lazy(r"[-+/._]")
_IDENTIFIER = _Lazy(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(\))?[!?]?")
_NAME_PIECE = _Lazy(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_NAME_BREAK = _Lazy(r"[_$]+")
_PATH_PART = _Lazy(r"[_$]*[A-Za-z][A-Za-z_]*[0-9]*")
_VOWEL = _Lazy(r"[aeiouyAEIOUY]")
_SLUG = _Lazy(r"[a-z0-9]+(?:[-_./][a-z0-9]+)+")
_SLUG_PART = _Lazy(r"[-_./]")
_UUID = _Lazy(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_EXAMPLE_UUID = _Lazy(r"123e4567-e89b-12d3-a456-426614174000|^(.)(?:\1|-)+$", re.I)
_ID_LABEL = _Lazy(r"(?:^|[_.\- ])(?i:ids?)$|[a-z0-9](?:Id|ID)s?$")
_HEX = _Lazy(r"[0-9a-fA-F]+")
_UPPER, _LOWER, _DIGIT, _B64_SIGN = _Lazy("[A-Z]"), _Lazy("[a-z]"), _Lazy("[0-9]"), _Lazy("[+/]")
_WORDLIKE = _Lazy(r"[a-z]{3,}|[A-Z]{3,}")
_NOT_SECRET_KEY = _Lazy("(?i)" + "|".join(NOT_SECRET_KEYS) + r"|(?:^|[_.-])id(?:$|[_.-])")
_QUALIFIED_KEY = _Lazy("(?i)" + "|".join(KEY_QUALIFIERS))
# Values that stand for a secret without being one: ${VAR}, <your-key>, {{ secret }}, xxxx.
_PLACEHOLDER = _Lazy(r"\{|<[^>]*>|x{4,}|\*{3,}|\.\.\.|…|your|example|changeme|placeholder|redacted", re.I)
# Not a value: a plain word, words or identifier, an environment variable's name, a path, a
# URL (its password is found on its own), an email address, a date or time, a version, an
# ARN or URN, code (`x[0]`, `f(x)`), an option's `name=` (`--secret id=npmrc`), a place in a
# store (`Vault:kv/admin`), a colour (`#d8dee9`), a YAML anchor, alias or tag (`&creds`).
_WORD = r"(?:[a-z]+|[A-Z][a-z]*|[A-Z]+)"
_NOT_A_VALUE = _Lazy(
    rf"{_WORD}(?:[-_./ ]{_WORD})*$|_?[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|(?:~|\.{{1,2}})?/"
    r"|[A-Za-z][A-Za-z0-9+.-]*://|.*[(\[]|[^@\s]+@[\w-]+(?:\.[\w-]+)+$"
    r"|\d{4}-\d\d-\d\d|\d\d?:\d\d|v?\d+(?:\.\d+)+\b|arn:|urn:|sha\d+[:-]|[a-z]{2,}="
    r"|[A-Za-z]+:[a-z0-9]+(?:[-_./][a-z0-9]+)*$|#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$|[&*!][\w.-]+$"
)
# A pointer to where a secret is kept: `vault:secret/db#password`, `prod/db/password`.
_REFERENCE = _Lazy(r"(?i)(?:^|[/#:.])(?:password|passwd|secret|token|key)s?(?:$|[/#:.])")


# --- Markdown tables ------------------------------------------------------------------------


def _tables(lines: list[str], starts: list[int]) -> list[_Found]:
    """Password cells of Markdown tables: the cell after one that names a secret on the same
    row (`| password | hunter2Xy! |`), and the cells of a column whose header names one."""
    found: list[tuple[int, int, str]] = []
    columns: dict[int, str] = {}  # the current table's secret columns: index → header
    for number, raw in enumerate(lines):
        line = raw.rstrip()
        if "|" not in line:
            columns = {}
            continue
        if _DELIMITER_ROW.fullmatch(line.strip()):
            continue
        cells = _cells(line)
        if number + 1 < len(lines) and _DELIMITER_ROW.fullmatch(lines[number + 1].strip()):
            columns = {i: text for i, (_, _, text) in enumerate(cells) if _TABLE_LABEL.match(text)}
        else:
            for i, header in columns.items():
                if i < len(cells):
                    found += _cell(line, cells[i], header, starts[number])
        for (_, _, text), after in zip(cells, cells[1:], strict=False):
            if _TABLE_LABEL.match(text):
                found += _cell(line, after, text, starts[number])
    return [(start, end, _TABLE_PRECEDENCE, kind) for start, end, kind in found]


_TABLE_PRECEDENCE = LABEL * 1000 + 999  # after every labelled value found in a line


def _cell(line: str, cell: tuple[int, int, str], header: str, offset: int) -> list[tuple[int, int, str]]:
    """The value in `cell`, if it is a likely secret under `header`."""
    start, end, text = cell
    start += len(text) - len(text.lstrip(_CELL_EDGE))
    end -= len(text) - len(text.rstrip(_CELL_EDGE))
    value = line[start:end]
    if not _ONE_WORD.fullmatch(value) or not _keep(value, LABEL, header.strip(_CELL_EDGE)):
        return []  # a cell of words describes a secret (`校验回调签名的密钥`, `ask Dana`)
    return [(offset + start, offset + end, _label(header))]


_CELL_EDGE = " \t*_`'\""
_ONE_WORD = _Lazy(r"[!-~]+")


def _cells(line: str) -> list[tuple[int, int, str]]:
    """A table row's cells: (start, end, text) each, in order, `\\|` kept inside its cell; the
    outer pipes are optional, as in GitHub's tables."""
    bounds = [-1, *(m.start() for m in _CELL_BAR.finditer(line)), len(line)]
    cells = [(a + 1, b, line[a + 1 : b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    if cells and not cells[0][2].strip():
        cells = cells[1:]
    if cells and not cells[-1][2].strip():
        cells = cells[:-1]
    return cells


_CELL_BAR = _Lazy(r"(?<!\\)\|")
_DELIMITER_ROW = _Lazy(r"\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?")
_TABLE_LABEL = _Lazy(TABLE_LABEL)


# --- the detectors --------------------------------------------------------------------------


@cache
def detectors(full: bool = True) -> tuple[Detector, ...]:
    """Ours (sagemem's own shapes), after detect-secrets' plugins when `full`; built once per
    process (`detectors.cache_clear()` builds them anew)."""
    theirs = list(_theirs()) if full else []
    made = [d._replace(precedence=d.rank * 1000 + i) for i, d in enumerate(theirs)]
    for i, shape in enumerate(SHAPES, len(theirs)):
        needles = tuple((needle, shape.fold) for needle in shape.needles)
        in_runs = shape.rank == TOKEN and shape.kind != _PRIVATE_KEY
        finder = _shape_finder(shape.pattern)
        order = shape.rank * 1000 + i
        hanging = _Lazy(shape.hanging) if shape.hanging else None
        found = Detector(
            shape.kind, shape.rank, finder, needles, order, shape.check, in_runs, shape.needs, hanging
        )
        made.append(found)
    return tuple(made)


@cache
def _ungated() -> tuple[Detector, ...]:
    """Every detector with no gate: each reads every line (`scan(gated=False)`)."""
    return tuple(d._replace(gate=None, needs=()) for d in detectors(True))


def _shape_finder(pattern: str) -> _Finder:
    """Spans of a shape's value (its `value` group, else group 1, else the match), its pattern
    compiled on first use."""
    lazy = _Lazy(pattern)

    def find(line: str) -> Iterator[tuple[int, int]]:
        compiled = lazy.compiled
        group = "value" if "value" in compiled.groupindex else 1 if compiled.groups else 0
        for match in _chained(compiled, line):
            start, end = match.span(group)
            if end > start:
                yield start, end

    return find


def _theirs() -> Iterator[Detector]:
    """detect-secrets' plugins as detectors, in the order of their names. Importing it turns
    Python's warnings into log records (`logging.captureWarnings(True)`), which would silence
    sagemem's own warnings for the rest of the run: that is undone at once."""
    import warnings

    shown = warnings.showwarning
    import detect_secrets  # noqa: F401 - its import is what captures the warnings

    if warnings.showwarning is not shown:
        import logging

        logging.captureWarnings(False)
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import REGEX_BY_FILETYPE, KeywordDetector
    from detect_secrets.util.filetype import FileType

    classes: list[Any] = sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__)
    for cls in classes:
        if cls.__name__ in _LEFT_OUT:
            continue
        plugin = cls()
        kind = _KINDS.get(plugin.secret_type, plugin.secret_type)
        if isinstance(plugin, KeywordDetector):
            regexes = REGEX_BY_FILETYPE[FileType.YAML]
            finder = _keyword_finder(regexes, keyword.DENYLIST, keyword.DENYLIST_REGEX)
            # Each of its YAML regexes needs `:`, `=` or `;` after the keyword: a line of prose
            # that names a password without one is not read (the tests compare with every line).
            yield Detector(kind, LABEL, finder, _gate(regexes), needs=(":", "=", ";"))
        elif isinstance(plugin, RegexBasedDetector):
            rank = URL if kind == "password in a URL" else TOKEN
            checks = type(plugin).analyze_string is not RegexBasedDetector.analyze_string
            finder = _regex_finder(plugin.denylist, plugin if checks else None)
            yield Detector(kind, rank, finder, _gate(plugin.denylist))
        else:  # a plugin of another shape (none in 1.5): its values, where they first occur
            yield Detector(kind, TOKEN, _value_finder(plugin), None)


_LEFT_OUT = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"})
_KINDS = {  # detect-secrets' secret_type → our label (a labelled value is named by its label)
    "AWS Access Key": "AWS key",
    "Artifactory Credentials": "Artifactory credential",
    "Azure Storage Account access key": "Azure storage account key",
    "Basic Auth Credentials": "password in a URL",
    "Cloudant Credentials": "Cloudant credential",
    "Discord Bot Token": "Discord bot token",
    "GitHub Token": "GitHub token",
    "GitLab Token": "GitLab token",
    "IBM Cloud IAM Key": "IBM Cloud IAM key",
    "IBM COS HMAC Credentials": "IBM COS HMAC credential",
    "JSON Web Token": "JSON web token",
    "Mailchimp Access Key": "Mailchimp key",
    "NPM tokens": "npm token",
    "OpenAI Token": "OpenAI API key",
    "Private Key": _PRIVATE_KEY,
    "PyPI Token": "PyPI token",
    "SendGrid API Key": "SendGrid API key",
    "Secret Keyword": "secret",
    "Slack Token": "Slack token",
    "SoftLayer Credentials": "SoftLayer credential",
    "Square OAuth Secret": "Square OAuth secret",
    "Stripe Access Key": "Stripe key",
    "Telegram Bot Token": "Telegram bot token",
    "Twilio API Key": "Twilio API key",
}


def _regex_finder(patterns: Iterable[re.Pattern[str]], plugin: Any = None) -> _Finder:
    """Spans of what `findall` gives, as RegexBasedDetector.analyze_string reads its denylist;
    `plugin` when it re-checks a value itself (JwtTokenDetector decodes the token)."""
    patterns = tuple(patterns)

    def find(line: str) -> Iterator[tuple[int, int]]:
        for pattern in patterns:
            jwt = pattern.pattern.startswith(_JWT_HEAD)
            for match in _jwt_matches(pattern, line) if jwt else _chained(pattern, line):
                for group in range(1, pattern.groups + 1) if pattern.groups else (0,):
                    start, end = match.span(group)
                    value = match.group(group)
                    if end > start and (plugin is None or value in plugin.analyze_string(value)):
                        yield start, end

    return find


def _chained(pattern: re.Pattern[str], line: str) -> Iterator[re.Match[str]]:
    """`pattern.finditer(line)`, except that a match may begin on the last character of the one
    before: Artifactory's pattern ends by taking the blank its next match must begin with, so
    of two tokens a blank apart finditer finds only the first. A match found again inside
    the same token grows to the same span and is judged once."""
    at = 0
    while at <= len(line):
        match = pattern.search(line, at)
        if match is None:
            return
        yield match
        at = max(match.end() - 1, match.start() + 1)


_JWT_HEAD = r"eyJ[A-Za-z0-9-_=]+\."  # how JwtTokenDetector's pattern begins
_JWT_RUN = _Lazy(r"[A-Za-z0-9_=-]+")


def _jwt_matches(pattern: re.Pattern[str], line: str) -> list[re.Match[str]]:
    r"""`pattern.finditer(line)` for a pattern that begins `eyJ[A-Za-z0-9-_=]+\.`, trying only
    the first `eyJ` in each run of those characters: a later one has the same continuation
    (the run, then the `.` after it), so it fails when the first does, and lies inside the
    match when the first succeeds. finditer tries them all, quadratic in a long run."""
    found: list[re.Match[str]] = []
    done = 0
    for run in _JWT_RUN.finditer(line):
        start = line.find("eyJ", max(done, run.start()), run.end())
        match = pattern.match(line, start) if start >= 0 else None
        if match:
            found.append(match)
            done = match.end()
    return found


def _keyword_finder(regexes: dict[re.Pattern[str], int], keywords: Iterable[str], prefix: str) -> _Finder:
    r"""KeywordDetector.analyze_string with the YAML/config regexes: each regex's first match,
    in each window of a long line.

    Its regexes take time quadratic in a line with many keywords that fail to match (a 512
    KiB line would take minutes), so a line over _WINDOW characters is read in windows of
    _WINDOW overlapping by _OVERLAP, as its own filter for indirect references stops at 1000
    characters; a value running more than _OVERLAP characters past a window's end is cut.
    Three of the four regexes begin with a keyword and `\w*` (`prefix`), so they can match
    only where a keyword starts, and a later keyword start in the same run of word
    characters, whose keyword ends no earlier than a tried one's, can match only where the
    tried one can (through that `\w*`): it is skipped, which makes `secretsecret...` linear."""
    shapes = {regex.flags: [re.compile(k, regex.flags) for k in keywords] for regex in regexes}
    words = all(re.fullmatch(r"[\w?]+", k) for k in keywords)  # a keyword is a run's part
    skips = {regex for regex in regexes if words and regex.pattern.startswith(prefix)}

    def find(line: str) -> Iterator[tuple[int, int]]:
        for pos in range(0, max(1, len(line) - _OVERLAP), _WINDOW - _OVERLAP):
            end = min(len(line), pos + _WINDOW)
            starts: dict[int, list[int]] = {}
            for regex, group in regexes.items():
                if regex in skips:
                    if regex.flags not in starts:
                        starts[regex.flags] = _keyword_starts(line, pos, end, shapes[regex.flags])
                    tries = (regex.match(line, at, end) for at in starts[regex.flags])
                    match = next((m for m in tries if m), None)
                else:
                    match = regex.search(line, pos, end)
                if match:
                    yield match.span(group)

    return find


_WINDOW, _OVERLAP = 1000, 200


def _keyword_starts(line: str, pos: int, end: int, keywords: list[re.Pattern[str]]) -> list[int]:
    """Where a keyword starts in `line[pos:end]`, but for starts a tried one covers."""
    ends: dict[int, int] = {}  # start → where the shortest keyword starting there ends
    for keyword in keywords:
        at = pos
        while (match := keyword.search(line, at, end)) is not None:
            ends[match.start()] = min(ends.get(match.start(), match.end()), match.end())
            at = match.start() + 1
    if not ends:
        return []
    breaks = [m.start() for m in _NON_WORD.finditer(line, pos, end)]
    starts, run, covered = [], -1, 0
    for start in sorted(ends):
        here = bisect.bisect_right(breaks, start)
        if here == run and covered <= ends[start]:
            continue
        starts.append(start)
        run, covered = here, ends[start]
    return starts


def _value_finder(plugin: Any) -> _Finder:
    def find(line: str) -> Iterator[tuple[int, int]]:
        for value in plugin.analyze_string(line):
            at = line.find(value) if value else -1
            if at >= 0:
                yield at, at + len(value)

    return find


# --- gates: which lines a detector need look at -------------------------------------------


def _gate(patterns: Iterable[re.Pattern[str]]) -> _Needles | None:
    """Literals, one of which is in any line where one of `patterns` matches; None if some
    pattern has none. Derived from the parsed patterns, not written by hand, so a scan that
    reads only the lines they mark finds what one that reads every line finds, whatever
    detect-secrets' patterns are. A needle marked `fold` is ASCII lowercase and is looked for
    in `_fold(text)`, as a case-insensitive pattern would match it."""
    if sys.version_info >= (3, 11):  # private modules: typeshed describes neither
        from re import _constants as sre  # type: ignore[attr-defined]
        from re import _parser  # type: ignore[attr-defined]
    else:  # the same modules under their old names
        import sre_constants as sre
        import sre_parse as _parser

    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}

    def literals(nodes: Any, fold: bool) -> set[tuple[str, bool]] | None:
        """Literals (and whether case folds), one of which every match of `nodes` holds."""
        best: set[tuple[str, bool]] | None = None
        run: list[str] = []

        def consider(found: set[tuple[str, bool]] | None) -> None:
            nonlocal best
            if found and (best is None or _strength(found) > _strength(best)):
                best = found

        for op, av in [*nodes, (None, None)]:
            if op is sre.LITERAL:
                run.append(chr(av))
                continue
            literal = "".join(run)
            consider({(literal, fold)} if literal and "\n" not in literal else None)
            run = []
            if op is sre.SUBPATTERN:
                _, add, remove, sub = av
                consider(literals(sub, bool((fold or add & re.I) and not remove & re.I)))
            elif op is sre.BRANCH:
                branches = [literals(branch, fold) for branch in av[1]]
                consider(set().union(*branches) if all(branches) else None)  # type: ignore[arg-type]
            elif op in repeats and av[0] >= 1:
                consider(literals(av[2], fold))
        return best

    needles: set[tuple[str, bool]] = set()
    for pattern in patterns:
        found = literals(_parser.parse(pattern.pattern, pattern.flags), bool(pattern.flags & re.I))
        if found is None:
            return None
        for literal, fold in found:
            if fold and literal.lower() != literal.upper():  # a cased letter: match it folded
                literal = max(re.findall(r"[\x00-\x7f]+", literal), key=len, default="").lower()
                if not literal:
                    return None
            else:
                fold = False  # nothing in it has case: it matches only itself
            needles.add((literal, fold))
    return tuple(sorted(needles))


def _strength(literals: set[tuple[str, bool]]) -> tuple[int, int]:
    """Longer literals, then fewer, mark fewer lines."""
    return min(len(s) for s, _ in literals), -len(literals)


# --- private key blocks -------------------------------------------------------------------

_KEY_WINDOW = 64 * 1024  # an armoured PGP private key with subkeys is under 10 KiB
_KEY_EDGE = _Lazy(
    r"(?P<end>-{4,5} ?END [A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-{4,5}|Private-MAC: *[0-9A-Fa-f]+)"
    r"|BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY|PuTTY-User-Key-File"
)
_KEY_DASHES = _Lazy(r"-{4,5} ?$")
_KEY_BODY = _Lazy(r"[ \t]*[A-Za-z0-9+/=\\:-]{16,}[ \t\r]*(?:\n|$)")
_KEY_MATERIAL = _Lazy(r"[A-Za-z0-9+/=]{16,}")
_KEY_HEADER_LINE = _Lazy(r"BEGIN[ A-Z0-9]{0,40}PRIVATE KEY|PuTTY-User-Key-File-\d")
_KEY_HEADER = _Lazy(r"[ \t]*[A-Za-z][A-Za-z0-9-]*:[ \t][^\n]*\n")


def private_keys(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The private key block that begins above `text[start:end]`, within `_KEY_WINDOW`, and
    reaches into it: what a snippet of those lines must redact, though its header is not among
    them (a block that begins among them, the pattern pass over them finds). Only the last
    header above counts, so a text full of headers costs one block."""
    low = max(0, start - _KEY_WINDOW)
    at = start
    while True:
        at = max(text.rfind("PRIVATE KEY", low, at), text.rfind("PuTTY-User-Key-File-", low, at))
        if at < 0:
            return []
        line = text.rfind("\n", low, at) + 1
        header = _KEY_HEADER_LINE.search(text, line, at + len("PuTTY-User-Key-File-") + 1)
        if header is not None:
            break
    block = _key_block(text, header.start(), header.end())
    return [block] if block is not None and block[1] > start and block[0] < end else []


def _key_block(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The key block around the header detect-secrets found at `start:end`, dashes included:
    to its END line, or else over the key lines that follow; None if none follow (prose that
    names the header)."""
    dashes = _KEY_DASHES.search(text, max(0, start - 6), start)
    start = dashes.start() if dashes else start
    edge = _KEY_EDGE.search(text, end, end + _KEY_WINDOW)
    if edge and edge.group("end"):  # a block with key material in it, not placeholders (`XXXX`)
        body = _KEY_MATERIAL.search(text, end, edge.start())
        return (start, edge.end()) if body and not _PLACEHOLDER.search(body.group(0)) else None
    at = text.find("\n", end) + 1
    while at and (header := _KEY_HEADER.match(text, at)):  # `Proc-Type: 4,ENCRYPTED`, `Comment:`
        at = header.end()
    if at and text.startswith("\n", at) or text.startswith("\r\n", at):
        at = text.find("\n", at) + 1  # the blank line after the headers
    block_end = None
    while at and (body := _KEY_BODY.match(text, at)):
        block_end = at + len(body.group(0).rstrip())
        at = body.end() if body.group(0).endswith("\n") else 0
    return (start, block_end) if block_end else None
