"""Real-world secret shapes and innocent technical prose (tests/data/secrets/).

Every shape of `shapes.json` (a vendor's documented token format, in a line of Markdown as
notes hold it) is found by the full scan and by the prompt hook's pattern pass, and
redacting leaves none of it; no line of `innocent.md` (hashes, ids, example keys, words
about secrets, English and Chinese) is reported. The tokens are generated here from each
shape's alphabet and length, seeded by its vendor, so the repository holds no secret.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagemem.store import secret_shapes, secrets
from sagemem.store.secrets import MARKER, redact, scan, scan_patterns

DATA = Path(__file__).resolve().parent / "data" / "secrets"
SHAPES = json.loads((DATA / "shapes.json").read_text(encoding="utf-8"))["shapes"]
INNOCENT = (DATA / "innocent.md").read_text(encoding="utf-8")
ALPHABETS = {
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "digits": string.digits,
    "letters": string.ascii_letters,
    "alnum": string.ascii_letters + string.digits,
    "upper": string.ascii_uppercase + string.digits,
    "lower": string.ascii_lowercase + string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
    "bech32": "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper(),
    "password": string.ascii_letters + string.digits + "!#%&*+-=?@^_~",
}
FRONTMATTER = (
    "---\nname: {vendor} notes\ndescription: how we use {vendor}\ntype: reference\n---\n\n# {vendor}\n\n"
)


def token(shape: dict[str, Any]) -> str:
    """A token of the shape's documented format, from a generator seeded by its vendor."""
    rng = random.Random(f"{shape['vendor']}:{shape['format']}")
    parts = []
    for part in shape["token"]:
        if isinstance(part, str):
            parts.append(part)
            continue
        kind, *arg = part
        if kind == "uuid":
            parts.append(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
        elif kind == "jwt":
            parts.append(_jwt(rng, arg[0]))
        elif kind == "basic":
            secret = "".join(rng.choice(ALPHABETS["alnum"]) for _ in range(18))
            parts.append(base64.b64encode(f"{arg[0]}:{secret}".encode()).decode())
        elif kind in ("pem", "pem-json"):
            pem = _pem(rng, arg[0])
            parts.append(pem.replace("\n", "\\n") if kind == "pem-json" else pem)
        elif kind == "putty":
            parts.append(_putty(rng))
        elif kind == "password":
            # Letters, then a digit and a symbol somewhere: what a person picks as a password.
            body = [rng.choice(string.ascii_letters) for _ in range(arg[0] - 2)]
            body.insert(rng.randrange(1, len(body)), rng.choice(string.digits))
            body.insert(rng.randrange(1, len(body)), rng.choice("!#%&*?@^~"))
            parts.append("".join(body))
        else:
            parts.append("".join(rng.choice(ALPHABETS[kind]) for _ in range(arg[0])))
    return "".join(parts)


def _jwt(rng: random.Random, subject: str) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    signature = "".join(rng.choice(ALPHABETS["b64url"]) for _ in range(43))
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': subject, 'iat': 1716000000})}.{signature}"


def _pem(rng: random.Random, label: str) -> str:
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(400))).decode()
    return "\n".join(
        [
            f"-----BEGIN {label}-----",
            *(body[i : i + 64] for i in range(0, len(body), 64)),
            f"-----END {label}-----",
        ]
    )


def _putty(rng: random.Random) -> str:
    def b64(n: int) -> str:
        return "".join(rng.choice(ALPHABETS["b64"]) for _ in range(n))

    return "\n".join(
        ["PuTTY-User-Key-File-3: ssh-ed25519", "Encryption: none", "Comment: jump-host", "Public-Lines: 2"]
        + [b64(64), b64(24), "Private-Lines: 1", b64(44)]
        + ["Private-MAC: " + "".join(rng.choice(ALPHABETS["hex"]) for _ in range(64))]
    )


def planted(shape: dict[str, Any]) -> tuple[str, str]:
    """A memory holding the shape's token on its line, and the token."""
    value = token(shape)
    body = shape["line"].replace("{token}", value)
    return FRONTMATTER.format(vendor=shape["vendor"]) + body + "\n\nMore notes follow.\n", value


def found_by(scanner: Any, text: str, value: str) -> bool:
    """Whether the scanner's findings cover every line of `value` (a key is one finding)."""
    spans = [(s.start, s.end) for s in scanner(text)]
    at = text.index(value)
    covered = [any(a <= i < b for a, b in spans) for i in range(at, at + len(value)) if not text[i].isspace()]
    return all(covered)


IDS = [f"{s['vendor']}: {s['format']}" for s in SHAPES]


def test_the_fixture_is_large_and_its_tokens_are_distinct() -> None:
    assert len(SHAPES) >= 60
    assert len({s["vendor"] for s in SHAPES}) >= 60
    values = [token(s) for s in SHAPES]
    assert len(set(values)) == len(values)
    assert all(s["format"] and "{token}" in s["line"] for s in SHAPES)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_each_shape_is_found_by_the_full_scan(shape: dict[str, Any]) -> None:
    text, value = planted(shape)
    assert found_by(scan, text, value), [(s.kind, text[s.start : s.end]) for s in scan(text)]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_each_shape_is_found_by_the_pattern_pass(shape: dict[str, Any]) -> None:
    """The prompt hook's pass, without detect-secrets, finds every shape too."""
    text, value = planted(shape)
    assert found_by(scan_patterns, text, value), [
        (s.kind, text[s.start : s.end]) for s in scan_patterns(text)
    ]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_redaction_leaves_nothing_of_a_shape(shape: dict[str, Any]) -> None:
    text, value = planted(shape)
    clean = redact(text)
    pieces = [p for p in re.split(r"\s+", value) if len(p) >= 6]
    assert MARKER in clean and not any(p in clean for p in pieces)
    assert scan(clean) == [] and clean.count("\n") == text.count("\n")


def test_recall_on_the_fixture() -> None:
    """Printed for the record (`pytest -s`): every shape, by each scan."""
    full = [s["vendor"] for s in SHAPES if not found_by(scan, *planted(s))]
    quick = [s["vendor"] for s in SHAPES if not found_by(scan_patterns, *planted(s))]
    total = len(SHAPES)
    print(f"full scan: {total - len(full)}/{total}; pattern pass: {total - len(quick)}/{total}")
    assert not full and not quick


# --- innocent prose -------------------------------------------------------------------------

INNOCENT_LINES = [line for line in INNOCENT.split("\n") if line.strip()]


def test_the_innocent_corpus_holds_no_secret() -> None:
    found = [(s.line, s.kind, INNOCENT[s.start : s.end]) for s in scan(INNOCENT)]
    assert found == []


@pytest.mark.parametrize("line", INNOCENT_LINES)
def test_no_innocent_line_is_a_secret(line: str) -> None:
    assert scan(line) == [], [(s.kind, line[s.start : s.end]) for s in scan(line)]


def test_the_innocent_corpus_is_large_and_bilingual() -> None:
    assert len(INNOCENT_LINES) >= 150
    assert sum(bool(re.search(r"[\u4e00-\u9fff]", line)) for line in INNOCENT_LINES) >= 15


# --- the shapes' needles ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape", secret_shapes.SHAPES, ids=[f"{s.kind}: {s.pattern[:40]}" for s in secret_shapes.SHAPES]
)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_match_of_a_shape_holds_one_of_its_needles(
    shape: secret_shapes.Shape, data: st.DataObject
) -> None:
    """A line is read for a shape only when it holds a needle (and one of what it `needs`): no
    match may lack one."""
    text = data.draw(st.from_regex(shape.pattern))
    for match in re.finditer(shape.pattern, text):
        seen = secrets._fold(match.group(0)) if shape.fold else match.group(0)
        assert any(needle in seen for needle in shape.needles), (match.group(0), shape.needles)
        assert not shape.needs or any(part in secrets._fold(match.group(0)) for part in shape.needs)


def test_needles_of_a_case_insensitive_shape_are_lowercase() -> None:
    """They are looked for in the folded text, where every letter is lowercase."""
    assert all(n == n.lower() for s in secret_shapes.SHAPES if s.fold for n in s.needles)
    assert all(s.fold == s.pattern.startswith("(?i)") for s in secret_shapes.SHAPES)


# --- one table of label words -----------------------------------------------------------------

LABEL_WORDS = [w for w in (*secret_shapes.WORDS, *secret_shapes.CHINESE_WORDS)]
PASSWORD_LIKE = "Xy9!pq#Lm2w"


@pytest.mark.parametrize("word", LABEL_WORDS, ids=[w.pattern for w in LABEL_WORDS])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_every_label_word_names_a_secret_wherever_labels_stand(
    word: secret_shapes.Word, data: st.DataObject
) -> None:
    """A label word works the same after a separator, in YAML with its value on the next line,
    in a table row, and as a table column's header: every context reads the one table."""
    label = data.draw(st.from_regex(f"(?i)(?:{word.pattern})", fullmatch=True).filter(str.isprintable))
    texts = {
        "labelled": f"{label}: {PASSWORD_LIKE}\n",
        "next line": f"db:\n  {label}:\n    {PASSWORD_LIKE}\n",
        "table row": f"| {label} | {PASSWORD_LIKE} |\n",
        "table column": f"| env | {label} |\n|---|---|\n| prod | {PASSWORD_LIKE} |\n",
    }
    for where, text in texts.items():
        for scanner in (scan, scan_patterns):
            assert found_by(scanner, text, PASSWORD_LIKE), (where, scanner.__name__, text)


def test_the_label_patterns_are_built_from_the_table() -> None:
    """No list of label words of its own: each pattern holds every word of the table."""
    for shape in (secret_shapes.LABELLED, secret_shapes.PROSE_SHAPE):
        for word in secret_shapes.WORDS:
            if word.prose or shape is secret_shapes.LABELLED:
                assert word.pattern in shape.pattern, (shape.kind, word.pattern)
    for word in LABEL_WORDS:
        assert word.pattern in secret_shapes.TABLE_LABEL
    assert all(w.pattern in secret_shapes.LABELLED_CHINESE.pattern for w in secret_shapes.CHINESE_WORDS)


# --- the long-run gate ------------------------------------------------------------------------

IN_RUNS = [s for s in secret_shapes.SHAPES if s.rank == secret_shapes.TOKEN and s.kind != "private key"]
_RUN = re.compile(r"[A-Za-z0-9_+/=:.?&%~-]{16}")


@pytest.mark.parametrize("shape", IN_RUNS, ids=[f"{s.kind}: {s.pattern[:40]}" for s in IN_RUNS])
def test_every_token_shape_is_at_least_a_long_run(shape: secret_shapes.Shape) -> None:
    """A token shape is read only on lines holding a run of 16 token characters: a shape that
    can match fewer (once Slack's, 15) would never be read there."""
    try:
        from re import _parser  # type: ignore[attr-defined]
    except ImportError:  # Python 3.10
        import sre_parse as _parser  # type: ignore[no-redef]
    assert _parser.parse(shape.pattern).getwidth()[0] >= 16


@pytest.mark.parametrize("shape", IN_RUNS, ids=[f"{s.kind}: {s.pattern[:40]}" for s in IN_RUNS])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_match_of_a_token_shape_holds_a_long_run(
    shape: secret_shapes.Shape, data: st.DataObject
) -> None:
    text = data.draw(st.from_regex(shape.pattern))
    for match in re.finditer(shape.pattern, text):
        assert _RUN.search(match.group(0)), match.group(0)


# --- innocent code ----------------------------------------------------------------------------

INNOCENT_CODE = (DATA / "innocent_code.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("scanner", [scan, scan_patterns])
def test_code_that_names_secrets_holds_none(scanner: Any) -> None:
    """Type hints, interfaces, manifests and workflows name passwords, tokens and keys all the
    time (`password: SecretStr`, `secretKeyRef`, `process.env.API_KEY!`): none is a secret."""
    found = [(s.line, s.kind, INNOCENT_CODE[s.start : s.end]) for s in scanner(INNOCENT_CODE)]
    assert found == []
