"""Likely secrets in memory text: where each one is, a digest to compare it by, redaction.

Detection is detect-secrets' (Yelp's maintained scanner) through its Python API, in process,
line by line. All its plugins are used but three: the two high-entropy ones (memory files
hold sha256 versions and commit ids everywhere, which they would flag) and IPPublicDetector
(an address in a note is not a secret). Only the plugins' patterns run, never `verify`, so
nothing calls a vendor's API, and nothing touches the disk. KeywordDetector runs with the
regexes detect-secrets uses for YAML and .env-style files, so unquoted `password: hunter2`
and `DB_PASSWORD=...` count: a memory is Markdown with YAML frontmatter, and its code blocks
are mostly config. Its filters that need no file or baseline are kept: sequential strings,
UUIDs, templated values (`{x}`, `<x>`, `${x}`), `$VAR` values, values without a letter,
`*_id` keys, `pragma: allowlist secret` comments, and indirect references
(`secret = get_secret()`), the last for unquoted labelled values only, as it was made for
them: a vendor's token or a quoted literal inside a call (`Client(api_key="...")`) is still
a secret.

Our own patterns, each for what detect-secrets 1.5 misses (tests/test_secrets.py plants each):

* Hugging Face `hf_`, Anthropic `sk-ant-`, Google `AIza` and GitHub fine-grained
  `github_pat_` tokens, and other vendors' `sk-` keys: no plugin knows them. OpenAI
  `sk-proj-`, `sk-svcacct-`, `sk-admin-` keys: OpenAIDetector needs the `T3BlbkFJ` older
  keys hold. `npm_` tokens: NpmDetector sees them only in an `.npmrc` `_authToken=` line.
  `BEGIN ENCRYPTED PRIVATE KEY`: PrivateKeyDetector lists the other headers only.
* Passwords in URLs with an empty user (`redis://:pw@host`) or one of `!$&'()*+,;=` in the
  password, both valid in a URL, which BasicAuthDetector's pattern leaves out.
* Labelled values KeywordDetector's regexes cannot see: `token` keys and `Bearer` values (it
  has no such keyword), `API key:` with a space, Markdown emphasis between a label and its
  colon (`**Password**: x`), and the Chinese labels 密码, 口令, 密钥, 令牌.

What detect-secrets reports is then shaped. A token grows to its whole run of token
characters (its GitHub and GitLab patterns report only the `ghp`/`glpat` prefix, Stripe's
only 24 characters), so redaction removes all of it and two tokens get two digests. A
private key is its whole block, BEGIN line to END line; a BEGIN line with no key after it
(prose that names the header) is not reported. A labelled value or a URL's password ends at
its closing quote or, unquoted, at the first blank, quote or `,;)]}`, and is dropped if it is
a plain word or words or an identifier (`required`, `ask Dana`, `X-API-Key`,
`prod_db_password`), an environment variable's name, a path, a URL, code (`x[0]`, `f(x)`),
or (labelled values only) shorter than 6 characters. Any value is dropped if it is a
placeholder: `{...}`, `<...>`, `xxxx`, `****`, `...`, your/example/changeme/placeholder/
redacted. Notes say "password: ask Dana" far more often than they leak one, and a refused
write has a cost.

A digest is the sha256 of the value with whitespace removed, so the same secret on another
line, re-indented or with CRLF endings has the same digest.

Cost: detect-secrets is imported on the first scan (about 110 ms), never at module import,
and the detectors are built once per process. Each reads only the lines that hold a literal
every match of its patterns holds, derived from the parsed patterns (`_gate`), so skipping
the others loses nothing. detect-secrets' keyword and JWT regexes take time quadratic in a
long line of look-alikes; they are run so that they do not (`_keyword_finder`,
`_jwt_matches`). A 512 KiB memory scans in about 0.1 s.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from itertools import accumulate
from typing import Any, NamedTuple

MARKER = "[REDACTED by sagemem]"


class Secret(NamedTuple):
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


def scan(text: str) -> list[Secret]:
    """Every likely secret in `text`, in order; overlapping findings are one secret."""
    detectors, keep = _detectors()
    lines = text.split("\n")
    starts = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    # Each detector looks only at the lines its gate marks: those holding a literal that every
    # match of its patterns holds (see _gate), found with str.find.
    todo: dict[int, list[_Detector]] = {}
    folded = _fold(text)
    for detector in detectors:
        marked = range(len(lines)) if detector.gate is None else _marked(detector.gate, text, folded, starts)
        for number in marked:
            todo.setdefault(number, []).append(detector)
    found = []
    for number in sorted(todo):
        body = lines[number].rstrip()  # as detect-secrets reads a line: no CR, no trailing blanks
        previous = lines[number - 1].rstrip() if number else ""
        offset = starts[number]
        for start, end, order, kind in _scan_line(body, previous, todo[number], keep):
            found.append((offset + start, offset + end, order, kind))
    blocks = [(_key_block(text, s, e), r, k) for s, e, r, k in found if k == _PRIVATE_KEY]
    found = [f for f in found if f[3] != _PRIVATE_KEY] + [(*b, r, k) for b, r, k in blocks if b]
    return [
        Secret(bisect.bisect_right(starts, start), kind, _digest(text[start:end]), start, end)
        for start, end, kind in _merge(found)
    ]


def _marked(needles: _Needles, text: str, folded: str, starts: list[int]) -> Iterable[int]:
    """The numbers (0-based) of the lines holding one of `needles`: one find per marked line."""
    marked = set()
    for needle, fold in needles:
        haystack = folded if fold else text
        at = haystack.find(needle)
        while at >= 0:
            number = bisect.bisect_right(starts, at) - 1
            marked.add(number)
            if number + 1 == len(starts):
                break
            at = haystack.find(needle, starts[number + 1])
    return marked


def _fold(text: str) -> str:
    """`text`, same length, with each character that re.IGNORECASE matches to an ASCII letter
    made that lowercase letter: İ ı ſ and the Kelvin sign too (tests check every character)."""
    if not text.isascii():
        text = text.replace("İ", "i").replace("ı", "i").replace("ſ", "s")
    return text.lower()


def redact(text: str, secrets: Iterable[Secret] | None = None) -> str:
    """`text` with each secret's value replaced by MARKER; line endings and every other byte stay.

    A value that spans lines (a private key) becomes one MARKER per line.
    """
    spans = sorted((s.start, s.end) for s in (scan(text) if secrets is None else secrets))
    pieces, done = [], 0
    for start, end in spans:
        start = max(start, done)
        if end <= start:
            continue
        pieces += [text[done:start], _LINE_CONTENT.sub(MARKER, text[start:end])]
        done = end
    return "".join(pieces) + text[done:]


def new_secrets(old_text: str | None, new_text: str) -> list[Secret]:
    """The secrets in `new_text` that `old_text` does not hold (by digest): what a write adds."""
    held = {s.digest for s in scan(old_text)} if old_text else set()
    return [s for s in scan(new_text) if s.digest not in held]


def _digest(value: str) -> str:
    return hashlib.sha256(_BLANKS.sub("", value).encode("utf-8", "surrogatepass")).hexdigest()


def _merge(found: list[tuple[int, int, int, str]]) -> Iterator[tuple[int, int, str]]:
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

_BLANKS = re.compile(r"\s+")
_NON_WORD = re.compile(r"\W")
_LINE_CONTENT = re.compile(r"[^\r\n]+")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]+")
_QUOTES = "'\"`"
_PRIVATE_KEY = "private key"
_TOKEN, _URL, _ASSIGNED = 0, 1, 2  # detector ranks; the lowest names a merged finding
_MIN_ASSIGNED = 6  # a shorter labelled value is a note ("N/A", "TBD?") far more often than a password

_Finder = Callable[[str], Iterator[tuple[int, int]]]
_Needles = tuple[tuple[str, bool], ...]
_Keep = Callable[[str, int, int, int], bool]


class _Detector(NamedTuple):
    kind: str
    rank: int  # _TOKEN: a vendor's token shape; _URL: a URL's password; _ASSIGNED: a labelled value
    find: _Finder  # spans of candidate values in one line
    gate: _Needles | None  # one of these literals is in every line `find` finds something in
    precedence: int = 0  # of overlapping findings, the lowest names the secret: rank, then order


def _scan_line(
    line: str, previous: str, detectors: list[_Detector], keep: _Keep
) -> list[tuple[int, int, int, str]]:
    found = []
    runs: list[tuple[int, int]] = []  # the line's runs of token characters, once a token needs them
    for detector in detectors:
        seen = set()  # matches in one run of a token grow to one span: judge it once
        for start, end in detector.find(line):
            if detector.rank == _TOKEN and detector.kind != _PRIVATE_KEY:
                runs = runs or [m.span() for m in _TOKEN_RUN.finditer(line)]
                start, end = _grown(start, end, runs)
            if (start, end) in seen:
                continue
            seen.add((start, end))
            if detector.kind == _PRIVATE_KEY:
                span: tuple[int, int] | None = start, end
            else:
                span = (_token if detector.rank == _TOKEN else _value)(line, start, end)
            if span and keep(line, span[0], span[1], detector.rank):
                kind = _label(line[: span[0]]) if detector.rank == _ASSIGNED else detector.kind
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
    """A labelled value or a URL's password up to where it ends: its closing quote, or else the
    first blank, quote or `,;)]}` (and not a sentence's final `.` or `:`)."""
    if start and line[start - 1] in _QUOTES:
        closing = line.find(line[start - 1], start, end)
        end = closing if closing >= 0 else end
    else:
        cut = _UNQUOTED_END.search(line, start, end)
        end = cut.start() if cut else end
        while end > start and line[end - 1] in ".:":
            end -= 1
    return (start, end) if end > start else None


_TOKEN_EDGE = re.compile(r"[\s=:\"']+|[A-Za-z]{1,40}=(?=.)")
_UNQUOTED_END = re.compile(r"[\s'\"`,;)\]}]")
_LABELS = (
    ("AWS secret access key", re.compile(r"(?i)aws\w*secret|secret\w*access\w*key")),
    ("password", re.compile(r"(?i)pass|pwd|密码|口令")),
    ("token", re.compile(r"(?i)token|bearer|令牌")),
    ("API key", re.compile(r"(?i)api.?key")),
)


def _label(before: str) -> str:
    """What a labelled value is, by the last label word before it."""
    best, at = "secret", -1
    for kind, pattern in _LABELS:
        for match in pattern.finditer(before, max(0, len(before) - 60)):
            if match.start() > at:
                best, at = kind, match.start()
    return best


@cache
def _detectors() -> tuple[tuple[_Detector, ...], _Keep]:
    """detect-secrets' plugins and ours, and the value filter, built once per process."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins import keyword
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.keyword import REGEX_BY_FILETYPE, KeywordDetector
    from detect_secrets.util.filetype import FileType

    detectors = []
    for cls in sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__):
        if cls.__name__ in _LEFT_OUT:
            continue
        plugin = cls()
        kind = _KINDS.get(plugin.secret_type, plugin.secret_type)
        if isinstance(plugin, KeywordDetector):
            regexes = REGEX_BY_FILETYPE[FileType.YAML]
            finder = _keyword_finder(regexes, keyword.DENYLIST, keyword.DENYLIST_REGEX)
            detectors.append(_Detector(kind, _ASSIGNED, finder, _gate(regexes)))
        elif isinstance(plugin, RegexBasedDetector):
            rank = _URL if kind == "password in a URL" else _TOKEN
            checks = type(plugin).analyze_string is not RegexBasedDetector.analyze_string
            finder = _regex_finder(plugin.denylist, plugin if checks else None)
            detectors.append(_Detector(kind, rank, finder, _gate(plugin.denylist)))
        else:  # a plugin of another shape (none in 1.5): its values, where they first occur
            detectors.append(_Detector(kind, _TOKEN, _value_finder(plugin), None))
    detectors += [_Detector(kind, rank, _regex_finder([p]), _gate([p])) for kind, rank, p in _OURS]
    detectors = [d._replace(precedence=d.rank * 1000 + i) for i, d in enumerate(detectors)]

    secret_filters = (
        heuristic.is_sequential_string,
        heuristic.is_potential_uuid,
        heuristic.is_templated_secret,
        heuristic.is_prefixed_with_dollar_sign,
        heuristic.is_not_alphanumeric_string,
    )

    def keep(line: str, start: int, end: int, rank: int) -> bool:
        value = line[start:end]
        if any(f(value) for f in secret_filters) or _PLACEHOLDER.search(value):
            return False
        if rank == _TOKEN:
            return True
        if _NOT_A_VALUE.match(value):
            return False
        quoted = start > 0 and line[start - 1] in _QUOTES  # a literal, even inside a call
        return rank == _URL or not (
            len(value) < _MIN_ASSIGNED
            or heuristic.is_likely_id_string(value, line)
            or (not quoted and heuristic.is_indirect_reference(line))
        )

    return tuple(detectors), keep


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
_JWT_RUN = re.compile(r"[A-Za-z0-9_=-]+")


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
    "Slack Token": "Slack token",
    "SoftLayer Credentials": "SoftLayer credential",
    "Square OAuth Secret": "Square OAuth secret",
    "Stripe Access Key": "Stripe key",
    "Telegram Bot Token": "Telegram bot token",
    "Twilio API Key": "Twilio API key",
}
_VALUE = r"((?:(?![\"'`*])[!-~])+)"  # printable ASCII, up to a quote, backtick or emphasis
_OURS = (
    ("Hugging Face token", _TOKEN, re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("Anthropic API key", _TOKEN, re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", _TOKEN, re.compile(r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}")),
    ("API key", _TOKEN, re.compile(r"\bsk-[A-Za-z0-9]{32,}")),
    ("Google API key", _TOKEN, re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("GitHub token", _TOKEN, re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("npm token", _TOKEN, re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    (_PRIVATE_KEY, _TOKEN, re.compile(r"BEGIN ENCRYPTED PRIVATE KEY")),
    (
        "password in a URL",
        _URL,
        re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#\[\]@]*:([^\s/?#\[\]@]+)@"),
    ),
    ("token", _ASSIGNED, re.compile(r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)")),
    (
        "secret",
        _ASSIGNED,
        re.compile(
            r"(?i)(?:token[\w-]{0,40}|api[ _-]?key|access[ _-]?key|password|passwd|secret"
            r"|密码|口令|密钥|令牌)[*_]{0,2}[ \t]*(?:[:=：]|是|为)(?:[*_]{1,2})?[ \t]*['\"`]?" + _VALUE
        ),
    ),
)
# Values that stand for a secret without being one: ${VAR}, <your-key>, {{ secret }}, xxxx.
_PLACEHOLDER = re.compile(
    r"\{|<[^>]*>|x{4,}|\*{3,}|\.\.\.|…|your|example|changeme|placeholder|redacted", re.I
)
# Not a value: a plain word, words or identifier, an environment variable's name, a path, a
# URL (its password is found on its own), code (`x[0]`, `f(x)`).
_WORD = r"(?:[a-z]+|[A-Z][a-z]*|[A-Z]+)"
_NOT_A_VALUE = re.compile(
    rf"{_WORD}(?:[-_. ]{_WORD})*$|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$|(?:~|\.{{1,2}})?/"
    r"|[A-Za-z][A-Za-z0-9+.-]*://|.*[(\[]"
)


def _allowlisted(line: str, previous: str) -> bool:
    """detect-secrets' `pragma: allowlist secret` comment, on the line or (nextline) above it."""
    from detect_secrets.filters.allowlist import is_line_allowlisted
    from detect_secrets.util.code_snippet import CodeSnippet

    return is_line_allowlisted("memory.md", line, CodeSnippet([previous, line], 0, 1))


# --- gates: which lines a detector need look at -------------------------------------------


def _gate(patterns: Iterable[re.Pattern[str]]) -> _Needles | None:
    """Literals, one of which is in any line where one of `patterns` matches; None if some
    pattern has none. Derived from the parsed patterns, not written by hand, so a scan that
    reads only the lines they mark finds what one that reads every line finds, whatever
    detect-secrets' patterns are. A needle marked `fold` is ASCII lowercase and is looked for
    in `_fold(text)`, as a case-insensitive pattern would match it."""
    try:
        from re import _constants as sre  # type: ignore[attr-defined]
        from re import _parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_constants as sre  # type: ignore[no-redef]
        import sre_parse as _parser  # type: ignore[no-redef]

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
_KEY_EDGE = re.compile(
    r"(?P<end>-{4,5} ?END [A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-{4,5}|Private-MAC: *[0-9A-Fa-f]+)"
    r"|BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY|PuTTY-User-Key-File"
)
_KEY_DASHES = re.compile(r"-{4,5} ?$")
_KEY_BODY = re.compile(r"[ \t]*[A-Za-z0-9+/=\\:-]{16,}[ \t\r]*(?:\n|$)")


def _key_block(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The key block around the header detect-secrets found at `start:end`, dashes included:
    to its END line, or else over the key lines that follow; None if none follow (prose that
    names the header)."""
    dashes = _KEY_DASHES.search(text, max(0, start - 6), start)
    start = dashes.start() if dashes else start
    edge = _KEY_EDGE.search(text, end, end + _KEY_WINDOW)
    if edge and edge.group("end"):
        return start, edge.end()
    at = text.find("\n", end) + 1
    block_end = None
    while at and (body := _KEY_BODY.match(text, at)):
        block_end = at + len(body.group(0).rstrip())
        at = body.end() if body.group(0).endswith("\n") else 0
    return (start, block_end) if block_end else None
