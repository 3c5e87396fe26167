"""Two-stage retrieval: which memories a message is about, then which paragraph of each.

A query word weighs its idf times how rare it is in the language at large (`lexicon.py`):
`towards`, `process` or `say` weigh a fifth of a word such as `tattoo` or `Istio` with the
same idf, whether or not some memory holds them.

Stage 1 scores every memory's description fields (description, name, aliases, tags, file
name words) with BM25 and admits those that cover enough of the query (`gate`): coverage is
the share of the query's weight found in the memory, so the gate is on the query's own
scale. A message with two or more informative words that no memory holds at all is about
something else, unless a memory's description holds two of its informative words. At most
`candidates` memories pass, best first.

Stage 2 ranks the body paragraphs of the admitted memories with BM25; each memory offers its
best paragraph first, and a memory with no matching paragraph offers its opening lines. The
paragraphs of all the other memories compete too, behind a stricter gate of the same kind
(`body_gate`, and two shared terms when the query has two), so a detail that only a body
mentions is found even when some description matched loosely. Such a paragraph, when it
holds an informative word, counts the terms of its memory's description with its own: the
description names the thing, the paragraph the detail asked about.

A snippet scores its memory's description coverage plus its paragraph's coverage; a
further paragraph of a memory stage 1 admitted counts, if more, the share it holds of what
the description does not (the description names the thing, the paragraph answers the rest
of the question). Every memory's best paragraph is placed before any memory's second one,
so a long memory cannot crowd out short ones; the second ones only fill places left over.
A short paragraph (a sentence or two) comes with the one after it. Snippets far below the
best one (`cut`) and those past `limit` are held back, not dropped: the injection reports
them. Ties break by file name, then scope, then line, so results are deterministic.

Several memory directories (scopes: the project's, the user's, a harness's own) are ranked
as one collection: each keeps its own index, but BM25's statistics (the number of
documents, their mean length, each term's document frequency) are summed over all of them,
so a memory scores the same whichever directory holds it, and one list comes out. With
more than one scope, a hit's `file` is named with its scope (`user:user_profile.md`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Container, Mapping, Sequence

from ..store.config import Settings
from ..store.names import name_key
from ..store.records import TYPE_CHECKING, Record
from .bm25 import Index
from .corpus import Corpus, Entry, shown
from .decide import Verdict, judge
from .tokenize import query_tokens

if TYPE_CHECKING:
    from .lexicon import Lexicon

OPENING_LINES = 6
# A paragraph of fewer tokens than this (a sentence or two: a line of a conversation, a
# question, a lead-in to a list) is shown with the paragraph after it, where the answer to
# what it raises usually is (when that one is no longer than a memory's opening).
SHORT_PARAGRAPH = 24
# A word keeping at least this share of its idf (Zipf 4.5 or rarer: `deploy`, `tattoo`, a
# name) says what a message is about; commoner ones (`process`, `towards`) hardly do.
INFORMATIVE = 0.5
# A word of the other language that stands for a query term no memory holds weighs this
# share of it, and at most this many stand for one term (`bilingual.py`).
TRANSLATED = 0.5
COUNTERPARTS = 3
# A search with no gates ranks at most this many memories past the limit: it matches
# hundreds in a large directory, and only the first few are ever shown or judged.
KEEP = 10
UNITS_KEPT = 400  # and scores at most this many units, the best by BM25, besides the admitted


class Hit(Record):
    """A snippet: lines `start`..`end` of `file`, why it was chosen, and how well it scored."""

    file: str
    start: int
    end: int
    score: float
    stage: str  # "description" (stage 1 + its best paragraph), "opening", or "body" (fallback)
    entry: Entry
    first: bool = True  # the memory's best paragraph (else a further one)
    scope: str = ""  # the scope it is in, when there are several (`file` then says it too)
    strong: bool = True  # passes the injection's gates and cut (a pull search also returns weaker hits)
    short: bool = False  # a paragraph of a sentence or two: shown with the one after it
    own_end: int = 0  # where the matched paragraph ends, when `end` takes in the one after it
    bm25: float = 0.0  # the paragraph's own BM25 score (0 for a memory's opening lines)
    held: int = 0  # which query terms the paragraph and its memory's description hold (`Query.bits`)

    @property
    def description(self) -> str:
        """What the memory's description shows: redacted as the index redacts (`corpus.shown`)."""
        return shown(self.entry.description)

    @property
    def version(self) -> str:
        return self.entry.version


class Query(Record):
    """A message as the search saw it: its terms, what each weighs (idf times its weight in
    the language), its weight in the language alone, and which of them are informative and
    which no memory holds. Bit i of a mask stands for the i-th term of `weights`."""

    terms: tuple[str, ...]
    weights: Mapping[str, float]
    general: Mapping[str, float]
    informative: int
    unheld: int  # informative terms that no memory holds
    rarest: float = 1.0  # the idf of a term that one unit holds: what weights are measured in
    translated: Mapping[str, str] = {}  # a counterpart in the other language -> the term it stands for

    def held(self, mask: int) -> list[str]:
        """The terms in `mask`."""
        return [term for i, term in enumerate(self.weights) if mask >> i & 1]


class Result(Record):
    """What a query found. `ranked`: every snippet that passed the gates and the cut, in
    injection order (every memory's best paragraph, then further paragraphs); `below`: the
    best snippets of memories that fell under the cut. `pick` applies the limit, after
    skipping what a session already has, so a snippet already shown frees its place."""

    ranked: tuple[Hit, ...]
    below: tuple[Hit, ...]
    terms: tuple[str, ...]
    scanned: int
    limit: int
    query: Query | None = None
    verdict: Verdict | None = None  # the injection's decision (`recall`, `pull`)

    def pick(self, skip: Callable[[Hit], bool] = lambda _hit: False) -> tuple[list[Hit], list[Hit]]:
        """The snippets to inject, and the memories held back: not shown, not already given,
        either past the limit or under the cut."""
        chosen = _widen([h for h in self.ranked if not skip(h)][: self.limit], skip)
        shown = {h.file for h in chosen}
        held = [h for h in self.ranked if h.first and h.file not in shown and not skip(h)]
        return chosen, held + [h for h in self.below if not skip(h)]

    @property
    def hits(self) -> tuple[Hit, ...]:
        return tuple(self.pick()[0])

    @property
    def held_back(self) -> tuple[Hit, ...]:
        return tuple(self.pick()[1])


class Shelf(Record):
    """One scope's corpus, under the name its memories are shown with ("" for a lone one)."""

    scope: str
    corpus: Corpus


class _Vocabulary:
    """The terms of every shelf: a query is cut against all of them."""

    def __init__(self, shelves: Sequence[Shelf]) -> None:
        self._shelves = shelves

    def __contains__(self, term: object) -> bool:
        return any(term in shelf.corpus.vocabulary for shelf in self._shelves)


def search(
    corpus: Corpus | Sequence[Shelf],
    query: str,
    settings: Settings | None = None,
    lexicon: Lexicon | None = None,
    *,
    shared: int = 2,
    foreign: bool = True,
    keep: int = 0,
) -> Result:
    """The ranked snippets for `query`. A paragraph of a memory stage 1 did not admit must
    hold `shared` of the query's terms (when it has that many) besides passing `body_gate`.
    `foreign` False: the informative words no memory holds do not count against a memory.
    `keep`: rank this many memories at most (0: all of them)."""
    settings = settings or Settings()
    shelves = [Shelf("", corpus)] if isinstance(corpus, Corpus) else list(corpus)
    vocabulary = shelves[0].corpus.vocabulary if len(shelves) == 1 else _Vocabulary(shelves)
    terms = tuple(dict.fromkeys(query_tokens(query, vocabulary)))
    scanned = sum(shelf.corpus.count for shelf in shelves)
    if not terms:
        return Result((), (), terms, scanned, settings.limit)
    descriptions = _together([shelf.corpus.descriptions for shelf in shelves])
    paragraphs = _together([shelf.corpus.paragraphs for shelf in shelves])
    translated = _counterparts(terms, vocabulary, lexicon)
    general = lexicon.weights(terms) if lexicon is not None else {}
    general |= {other: general.get(term, 1.0) for other, term in translated.items()}
    described = _weights([shelf.corpus.descriptions for shelf in shelves], terms, general, translated)
    weights = _weights([shelf.corpus.paragraphs for shelf in shelves], terms, general, translated)
    # A counterpart stands for its term: the message's weight is that of its own terms.
    described_mass = sum(w for t, w in described.items() if t not in translated)
    mass = sum(w for t, w in weights.items() if t not in translated)
    # Which query terms a document holds comes back as a bit mask, bit i for the i-th term.
    bits = {term: 1 << i for i, term in enumerate(weights)}
    informative = sum(bits[term] for term in weights if general.get(term, 1.0) >= INFORMATIVE)
    stands = set(translated.values())
    foreign_words = sum(
        1 for term in terms if bits[term] & informative and term not in vocabulary and term not in stands
    )
    unheld = foreign_words if foreign else 0
    units = sum(shelf.corpus.paragraphs.documents for shelf in shelves)
    rarest = math.log(1 + (units - 0.5) / 1.5) if units > 1 else 1.0
    asked = Query(
        terms,
        weights,
        {t: general.get(t, 1.0) for t in weights},
        informative,
        foreign_words,
        rarest,
        translated,
    )

    def entry(key: tuple[int, int]) -> Entry:
        return shelves[key[0]].corpus.entry(key[1])

    def named(key: tuple[int, int], found: Entry) -> str:
        scope = shelves[key[0]].scope
        return f"{scope}:{found.file}" if scope else found.file

    # Stage 1: memories whose description fields cover enough of the query.
    admitted = []
    holds: dict[tuple[int, int], int] = {}  # which query terms each memory's description holds
    for i, index in enumerate(descriptions):
        for doc, (score, held, _, which) in index.scores(described).items():
            holds[(i, doc)] = which
            share = held / described_mass if described_mass else 0.0
            if share >= settings.gate and (unheld < 2 or (which & informative).bit_count() >= 2):
                admitted.append((score, share, (i, doc), which))
    admitted.sort(key=lambda a: -a[0])
    if len(admitted) > settings.candidates:  # names break ties, so keep every tie at the edge
        edge = admitted[settings.candidates - 1][0]
        admitted = [a for a in admitted if a[0] >= edge]

    def file(key: tuple[int, int]) -> str:  # from its row: a tie need not decode every entry
        return shelves[key[0]].corpus.file(key[1])

    admitted.sort(key=lambda a: (-a[0], *_name_key(file(a[2])), shelves[a[2][0]].scope))
    chosen = {key: share for _, share, key, _ in admitted[: settings.candidates]}
    described_by = {key: which for _, _, key, which in admitted[: settings.candidates]}

    # Stage 2: the paragraphs of the chosen memories, and of all others behind a stricter
    # gate (two shared terms when the query has two).
    fallback = len("".join(query.split())) >= settings.min_query_chars
    least = min(shared, len(terms))
    found: dict[tuple[int, int], list[tuple[float, int, int, float, int]]] = {}
    short: set[tuple[tuple[int, int], int]] = set()  # (memory, first line) of short paragraphs
    evidence: dict[tuple[tuple[int, int], int], tuple[float, int]] = {}  # its BM25, the terms it holds
    shares: dict[int, float] = {}

    def weighed(which: int) -> float:
        """The share of the query's weight in the terms of `which`."""
        if which not in shares:
            held = sum(w for term, w in weights.items() if bits[term] & which)
            shares[which] = held / mass if mass else 0.0
        return shares[which]

    for i, index in enumerate(paragraphs):
        corpus_i = shelves[i].corpus
        scored = index.scores(weights)
        if keep and len(scored) > UNITS_KEPT:
            # Thousands of units can hold a common word: the best by BM25, and every unit of
            # a memory stage 1 admitted, are the ones that can rank among the first `keep`.
            owners = corpus_i.owners
            strongest = heapq.nlargest(UNITS_KEPT, scored, key=lambda pid: scored[pid][0])
            wanted = set(strongest) | {pid for pid in scored if (i, owners[pid]) in chosen}
            scored = {pid: scored[pid] for pid in wanted}
        for pid, (score, held, count, which) in scored.items():
            owner = (i, corpus_i.owners[pid])
            cover = held / mass if mass else 0.0
            # A paragraph holding an informative word counts with its memory's description:
            # the description names the thing, the paragraph the detail asked about
            # (`does the no-recap rule apply to a postmortem?`).
            both = which | holds.get(owner, 0)
            if (
                owner not in chosen
                and both != which
                and which & informative
                and (unheld < 2 or (both & informative).bit_count() >= 2)
            ):
                cover, count = weighed(both), both.bit_count()
            if owner in chosen or (fallback and cover >= settings.body_gate and count >= least):
                place = (score, corpus_i.starts[pid], corpus_i.ends[pid], cover, which)
                found.setdefault(owner, []).append(place)
                evidence[(owner, corpus_i.starts[pid])] = (score, which | holds.get(owner, 0))
                if index.lengths[pid] < SHORT_PARAGRAPH:
                    short.add((owner, corpus_i.starts[pid]))

    def hit(key: tuple[int, int], at: Entry, start: int, end: int, score: float, stage: str) -> Hit:
        bm25, held = evidence.get((key, start), (0.0, holds.get(key, 0)))
        found = Hit(
            named(key, at), start, end, score, stage, at, scope=shelves[key[0]].scope, bm25=bm25, held=held
        )
        return found._replace(short=True) if (key, start) in short else found

    def adds(which: int, described: int) -> float:
        """The share of the query's weight that its description does not hold, held here."""
        rest = sum(w for term, w in weights.items() if not bits[term] & described)
        held = sum(w for term, w in weights.items() if bits[term] & which & ~described)
        return held / rest if rest else 0.0

    kept = _best(chosen, found, file, shelves, keep) if keep else None
    ranked: list[list[Hit]] = []
    for key, share in chosen.items():
        if kept is not None and key not in kept:
            continue
        at = entry(key)
        if found.get(key):
            matches = sorted(found[key], key=lambda m: (-m[0], m[1]))
            # A further paragraph is judged on what it adds to what the description says
            # (`黄鳍紫鱼体长多少？`: the description names the fish, a paragraph its length).
            ranked.append(
                [hit(key, at, s, e, share + c, "description") for _, s, e, c, _ in matches[:1]]
                + [
                    hit(key, at, s, e, share + max(c, adds(which, described_by[key])), "description")
                    for _, s, e, c, which in matches[1:]
                ]
            )
        else:
            end = min(at.body_end, at.body_start + OPENING_LINES - 1)
            ranked.append([hit(key, at, at.body_start, end, share, "opening")])
    for key, matches in found.items():
        if key not in chosen and (kept is None or key in kept):
            at = entry(key)
            matches.sort(key=lambda m: (-m[0], m[1]))
            ranked.append([hit(key, at, s, e, c, "body") for _, s, e, c, _ in matches])

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
    return Result(tuple(passing + spares), tuple(below), terms, scanned, settings.limit, asked)


def candidates(
    corpus: Corpus | Sequence[Shelf],
    query: str,
    settings: Settings | None = None,
    lexicon: Lexicon | None = None,
    strict: Result | None = None,
    keep: int = 0,
) -> Result:
    """Every unit that holds a word of `query`, best first: those the gates pass, in the order
    `search` gives them (`strict`, when the caller has it), then every other match, from a
    search with no gates (its first `keep` memories, 0 for all). The gates order the
    candidates; `decide` says whether any of them is injected."""
    settings = settings or Settings()
    strict = strict or search(corpus, query, settings, lexicon)
    lenient = settings._replace(
        gate=0.0,
        body_gate=0.0,
        cut=0.0,
        candidates=max(settings.candidates, settings.limit),
        min_query_chars=1,
    )
    found = search(corpus, query, lenient, lexicon, shared=1, foreign=False, keep=keep)

    def shown(hit: Hit) -> bool:
        return any(s.file == hit.file and s.start <= hit.start <= s.end for s in strict.ranked)

    rest = tuple(h._replace(strong=False) for h in found.ranked if not shown(h))
    return found._replace(ranked=strict.ranked + rest, below=strict.below)


def recall(
    corpus: Corpus | Sequence[Shelf],
    query: str,
    settings: Settings | None = None,
    lexicon: Lexicon | None = None,
) -> Result:
    """What the injection gives for `query`, unasked, and why (`verdict`): when the decision
    (`decide.judge`) says the message is about the memories, what `given` takes of the
    candidates; else nothing."""
    settings = settings or Settings()
    strict = search(corpus, query, settings, lexicon)
    # What the gates pass comes first among the candidates and is what is given: the search
    # with no gates is needed only when they pass nothing.
    found = (
        strict
        if strict.ranked
        else candidates(corpus, query, settings, lexicon, strict, KEEP + settings.limit)
    )
    verdict = judge(found)
    if not verdict.inject:
        return found._replace(ranked=(), below=(), verdict=verdict)
    return given(found, settings)._replace(verdict=verdict)


def given(found: Result, settings: Settings) -> Result:
    """The candidates an injection gives, once it gives any: those the gates pass, in their
    order (they hold most of the message); when the gates pass none (a long message with one
    clear match among words no memory holds), every candidate within `cut` of the best, the
    others held back."""
    gated = tuple(h for h in found.ranked if h.strong)
    if gated:
        return found._replace(ranked=gated)
    best = found.ranked[0].score if found.ranked else 0.0
    keep = tuple(h._replace(strong=True) for h in found.ranked if h.score >= settings.cut * best)
    below = tuple(h for h in found.ranked if h.first and h.score < settings.cut * best)
    return found._replace(ranked=keep, below=below)


def pull(
    corpus: Corpus | Sequence[Shelf],
    query: str,
    settings: Settings | None = None,
    lexicon: Lexicon | None = None,
) -> Result:
    """A search asked for on purpose (a person, or the model through MCP): every candidate,
    best first, those the injection would give marked `strong`. Injection is unasked and must
    stay silent on noise; a question asked on purpose wants the best there is, to judge, and
    gets nothing only when no memory holds any of its words."""
    settings = settings or Settings()
    found = candidates(corpus, query, settings, lexicon)
    verdict = judge(found)
    chosen = given(found, settings).ranked if verdict.inject else ()
    first = {(h.file, h.start) for h in chosen}
    marked = tuple(h._replace(strong=(h.file, h.start) in first) for h in found.ranked)
    return found._replace(ranked=marked, verdict=verdict)


def _best(
    chosen: Mapping[tuple[int, int], float],
    found: Mapping[tuple[int, int], list[tuple[float, int, int, float, int]]],
    file: Callable[[tuple[int, int]], str],
    shelves: Sequence[Shelf],
    keep: int,
) -> set[tuple[int, int]]:
    """The `keep` memories whose best snippet ranks first, found from the index's rows alone:
    a search with no gates matches hundreds, and only those it shows need their entries.
    Names break ties, and are read only for the memories tied at the edge."""
    scored = []
    for key in {**chosen, **found}:
        matches = found.get(key)
        top = min(matches, key=lambda m: (-m[0], m[1])) if matches else None
        scored.append((chosen.get(key, 0.0) + (top[3] if top else 0.0), top[1] if top else 0, key))
    if len(scored) <= keep:
        return {key for _, _, key in scored}
    scored.sort(key=lambda s: -s[0])
    edge = scored[keep - 1][0]
    kept = {key for score, _, key in scored if score > edge}
    tied = [
        (name_key(file(key)), file(key), shelves[key[0]].scope, start, key)
        for score, start, key in scored
        if score == edge
    ]
    tied.sort(key=lambda t: t[:4])
    return kept | {t[-1] for t in tied[: keep - len(kept)]}


def _widen(hits: list[Hit], skip: Callable[[Hit], bool]) -> list[Hit]:
    """Each short paragraph with the one after it, unless that one is shown by itself among
    `hits` (what is injected, not what is ranked past the limit) or was given before."""
    shown = {(h.file, h.start) for h in hits}
    widened = []
    for found in hits:
        after = next((p for p in found.entry.paragraphs if p.start > found.end), None)
        if (
            found.short
            and after
            and after.end - after.start < OPENING_LINES
            and (found.file, after.start) not in shown
            and not skip(found._replace(start=after.start, end=after.end))
        ):
            found = found._replace(end=after.end, own_end=found.end)
        widened.append(found)
    return widened


def _together(indexes: list[Index]) -> list[Index]:
    """Each index with the statistics of all of them: lengths are compared with the mean
    length over every scope."""
    if len(indexes) == 1:
        return indexes
    documents = sum(index.documents for index in indexes)
    total = sum(index.total for index in indexes)
    return [index._replace(documents=documents, total=total) for index in indexes]


def _weights(
    indexes: list[Index],
    terms: Sequence[str],
    general: Mapping[str, float],
    translated: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Each query term's idf over every scope (as `Index.idf`, with the counts summed), times
    its weight in the language; then each counterpart (`translated`), at `TRANSLATED` of the
    smaller of its own weight (its idf, times its term's weight in the language) and its
    term's, shared among its term's counterparts."""
    translated = translated or {}
    wanted = [*terms, *translated]
    if len(indexes) == 1:
        found = indexes[0].weights(wanted)
    else:
        documents = sum(index.documents for index in indexes)
        found = {}
        for term in dict.fromkeys(wanted):
            n = sum(index.df(term) for index in indexes)
            found[term] = math.log(1 + (documents - n + 0.5) / (n + 0.5))
    weights = {term: found[term] * general.get(term, 1.0) for term in dict.fromkeys(terms)}
    shares: dict[str, int] = {}
    for term in translated.values():
        shares[term] = shares.get(term, 0) + 1
    for other, term in translated.items():
        own = found[other] * general.get(other, 1.0)
        weights[other] = TRANSLATED * min(own, weights[term]) / shares[term]
    return weights


def _counterparts(
    terms: Sequence[str], vocabulary: Container[str], lexicon: Lexicon | None
) -> dict[str, str]:
    """For each term no memory holds, its counterparts in the other language that some memory
    holds (`bilingual.py`), at most `COUNTERPARTS` of them: counterpart -> term."""
    missing = [term for term in terms if term not in vocabulary]
    if lexicon is None or not missing:
        return {}
    asked, found = set(terms), {}
    for term, others in lexicon.others(missing).items():
        held = 0
        for other in others:
            if held < COUNTERPARTS and other not in asked and other not in found and other in vocabulary:
                found[other] = term
                held += 1
    return found


def _name_key(name: str) -> tuple[str, str]:
    return name_key(name), name


def _order(hit: Hit) -> tuple[float, str, str, str, int]:
    """Best first; ties by the file's own name, then its scope: the same order however the
    memories are dealt into scopes."""
    return (-hit.score, name_key(hit.entry.file), hit.entry.file, hit.scope, hit.start)
