"""Whether a message is about the memories at all: the injection's decision, from evidence.

A prompt hook must say nothing about most messages and the right thing about the rest. The
candidates (`retrieve.candidates`) say what the memories hold for a message: first what the
gates pass (a memory whose description, or a paragraph, holds enough of the message), then
every other unit that holds a word of it. This module says whether to give any of them,
from measured evidence about the best candidate and the message:

* `cover`: the share of the message's weight (idf times weight in the language) that the
  best unit and its memory's description hold;
* `matched`: how many of the message's terms they hold; `informative`: how many of those
  are informative words (Zipf 4.5 or rarer); `plain`: how rare in the language those
  matched words are, on average (1 for a word such as `kerfuffle`, 0.2 for `say`);
* `translated`: how many of the message's terms no memory holds are held through their
  counterparts in the other language (`bilingual.py`, with the `semantic` extra);
* `unheld`: how many of the message's informative words no memory holds at all, in either
  language;
* `gated`: whether the gates pass the best candidate;
* `size`: how large the directory is, as the idf of a word one unit holds (a match among
  five memories says more than one among five thousand).

A logistic model (`fitted.py`: a mean and a scale to standardise each feature, a weight for
each, a bias, and two thresholds; fitted by `bench/fit_decision.py` on every dev set and
small directories dealt from them, validated leave-one-set-out; docs/retrieval.md) turns
them into the probability that the message is about the memories. Each weight is fitted
with the sign of the evidence (`SIGNS`): more of it never lowers the probability. What
the gates pass is given unless the probability is under `VETO` (the model is sure it is
off topic); when the gates pass nothing (a long, chatty question with one clear match
among words no memory holds), the best candidates are given when it reaches `THRESHOLD`.
Fractions alone mislead both ways: a long question covers little of itself with its one
clear match, and a two-word message can cover all of itself with one common word. The
count of matched words and their rarity beside the fraction tell those apart.
"""

from __future__ import annotations

import math

from ..store.records import TYPE_CHECKING, Record
from . import fitted as model

if TYPE_CHECKING:
    from .retrieve import Result

FEATURES = ("cover", "matched", "informative", "plain", "translated", "unheld", "gated", "size")
SIGNS = {"cover": 1, "matched": 1, "informative": 1, "plain": 1, "translated": 1, "unheld": -1}
SIGNS |= {"gated": 1, "size": -1}


class Verdict(Record):
    """The decision for one message: inject or not, the probability it rests on, and why."""

    inject: bool
    probability: float
    threshold: float
    evidence: dict[str, float]
    terms: int = 0  # how many terms the message has

    @property
    def why(self) -> str:
        """One line: the decision and the evidence a person can check."""
        if not self.evidence:
            if not self.terms:
                return "not injected: the message has no word to search for"
            return "not injected: no memory holds a word of the message"
        e = self.evidence
        verb, sign = ("injected", ">=") if self.inject else ("not injected", "<")
        gates = "the gates pass it" if e["gated"] else "the gates pass nothing"
        unheld = f"; {int(e['unheld'])} rare word(s) no memory holds" if e["unheld"] else ""
        other = f" (and {int(e['translated'])} through the other language)" if e.get("translated") else ""
        return (
            f"{verb}: p {self.probability:.2f} {sign} {self.threshold:.2f} ({gates}); the best match "
            f"holds {int(e['matched'])} of {self.terms} terms{other}, {int(e['informative'])} informative, "
            f"{e['cover']:.0%} of the weight{unheld}"
        )


def features(found: Result) -> dict[str, float]:
    """The evidence about the best candidate of `found` (empty when there is none)."""
    asked = found.query
    if asked is None or not found.ranked:
        return {}
    top = found.ranked[0]
    mass = sum(w for term, w in asked.weights.items() if term not in asked.translated) or 1.0
    held = asked.held(top.held)
    matched = [term for term in held if term not in asked.translated]
    own = top.held & sum(1 << i for i, term in enumerate(asked.weights) if term not in asked.translated)
    return {
        "cover": min(1.0, sum(asked.weights[term] for term in held) / mass),
        "matched": float(len(matched)),
        "informative": float((own & asked.informative).bit_count()),
        "plain": sum(asked.general[term] for term in matched) / len(matched) if matched else 0.0,
        "translated": float(len({asked.translated[term] for term in held if term in asked.translated})),
        "unheld": float(asked.unheld),
        "gated": float(top.strong),
        "size": asked.rarest,
    }


def probability(evidence: dict[str, float]) -> float:
    """The fitted model's probability that the message is about the memories."""
    z = model.BIAS + sum(
        w * (evidence[name] - mean) / scale
        for name, mean, scale, w in zip(FEATURES, model.MEAN, model.SCALE, model.WEIGHT, strict=True)
    )
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def judge(found: Result) -> Verdict:
    """Whether to inject the candidates of `found`."""
    evidence = features(found)
    terms = len(found.query.terms) if found.query else 0
    if not evidence:
        return Verdict(False, 0.0, model.THRESHOLD, {}, terms)
    p = probability(evidence)
    threshold = model.VETO if evidence["gated"] else model.THRESHOLD
    return Verdict(p >= threshold, p, threshold, evidence, terms)
