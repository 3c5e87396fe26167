"""Measure retrieval on an evaluation set: a memory directory and questions with known answers.

A set is a folder with `memory/` (a memory directory) and `queries.jsonl`, one question per
line: `query`, `lang`, `kind`, `gold` (the memory files that answer it; empty for a question
no memory answers) and `evidence` (a phrase of the answering paragraph; may be empty). Each
question is injected statelessly, as the first message of a session would be, and scored:

* Recall@5: the share of a question's gold files among the files of the first five snippets;
* evidence@5: whether the evidence phrase is in those snippets;
* false injection: a question with no gold that injected anything at all;
* bytes: what was injected, per question.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..store.config import Scope, Settings
from ..store.errors import SagememError
from . import corpus as corpus_module
from .cache import Progress
from .inject import Injection, inject_set

TOP = 5


@dataclass(frozen=True)
class Outcome:
    """One question's result."""

    id: str
    kind: str
    lang: str
    on_topic: bool
    recall: float
    evidence: bool | None
    injected: bool
    bytes: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    outcomes: tuple[Outcome, ...]

    def summary(self, outcomes: Iterable[Outcome] | None = None) -> dict[str, Any]:
        rows = list(self.outcomes if outcomes is None else outcomes)
        on = [o for o in rows if o.on_topic]
        off = [o for o in rows if not o.on_topic]
        evidence = [o.evidence for o in on if o.evidence is not None]
        return {
            "queries": len(rows),
            "recall_at_5": _mean(o.recall for o in on),
            "evidence_at_5": _mean(float(e) for e in evidence),
            "false_injection": _mean(float(o.injected) for o in off),
            "mean_bytes": _mean(float(o.bytes) for o in rows),
            "on_topic": len(on),
            "off_topic": len(off),
        }

    def breakdown(self) -> dict[str, dict[str, Any]]:
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.outcomes:
            groups[f"kind={o.kind}"].append(o)
            groups[f"lang={o.lang}"].append(o)
        return {name: self.summary(rows) for name, rows in sorted(groups.items())}


def load_queries(set_dir: Path) -> list[dict[str, Any]]:
    path = set_dir / "queries.jsonl"
    queries = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SagememError(f"{path}: cannot read the questions ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            query = json.loads(line)
            if not isinstance(query.get("query"), str) or not isinstance(query.get("gold", []), list):
                raise ValueError("needs a string 'query' and a list 'gold'")
        except (ValueError, AttributeError) as exc:
            raise SagememError(f"{path}: line {number}: {exc}") from None
        queries.append(query)
    return queries


def evaluate(
    set_dir: Path, settings: Settings, progress: Progress | None = None, *, scopes: int = 1
) -> Report:
    """Score every question of the set; the set's directory is only read, never written.
    With `scopes` > 1 its memories are dealt round-robin into that many directories, ranked
    as one memory set: the figures should not move (one BM25 scale across scopes)."""
    memory_dir = set_dir / "memory"
    queries = load_queries(set_dir)
    with tempfile.TemporaryDirectory(prefix="sagemem-eval-") as work:
        places = _dealt(memory_dir, Path(work), scopes) if scopes > 1 else [(memory_dir, Path(work))]
        corpora = [corpus_module.load(m, st, use_cache=False, progress=progress) for m, st in places]
        names = [f"s{n}" for n in range(1, len(places) + 1)] if len(places) > 1 else [""]
        set_ = [Scope(n, m, st, "eval", st / "locks") for n, (m, st) in zip(names, places, strict=True)]
        outcomes = []
        for done, q in enumerate(queries, 1):
            outcomes.append(_score(q, inject_set(set_, q["query"], settings, corpora=corpora)))
            if progress is not None:
                progress(done, len(queries))
    return Report(tuple(outcomes))


def _dealt(memory_dir: Path, work: Path, count: int) -> list[tuple[Path, Path]]:
    """The set's memory files copied round-robin (in name order) into `count` directories."""
    places = []
    for n in range(count):
        folder = work / f"scope{n + 1}"
        folder.mkdir()
        places.append((folder, work / f"state{n + 1}"))
    names = sorted(p.name for p in memory_dir.iterdir() if p.suffix == ".md" and p.name != "MEMORY.md")
    for i, name in enumerate(names):
        shutil.copyfile(memory_dir / name, places[i % count][0] / name)
    return places


def _score(query: dict[str, Any], injection: Injection) -> Outcome:
    gold = [str(g) for g in query.get("gold", [])]
    top = injection.snippets[:TOP]
    files = tuple(dict.fromkeys(s.file.split(":", 1)[-1] for s in top))  # `s2:x.md` is x.md
    evidence = str(query.get("evidence") or "")
    return Outcome(
        id=str(query.get("id", "")),
        kind=str(query.get("kind", "")),
        lang=str(query.get("lang", "")),
        on_topic=bool(gold),
        recall=len(set(gold) & set(files)) / len(gold) if gold else 0.0,
        evidence=(any(evidence in s.text for s in top) if evidence and gold else None),
        injected=bool(injection.text),
        bytes=len(injection.text.encode("utf-8")),
        files=files,
    )


def _mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0
