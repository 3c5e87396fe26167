"""The secret scanner on a set nobody tuned it on (tests/data/heldback_secrets/README.md)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sagemem.store import secrets

DATA = Path(__file__).parent / "data" / "heldback_secrets"
CASES = [json.loads(line) for line in (DATA / "shapes.jsonl").read_text("utf-8").splitlines() if line]
INNOCENT = [line for line in (DATA / "innocent.md").read_text("utf-8").split("\n") if line.strip()]
FLOOR = {"full": 87, "pattern": 86}  # of 93; measured when the set was first used, never lowered
SCANS = {"full": secrets.scan, "pattern": secrets.scan_patterns}


def alphabet(spec: str) -> str:
    """`A-Za-z0-9_-` as its characters: `X-Y` a range, a `-` at either end itself."""
    out, i = [], 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out += [chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1)]
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(dict.fromkeys(out))


def render(case: dict[str, object], rng: random.Random) -> tuple[str, str]:
    """The case's text and its secret body, drawn now."""
    chars = alphabet(str(case["alphabet"]))
    groups = case.get("groups") or [case["length"]]
    body = str(case.get("sep", "")).join("".join(rng.choice(chars) for _ in range(int(n))) for n in groups)  # type: ignore[union-attr]
    token = f"{case['prefix']}{body}{case.get('suffix', '')}"
    return str(case["template"]).replace("{secret}", token), body


def found(scan: str) -> list[str]:
    """The ids of the cases whose body the scan finds and redaction removes."""
    rng = random.Random(20240601)
    hits = []
    for case in CASES:
        text, body = render(case, rng)
        spans = SCANS[scan](text)
        shown = secrets.redact(text, spans)
        pieces = [p for p in body.split("\n") if len(p) >= 8] or [body]  # a key's lines
        if spans and not any(piece in shown for piece in pieces):
            hits.append(str(case["id"]))
    return hits


@pytest.mark.parametrize("scan", sorted(SCANS))
def test_the_held_back_shapes_are_found(scan: str) -> None:
    hits = found(scan)
    missed = sorted({str(c["id"]) for c in CASES} - set(hits))
    assert len(hits) >= FLOOR[scan], f"{len(hits)} of {len(CASES)}; missed: {', '.join(missed)}"


@pytest.mark.parametrize("scan", sorted(SCANS))
def test_no_held_back_innocent_line_is_flagged(scan: str) -> None:
    assert [line for line in INNOCENT if SCANS[scan](line)] == []
