"""Two-stage retrieval: which memories a message is about, then which paragraph of each.

Stage 1 scores every memory's description fields (description, name, aliases, tags, file
name words) with BM25 and admits those that cover enough of the query (`gate`): coverage is
the share of the query's idf mass found in the memory, so the gate is on the query's own
scale. At most `candidates` memories pass, best first.

Stage 2 ranks the body paragraphs of the admitted memories with BM25; each memory offers its
best paragraph first, and a memory with no matching paragraph offers its opening lines. The
paragraphs of all the other memories compete too, behind a stricter gate of the same kind
(`body_gate`, and two shared terms when the query has two), so a detail that only a body
mentions is found even when some description matched loosely.

A snippet scores its memory's description coverage plus its paragraph's coverage. Every
memory's best paragraph is placed before any memory's second one, so a long memory cannot
crowd out short ones; the second ones only fill places left over. Snippets far below the
best one (`cut`) and those past `limit` are held back, not dropped: the injection reports
them. Ties break by file name, then line, so results are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .config import Settings
from .corpus import Corpus, Entry
from .names import name_key
from .tokenize import query_tokens

OPENING_LINES = 6


class Hit(NamedTuple):
    """A snippet: lines `start`..`end` of `file`, why it was chosen, and how well it scored."""

    file: str
    start: int
    end: int
    score: float
    stage: str  # "description" (stage 1 + its best paragraph), "opening", or "body" (fallback)
    entry: Entry
    first: bool = True  # the memory's best paragraph (else a further one)

    @property
    def description(self) -> str:
        return self.entry.description

    @property
    def version(self) -> str:
        return self.entry.version


class Result(NamedTuple):
    """What a query found. `ranked`: every snippet that passed the gates and the cut, in
    injection order (every memory's best paragraph, then further paragraphs); `below`: the
    best snippets of memories that fell under the cut. `pick` applies the limit, after
    skipping what a session already has, so a snippet already shown frees its place."""

    ranked: tuple[Hit, ...]
    below: tuple[Hit, ...]
    terms: tuple[str, ...]
    scanned: int
    limit: int

    def pick(self, skip: Callable[[Hit], bool] = lambda _hit: False) -> tuple[list[Hit], list[Hit]]:
        """The snippets to inject, and the memories held back: not shown, not already given,
        either past the limit or under the cut."""
        chosen = [h for h in self.ranked if not skip(h)][: self.limit]
        shown = {h.file for h in chosen}
        held = [h for h in self.ranked if h.first and h.file not in shown and not skip(h)]
        return chosen, held + [h for h in self.below if not skip(h)]

    @property
    def hits(self) -> tuple[Hit, ...]:
        return tuple(self.pick()[0])

    @property
    def held_back(self) -> tuple[Hit, ...]:
        return tuple(self.pick()[1])


def search(corpus: Corpus, query: str, settings: Settings | None = None) -> Result:
    settings = settings or Settings()
    terms = tuple(dict.fromkeys(query_tokens(query, corpus.vocabulary)))
    if not terms:
        return Result((), (), terms, corpus.count, settings.limit)
    described = corpus.descriptions.weights(terms)
    weights = corpus.paragraphs.weights(terms)
    described_mass, mass = sum(described.values()), sum(weights.values())

    # Stage 1: memories whose description fields cover enough of the query.
    admitted = []
    for doc, (score, held, _) in corpus.descriptions.scores(described).items():
        share = held / described_mass if described_mass else 0.0
        if share >= settings.gate:
            admitted.append((score, share, doc))
    admitted.sort(key=lambda a: -a[0])
    if len(admitted) > settings.candidates:  # names break ties, so keep every tie at the edge
        edge = admitted[settings.candidates - 1][0]
        admitted = [a for a in admitted if a[0] >= edge]
    admitted.sort(key=lambda a: (-a[0], *_file_key(corpus.entry(a[2]))))
    chosen = {doc: share for _, share, doc in admitted[: settings.candidates]}

    # Stage 2: the paragraphs of the chosen memories, and of all others behind a stricter
    # gate (two shared terms when the query has two).
    fallback = len("".join(query.split())) >= settings.min_query_chars
    least = min(2, len(terms))
    found: dict[int, list[tuple[float, int, int, float]]] = {}
    for pid, (score, held, count) in corpus.paragraphs.scores(weights).items():
        owner = corpus.owners[pid]
        cover = held / mass if mass else 0.0
        if owner in chosen or (fallback and cover >= settings.body_gate and count >= least):
            found.setdefault(owner, []).append((score, corpus.starts[pid], corpus.ends[pid], cover))
    ranked: list[list[Hit]] = []
    for doc, share in chosen.items():
        entry = corpus.entry(doc)
        if found.get(doc):
            matches = sorted(found[doc], key=lambda m: (-m[0], m[1]))
            ranked.append([Hit(entry.file, s, e, share + c, "description", entry) for _, s, e, c in matches])
        else:
            end = min(entry.body_end, entry.body_start + OPENING_LINES - 1)
            ranked.append([Hit(entry.file, entry.body_start, end, share, "opening", entry)])
    for doc, matches in found.items():
        if doc not in chosen:
            entry = corpus.entry(doc)
            matches.sort(key=lambda m: (-m[0], m[1]))
            ranked.append([Hit(entry.file, s, e, c, "body", entry) for _, s, e, c in matches])

    firsts = sorted((hits[0] for hits in ranked), key=_order)
    best = firsts[0].score if firsts else 0.0
    passing = [h for h in firsts if h.score >= settings.cut * best]
    # Then each memory's further paragraphs, best first: a question whose answer is in a
    # memory's second paragraph still finds it, yet no memory takes a place from another.
    spares = sorted(
        (h._replace(first=False) for hits in ranked for h in hits[1:] if h.score >= settings.cut * best),
        key=_order,
    )
    below = [h for h in firsts if h.score < settings.cut * best]
    return Result(tuple(passing + spares), tuple(below), terms, corpus.count, settings.limit)


def _file_key(entry: Entry) -> tuple[str, str]:
    return name_key(entry.file), entry.file


def _order(hit: Hit) -> tuple[float, str, str, int]:
    return (-hit.score, name_key(hit.file), hit.file, hit.start)
