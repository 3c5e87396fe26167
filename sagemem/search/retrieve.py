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
    held: int = 0  # which query terms the paragraph and its memory's description hold (a mask, `Query`)

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


Key = tuple[int, int]  # a memory: its shelf, and its document in that shelf's corpus


class _Match(Record):
    """A paragraph that stage 2 let through, and what it holds: its BM25 score, lines, the
    share of the query's weight it covers, which query terms it holds (a mask, `Query`),
    alone and with its memory's description, and whether it is short."""

    bm25: float
    start: int
    end: int
    cover: float
    held: int
    with_description: int
    short: bool


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
    run = _Search(shelves, terms, vocabulary, lexicon, settings, foreign)
    chosen, described = run.admitted()
    fallback = len("".join(query.split())) >= settings.min_query_chars
    found = run.matches(chosen, described, fallback, min(shared, len(terms)), keep)
    passing, below = _by_cut(run.snippets(chosen, described, found, keep), settings.cut)
    return Result(passing, below, terms, scanned, settings.limit, run.query)


class _Search:
    """One query against the shelves: what its terms weigh, then the two stages. Which query
    terms a text holds is a mask, bit i for the i-th term of `weights` (`Query`)."""

    def __init__(
        self,
        shelves: Sequence[Shelf],
        terms: tuple[str, ...],
        vocabulary: Container[str],
        lexicon: Lexicon | None,
        settings: Settings,
        foreign: bool,
    ) -> None:
        self.shelves, self.settings = shelves, settings
        self.descriptions = _together([shelf.corpus.descriptions for shelf in shelves])
        self.paragraphs = _together([shelf.corpus.paragraphs for shelf in shelves])
        translated = _counterparts(terms, vocabulary, lexicon)
        general = lexicon.weights(terms) if lexicon is not None else {}
        general |= {other: general.get(term, 1.0) for other, term in translated.items()}
        self.described = _weights([s.corpus.descriptions for s in shelves], terms, general, translated)
        self.weights = _weights([s.corpus.paragraphs for s in shelves], terms, general, translated)
        # A counterpart stands for its term: the message's weight is that of its own terms.
        self.described_mass = sum(w for t, w in self.described.items() if t not in translated)
        self.mass = sum(w for t, w in self.weights.items() if t not in translated)
        self.bits = {term: 1 << i for i, term in enumerate(self.weights)}
        informative = sum(self.bits[t] for t in self.weights if general.get(t, 1.0) >= INFORMATIVE)
        stands = set(translated.values())
        unheld = sum(
            1
            for term in terms
            if self.bits[term] & informative and term not in vocabulary and term not in stands
        )
        # How many informative words no memory holds count against a memory (`foreign`).
        self.against = unheld if foreign else 0
        units = sum(shelf.corpus.paragraphs.documents for shelf in shelves)
        rarest = math.log(1 + (units - 0.5) / 1.5) if units > 1 else 1.0
        self.query = Query(
            terms,
            self.weights,
            {t: general.get(t, 1.0) for t in self.weights},
            informative,
            unheld,
            rarest,
            translated,
        )
        self._covers: dict[int, float] = {}

    def admitted(self) -> tuple[dict[Key, float], dict[Key, int]]:
        """Stage 1: the memories whose description fields cover enough of the query, best
        first (at most `candidates`, names breaking ties), each with its share of the query;
        and which query terms each memory's description holds, admitted or not."""
        settings, informative = self.settings, self.query.informative
        passed = []
        described: dict[Key, int] = {}
        for i, index in enumerate(self.descriptions):
            for doc, (score, weight, _, held) in index.scores(self.described).items():
                described[(i, doc)] = held
                share = weight / self.described_mass if self.described_mass else 0.0
                if share >= settings.gate and (self.against < 2 or (held & informative).bit_count() >= 2):
                    passed.append((score, share, (i, doc)))
        passed.sort(key=lambda a: -a[0])
        if len(passed) > settings.candidates:  # names break ties, so keep every tie at the edge
            edge = passed[settings.candidates - 1][0]
            passed = [a for a in passed if a[0] >= edge]
        passed.sort(key=lambda a: (-a[0], *_name_key(self.file(a[2])), self.shelves[a[2][0]].scope))
        return {key: share for _, share, key in passed[: settings.candidates]}, described

    def matches(
        self,
        chosen: Mapping[Key, float],
        described: Mapping[Key, int],
        fallback: bool,
        least: int,
        keep: int,
    ) -> dict[Key, list[_Match]]:
        """Stage 2: the paragraphs of the chosen memories, and of all others when they cover
        `body_gate` of the query and hold `least` of its terms (only if the message is long
        enough to search bodies by, `fallback`)."""
        settings, informative, mass = self.settings, self.query.informative, self.mass
        found: dict[Key, list[_Match]] = {}
        for i, index in enumerate(self.paragraphs):
            corpus = self.shelves[i].corpus
            owners, starts, ends = corpus.owners, corpus.starts, corpus.ends
            scored = index.scores(self.weights)
            if keep and len(scored) > UNITS_KEPT:
                # Thousands of units can hold a common word: the best by BM25, and every unit
                # of a memory stage 1 admitted, are the ones that can rank among the first `keep`.
                strongest = heapq.nlargest(UNITS_KEPT, scored, key=lambda pid: scored[pid][0])
                wanted = set(strongest) | {pid for pid in scored if (i, owners[pid]) in chosen}
                scored = {pid: scored[pid] for pid in wanted}
            for pid, (score, weight, count, held) in scored.items():
                owner = (i, owners[pid])
                cover = weight / mass if mass else 0.0
                # A paragraph holding an informative word counts with its memory's description:
                # the description names the thing, the paragraph the detail asked about
                # (`does the no-recap rule apply to a postmortem?`).
                together = held | described.get(owner, 0)
                if (
                    owner not in chosen
                    and together != held
                    and held & informative
                    and (self.against < 2 or (together & informative).bit_count() >= 2)
                ):
                    cover, count = self.covers(together), together.bit_count()
                if owner in chosen or (fallback and cover >= settings.body_gate and count >= least):
                    short = index.lengths[pid] < SHORT_PARAGRAPH
                    match = _Match(score, starts[pid], ends[pid], cover, held, together, short)
                    found.setdefault(owner, []).append(match)
        return found

    def snippets(
        self,
        chosen: Mapping[Key, float],
        described: Mapping[Key, int],
        found: Mapping[Key, list[_Match]],
        keep: int,
    ) -> list[list[Hit]]:
        """Each memory's snippets, its best first: the chosen memories' (scored with their
        description's share; one with no matching paragraph offers its opening lines), then
        the others' (scored on their paragraphs alone). With `keep`, only the memories that
        can rank among the first `keep` are decoded."""
        kept = _best(chosen, found, self.file, self.shelves, keep) if keep else None
        ranked: list[list[Hit]] = []
        for key, share in chosen.items():
            if kept is not None and key not in kept:
                continue
            at = self.entry(key)
            matches = sorted(found.get(key, ()), key=_strongest)
            if not matches:
                end = min(at.body_end, at.body_start + OPENING_LINES - 1)
                opening = _Match(0.0, at.body_start, end, 0.0, 0, described.get(key, 0), False)
                ranked.append([self.hit(key, at, opening, share, "opening")])
                continue
            # A further paragraph is judged on what it adds to what the description says
            # (`黄鳍紫鱼体长多少？`: the description names the fish, a paragraph its length).
            first, *further = matches
            ranked.append(
                [self.hit(key, at, first, share + first.cover, "description")]
                + [
                    self.hit(
                        key, at, m, share + max(m.cover, self.adds(m.held, described[key])), "description"
                    )
                    for m in further
                ]
            )
        for key, matches in found.items():
            if key not in chosen and (kept is None or key in kept):
                at = self.entry(key)
                ranked.append(
                    [self.hit(key, at, m, m.cover, "body") for m in sorted(matches, key=_strongest)]
                )
        return ranked

    def covers(self, held: int) -> float:
        """The share of the query's weight in the terms of `held`."""
        if held not in self._covers:
            weight = sum(w for term, w in self.weights.items() if self.bits[term] & held)
            self._covers[held] = weight / self.mass if self.mass else 0.0
        return self._covers[held]

    def adds(self, held: int, described: int) -> float:
        """The share of the query's weight that its description does not hold, held here."""
        bits = self.bits
        rest = sum(w for term, w in self.weights.items() if not bits[term] & described)
        weight = sum(w for term, w in self.weights.items() if bits[term] & held & ~described)
        return weight / rest if rest else 0.0

    def hit(self, key: Key, at: Entry, match: _Match, score: float, stage: str) -> Hit:
        scope = self.shelves[key[0]].scope
        return Hit(
            f"{scope}:{at.file}" if scope else at.file,
            match.start,
            match.end,
            score,
            stage,
            at,
            scope=scope,
            short=match.short,
            bm25=match.bm25,
            held=match.with_description,
        )

    def entry(self, key: Key) -> Entry:
        return self.shelves[key[0]].corpus.entry(key[1])

    def file(self, key: Key) -> str:
        """The memory's file name, from its row: a tie need not decode every entry."""
        return self.shelves[key[0]].corpus.file(key[1])


def _by_cut(ranked: list[list[Hit]], cut: float) -> tuple[tuple[Hit, ...], tuple[Hit, ...]]:
    """The snippets within `cut` of the best, in injection order: every memory's best
    paragraph, then the further paragraphs, best first (a question whose answer is in a
    memory's second paragraph still finds it, yet no memory takes a place from another);
    and the best paragraphs of the memories under the cut."""
    firsts = sorted((hits[0] for hits in ranked), key=_order)
    least = cut * (firsts[0].score if firsts else 0.0)
    passing = [h for h in firsts if h.score >= least]
    spares = sorted(
        (h._replace(first=False) for hits in ranked for h in hits[1:] if h.score >= least), key=_order
    )
    return tuple(passing + spares), tuple(h for h in firsts if h.score < least)


def _strongest(match: _Match) -> tuple[float, int]:
    return -match.bm25, match.start


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
    chosen: Mapping[Key, float],
    found: Mapping[Key, list[_Match]],
    file: Callable[[Key], str],
    shelves: Sequence[Shelf],
    keep: int,
) -> set[Key]:
    """The `keep` memories whose best snippet ranks first, found from the index's rows alone:
    a search with no gates matches hundreds, and only those it shows need their entries.
    Names break ties, and are read only for the memories tied at the edge."""
    scored = []
    for key in {**chosen, **found}:
        matches = found.get(key)
        top = min(matches, key=_strongest) if matches else None
        scored.append((chosen.get(key, 0.0) + (top.cover if top else 0.0), top.start if top else 0, key))
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
