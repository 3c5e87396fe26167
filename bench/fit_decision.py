"""Fit the injection's decision (`sagemem/search/decide.py`) and validate it leave-one-set-out.

    python bench/fit_decision.py [--shared ../shared/bench] [--target 0.05] [--write]
                                 [--json OUT] [--held-out]

For every message of every dev set (`bench/devsets.py`: fixtures, probe, locomo-30, cmrc)
the script takes the candidates the library ranks (`retrieve.candidates`) and the evidence
`decide.features` computes from them, exactly as the hook would. The label is whether the
message is about the memories at all (an on-topic question) or not (an off-topic one): to
inject for an on-topic question whose answer the candidates miss costs bytes, not recall;
to inject for an off-topic one is the false injection a user sees.

The model is a logistic regression on standardised features with an L2 penalty, fitted by
Newton's method in plain Python (ten numbers: no numpy, here or on the hook path). Every set
weighs the same, and within a set its on-topic and off-topic messages weigh half each. The
threshold is the lowest probability at which no training set injects for more than
`--target` of its off-topic messages in any language.

Leave-one-set-out: for each set, the model and the threshold are fitted on the other three
and measured on it; these left-out figures are the result. Then one model is fitted on all
four, its in-sample figures printed, and with `--write` it becomes `sagemem/search/fitted.py`.
With `--held-out` the final model is also measured on the set held back (LoCoMo
conversation 41; docs/decisions.md), at the end only.

Figures are measured as `bench/devsets.py --mode pull` scores a retriever: the snippets the
injection would give, each with its `### file:a-b` header, read by each set's own scorer.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import devsets  # noqa: E402

from sagemem.search import corpus as corpus_module  # noqa: E402
from sagemem.search import decide, lexicon, retrieve  # noqa: E402
from sagemem.search.inject import read_snippet  # noqa: E402
from sagemem.search.tokenize import acknowledges  # noqa: E402
from sagemem.store.config import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "sagemem" / "search" / "fitted.py"
L2 = 1.0
ONLY_ALONE = False  # fit on what the gates pass nothing for only (with `--veto 0`)
LOSS = 0.02  # of what the gates find, the share the model may turn away
SMALL_SIZE = 6  # memories in each small directory
GRID = [round(0.05 + 0.01 * i, 2) for i in range(95)]
VETO: float | None = None  # a threshold for what the gates pass, fixed instead of fitted


@dataclass
class Case:
    """One message: its evidence, whether it is on topic, and what each decision gives."""

    set: str
    kind: str
    lang: str
    on: bool
    evidence: dict[str, float]
    given: dict[str, Any]  # the scores and bytes when the candidates are injected
    silent: dict[str, Any]  # the same when nothing is


def collect(names: list[str], shared: Path, settings: Settings, small: int = 0) -> list[Case]:
    """Every message of every set named, and with `small`, the same sets dealt into small
    directories too (`SMALL_SIZE` memories each, `small` of them a set), each keeping its
    off-topic messages and the on-topic ones it holds an answer to: a person's first few
    memories are a directory too, and every idf and BM25 score is smaller there."""
    cases = []
    with tempfile.TemporaryDirectory(prefix="sagemem-fit-") as tmp:
        work = Path(tmp)
        for name in names:
            found = devsets.LOADERS[name](shared, work)
            cases += _cases(name, found.memory, found.messages, work / f"state-{name}", settings)
            files = sorted(p.name for p in found.memory.glob("*.md") if p.name != "MEMORY.md")
            draw = random.Random(f"{name}-small")
            for i in range(small):
                folder = work / f"{name}-small-{i}"
                folder.mkdir()
                kept = set(draw.sample(files, min(SMALL_SIZE, len(files))))
                for file in kept:
                    shutil.copy2(found.memory / file, folder / file)
                messages = [m for m in found.messages if m.score is None or kept & set(m.gold)]
                cases += _cases(f"{name} (small)", folder, messages, work / f"state-{name}-{i}", settings)
    return cases


def _cases(
    name: str, memory: Path, messages: list[devsets.Message], state: Path, settings: Settings
) -> list[Case]:
    cases = []
    corpus = corpus_module.load(memory, state, use_cache=False)
    try:
        with lexicon.opened() as words:
            for m in messages:
                # The hook searches nothing for an acknowledgement (`inject_set`).
                query = "" if acknowledges(m.query) else m.query
                ranked = retrieve.candidates(corpus, query, settings, words)
                evidence = decide.features(ranked)
                hits = list(retrieve.given(ranked, settings).hits)
                parts = []
                for hit in hits:
                    snippet = read_snippet(memory, hit.entry, hit.start, hit.end)
                    parts.append(f"### {hit.file}:{hit.start}-{hit.end}\n{snippet.text if snippet else ''}")
                text = "\n\n".join(parts)
                given = {"bytes": len(text.encode("utf-8")), "empty": not text.strip()}
                silent = {"bytes": 0, "empty": True}
                if m.score is not None:
                    given.update(m.score(text, hits))
                    silent.update(m.score("", []))
                cases.append(Case(name, m.kind, m.lang, m.score is not None, evidence, given, silent))
    finally:
        corpus.close()
    return cases


# -- the model --------------------------------------------------------------------------------


@dataclass
class Fitted:
    mean: list[float]
    scale: list[float]
    weight: list[float]
    bias: float
    threshold: float = 0.5
    veto: float = 0.5

    def probability(self, evidence: dict[str, float]) -> float:
        z = self.bias + sum(
            w * (evidence[f] - m) / s
            for f, m, s, w in zip(decide.FEATURES, self.mean, self.scale, self.weight, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def fit(cases: list[Case]) -> Fitted:
    """The model, each weight of the sign `decide.SIGNS` gives it: more evidence never lowers
    the probability. A feature whose weight comes out with the other sign (two features that
    say nearly the same, such as a count and a weight) is left out and the rest fitted again."""
    out: set[int] = set()
    while True:
        model = _fit(cases, out)
        signs = [decide.SIGNS[f] for f in decide.FEATURES]
        wrong = [i for i, (w, sign) in enumerate(zip(model.weight, signs, strict=True)) if w * sign < 0]
        if not wrong:
            return model
        out.add(max(wrong, key=lambda i: abs(model.weight[i])))


def _fit(cases: list[Case], out: set[int]) -> Fitted:
    rows = [c for c in cases if c.evidence and (not ONLY_ALONE or not c.evidence["gated"])]
    sizes: dict[tuple[str, bool], int] = defaultdict(int)
    for c in rows:
        sizes[(c.set, c.on)] += 1
    weights = [0.5 / sizes[(c.set, c.on)] for c in rows]
    total = sum(weights)
    weights = [w / total * len(rows) for w in weights]
    x = [[c.evidence[f] for f in decide.FEATURES] for c in rows]
    y = [1.0 if c.on else 0.0 for c in rows]
    k = len(decide.FEATURES)
    mean = [sum(r[j] * w for r, w in zip(x, weights, strict=True)) / len(rows) for j in range(k)]
    scale = [
        math.sqrt(sum(w * (r[j] - mean[j]) ** 2 for r, w in zip(x, weights, strict=True)) / len(rows)) or 1.0
        for j in range(k)
    ]
    z = [[0.0 if j in out else (r[j] - mean[j]) / scale[j] for j in range(k)] + [1.0] for r in x]
    beta = [0.0] * (k + 1)
    for _ in range(100):
        grad = [L2 * b for b in beta[:k]] + [0.0]
        hess = [[(L2 if i == j and i < k else 0.0) for j in range(k + 1)] for i in range(k + 1)]
        for zi, yi, wi in zip(z, y, weights, strict=True):
            p = 1.0 / (
                1.0 + math.exp(-max(-60.0, min(60.0, sum(a * b for a, b in zip(zi, beta, strict=True)))))
            )
            g, h = wi * (p - yi), wi * p * (1 - p)
            for i in range(k + 1):
                grad[i] += g * zi[i]
                row = hess[i]
                for j in range(i, k + 1):
                    row[j] += h * zi[i] * zi[j]
        for i in range(k + 1):
            for j in range(i):
                hess[i][j] = hess[j][i]
        step = _solve(hess, grad)
        beta = [b - s for b, s in zip(beta, step, strict=True)]
        if max(abs(s) for s in step) < 1e-10:
            break
    return Fitted(mean, scale, beta[:k], beta[k])


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a small, positive definite system)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for j in range(c, n + 1):
                m[r][j] -= f * m[c][j]
    out = [0.0] * n
    for r in range(n - 1, -1, -1):
        out[r] = (m[r][n] - sum(m[r][j] * out[j] for j in range(r + 1, n))) / m[r][r]
    return out


def injects(case: Case, model: Fitted, threshold: float, veto: float) -> bool:
    """The decision: a message the gates pass is given unless the model is sure it is off
    topic (under `veto`); one they do not is given when the model is sure it is on topic."""
    if not case.evidence:
        return False
    p = model.probability(case.evidence)
    return p >= (veto if case.evidence["gated"] else threshold)


def decided(cases: list[Case], model: Fitted, threshold: float, veto: float) -> list[dict[str, Any]]:
    """Each case's row as `devsets.summary` reads it, under the model at `threshold`."""
    return [
        {
            "set": c.set,
            "kind": c.kind,
            "lang": c.lang,
            **(c.given if injects(c, model, threshold, veto) else c.silent),
        }
        for c in cases
    ]


def worst_false(cases: list[Case], model: Fitted, threshold: float, veto: float) -> float:
    """The highest share of off-topic messages injected for, over every set and language."""
    groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for c in cases:
        if not c.on:
            groups[(c.set, c.lang)].append(injects(c, model, threshold, veto))
    return max((sum(g) / len(g) for g in groups.values()), default=0.0)


def recall(cases: list[Case], model: Fitted, threshold: float, veto: float) -> float:
    """The mean over sets of each set's mean recall."""
    by: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        if c.on:
            by[c.set].append(float((c.given if injects(c, model, threshold, veto) else c.silent)["recall"]))
    return sum(sum(v) / len(v) for v in by.values()) / len(by)


def calibrate(cases: list[Case], model: Fitted, target: float) -> tuple[float, float]:
    """The two thresholds, each from a budget that holds in every training set: `veto`, the
    highest at which the model turns away at most `LOSS` of the on-topic messages the gates
    pass; `threshold`, the lowest at which what the model adds (messages the gates pass
    nothing for) is a false injection for at most `target` of the off-topic messages, in
    each language."""
    sets = sorted({c.set for c in cases})
    gated = [c for c in cases if c.evidence and c.evidence["gated"]]

    def lost(t: float) -> float:
        shares = []
        for name in sets:
            found = [c for c in gated if c.set == name and c.on]
            if found:
                shares.append(sum(model.probability(c.evidence) < t for c in found) / len(found))
        return max(shares, default=0.0)

    def added(t: float) -> float:
        groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for c in cases:
            if not c.on:
                alone_ = bool(c.evidence) and not c.evidence["gated"]
                groups[(c.set, c.lang)].append(alone_ and model.probability(c.evidence) >= t)
        return max((sum(g) / len(g) for g in groups.values()), default=0.0)

    if VETO is not None:
        veto = VETO
    else:
        veto = max((t for t in GRID if lost(t) <= LOSS), default=GRID[0])
    threshold = next((t for t in GRID if added(t) <= target), GRID[-1])
    return threshold, veto


# -- output -----------------------------------------------------------------------------------


def write(model: Fitted, names: list[str], target: float) -> None:
    def numbers(values: list[float]) -> str:
        return "(" + ", ".join(f"{v:.6g}" for v in values) + ")"

    MODEL.write_text(
        '"""The injection\'s decision, fitted: written by `bench/fit_decision.py`; do not edit by hand.\n\n'
        f"Fitted on {', '.join(names)} and small directories dealt from them.\n"
        f"`THRESHOLD` adds at most {target:.1%} false injection to any of them in either language;\n"
        f"`VETO` turns away at most {LOSS:.0%} of the on-topic messages the gates pass.\n"
        f"Features: {', '.join(decide.FEATURES)}, in that order.\n"
        '"""\n\n'
        f"MEAN = {numbers(model.mean)}\n"
        f"SCALE = {numbers(model.scale)}\n"
        f"WEIGHT = {numbers(model.weight)}\n"
        f"BIAS = {model.bias:.6g}\n"
        f"THRESHOLD = {model.threshold:.2f}  # for a message the gates pass nothing for\n"
        f"VETO = {model.veto:.2f}  # for one they pass\n",
        encoding="utf-8",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument(
        "--target", type=float, default=0.025, help="false injection the model may add, per set and language"
    )
    parser.add_argument(
        "--write", action="store_true", help="write the model fitted on every set to fitted.py"
    )
    parser.add_argument("--json", type=Path, help="write every table here")
    parser.add_argument(
        "--held-out", action="store_true", help="also measure the held-back set (at the end only)"
    )
    parser.add_argument("--small", type=int, default=4, help="small directories dealt from each set")
    parser.add_argument("--features", help="comma-separated features to try instead of decide.FEATURES")
    parser.add_argument("--veto", type=float, help="fix the threshold for what the gates pass")
    args = parser.parse_args()
    global VETO, ONLY_ALONE
    VETO = args.veto
    ONLY_ALONE = args.veto == 0
    if args.features and args.write:
        raise SystemExit("--features is for trying features: fitted.py holds decide.FEATURES (no --write)")
    if args.features:
        decide.FEATURES = tuple(args.features.split(","))
    settings = Settings()._replace(limit=devsets.K)
    names = list(devsets.DEV)
    cases = collect(names, args.shared, settings, args.small)
    report: dict[str, Any] = {"left_out": {}, "thresholds": {}}
    left_rows = []
    for left in names:
        train = [c for c in cases if c.set.split()[0] != left]
        model = fit(train)
        threshold, veto = calibrate(train, model, args.target)
        report["thresholds"][left] = (threshold, veto)
        left_rows += decided([c for c in cases if c.set.split()[0] == left], model, threshold, veto)
    print("the gates alone (a candidate is given when the gates pass it):")
    report["gates"] = devsets.summary(decided(cases, fit(cases), 2.0, 0.0))
    devsets.show(report["gates"])
    print("\nleave-one-set-out (each set measured under the model fitted on the other three):")
    print(
        "thresholds (alone, gated):",
        ", ".join(f"{k} {v[0]:.2f} {v[1]:.2f}" for k, v in report["thresholds"].items()),
    )
    report["left_out"] = devsets.summary(left_rows)
    devsets.show(report["left_out"])
    final = fit(cases)
    final.threshold, final.veto = calibrate(cases, final, args.target)
    report["model"] = {
        "features": list(decide.FEATURES),
        "weight": final.weight,
        "bias": final.bias,
        "threshold": final.threshold,
    }
    print(f"\nfitted on every set, thresholds {final.threshold:.2f} {final.veto:.2f} (in-sample):")
    report["in_sample"] = devsets.summary(decided(cases, final, final.threshold, final.veto))
    devsets.show(report["in_sample"])
    print("weights:", ", ".join(f"{f} {w:+.2f}" for f, w in zip(decide.FEATURES, final.weight, strict=True)))
    if args.write:
        write(final, names, args.target)
        print(f"written: {MODEL.relative_to(ROOT)}")
    if args.held_out:
        held = collect(list(devsets.HELD_OUT), args.shared, settings)
        print("\nheld back (measured once, at the end):")
        report["held_out"] = devsets.summary(decided(held, final, final.threshold, final.veto))
        devsets.show(report["held_out"])
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
