"""basic-memory's LoCoMo retrieval suite, rebuilt on the shared LoCoMo benches.

    python bench/basic_memory_locomo.py build BENCH_DIR OUT_DIR [--layout basic-memory|spaced]
                                              [--keep-captions]
    python bench/basic_memory_locomo.py score OUT_DIR [--method sagemem-search|bm25-notes|bm25s-notes ...]
                                              [--limit 10] [--no-stopwords] [--json F]

`build` turns one shared bench (`/work/shared/bench/locomo-conv-NN`: `meta.json`,
`paragraphs.jsonl`, `queries.jsonl`, `memory/*.md`) into the corpus basic-memory's suite
indexes: `OUT_DIR/notes/*.md`, one note per LoCoMo session, `OUT_DIR/questions.jsonl` and
`OUT_DIR/suite.json`. Everything is derived at run time; the data (CC BY-NC 4.0) is never
copied into the repository, so OUT_DIR belongs outside it (a temp folder).

`score` runs each method over every question and prints session-level R@5, R@10, MRR and
empty% per LoCoMo category, for categories 1-4 (basic-memory's "official headline") and
for all questions (basic-memory's `metrics`, where its published recall@5 0.823 comes from).

What basic-memory's suite is (read, not copied)
-----------------------------------------------
The suite is `basicmachines-co/basic-memory-benchmarks` (later also vendored under
`benchmarks/` of basic-memory's monorepo): `converters/locomo_to_corpus.py` writes the
notes and `queries.json`, `scoring/retrieval.py` the metrics, `providers/bm_local.py`
queries basic-memory through its MCP tool `search_notes` (`search_type: "hybrid"`,
`page_size` = `top_k`, default 10, `RunConfig.top_k` in `models.py`). The 0.823 is in
`benchmarks/results/matrix-v1.2-summary.md`: recall@5 0.745 -> 0.823, MRR 0.618 -> 0.718
for basic-memory PR #994 (FTS revival), "full 1,986-query set", on the *corrected* LoCoMo
(the Penfield Labs audit's answers and evidence replace 156 originals).

Their note, per session (latest converter; an earlier one had no date):

    ---
    title: locomo-c00-s07 (4:33 pm on 12 July, 2023)
    type: note
    source_doc_id: locomo-c00-s07
    dataset_id: locomo
    conversation_id: locomo-c00
    session_number: 7
    session_date: 4:33 pm on 12 July, 2023
    ---

    # Chat session at 4:33 pm on 12 July, 2023

    ## Conversation
    - **Caroline:** text of the turn
    - **Melanie:** ...

Only a turn's `text` is written (no image caption); turns with empty text are skipped; the
bullets follow each other with no blank line. `locomo-cNN` is the conversation's position
in `locomo10.json` (conv-26 is c00, conv-30 c01, conv-41 c02). A question's ground truth is
the set of sessions named by its evidence ids (`D7:3` -> session 7). Metrics, per question
then averaged over every question (categories 1-5):

* recall@k = |ground truth sessions among the first k hits| / |ground truth| (0 when the
  ground truth is empty; such a question still counts in the mean);
* MRR = 1 / rank of the first hit in the ground truth, 0 if none (over the `top_k` = 10
  hits returned, so it is MRR@10).

They rank the result rows `search_notes` returns; this script ranks distinct sessions in
order of first appearance, which is the same when a search returns one row per note.

What this rebuild does the same, and what differs
-------------------------------------------------
* Same: one note per session, the name scheme (`locomo-c01-s07.md`), the frontmatter keys,
  the `# Chat session at DATE` heading, `## Conversation`, `- **Speaker:** text` bullets with
  captions dropped (`--keep-captions` keeps the shared bench's `[shares a photo: ...]`),
  ground truth from the evidence's session numbers, recall@k / MRR as above, top_k 10,
  headline over all questions plus the cat 1-4 row.
* The session date is the day only (`12 July 2023`): the shared benches keep a turn's day,
  not LoCoMo's `session_N_date_time` (`4:33 pm on 12 July, 2023`), so the time of day is
  missing from the title and heading.
* sagemem needs `name`, `description` and one of its four types: `name` is the title,
  `description` the heading's text (`Chat session at 12 July 2023`: all a basic-memory note
  says about itself; not the bench's LoCoMo session summary, which basic-memory never
  sees), `type: user` replaces `type: note`.
* Ground truth uses LoCoMo's original evidence (what the shared benches keep), not the
  audit-corrected key behind basic-memory's 0.823.
* Categories are LoCoMo's numbers with LoCoMo's names from `meta.json` (1 multi-hop,
  2 temporal, 3 open-domain, 4 single-hop, 5 adversarial). basic-memory's converter labels
  the same numbers single_hop, multi_hop, temporal, open_domain, adversarial: its
  per-category names are shifted; the numbers are the same questions.
* The shared benches hold one conversation each, so a suite here is 19 or 32 sessions and
  105 or 193 questions. basic-memory indexes the sessions of all ten conversations (some
  270) as one project and searches every question across all of them, so a question can
  also be lost to another conversation's session: its figures are harder than these and
  not comparable in size, only in kind. With 19 sessions, a random order already puts a
  one-session question's gold in the top 5 a quarter of the time (5/19).

Methods
-------
* `sagemem-search`: sagemem's pull search in process, as `sagemem --dir NOTES search Q
  --limit 10` runs it (`MemorySet.search(..., pull=True)` over the notes as a `dir` scope,
  its state dir in a temp folder, settings as the CLI reads them); sessions ranked by the
  first appearance of each file among the hits. It also reports the mean UTF-8 bytes of
  the snippets of the first five hits (each snippet as `read_snippet` shows it) and their
  sum per question.
* `bm25-notes`: plain BM25 over whole notes (the title and the body; the frontmatter
  block is not text a full-text index of the note sees), Lucene idf
  `ln(1 + (N - df + 0.5) / (df + 0.5))`, k1 = 1.2, b = 0.75, lower-case `\\w+` tokens,
  Snowball English stems (PyStemmer, the Snowball C build sagemem depends on; the pure
  Python `snowballstemmer` if PyStemmer is missing: the same algorithm), Lucene's 33
  English stop words removed (`--no-stopwords` keeps them), a query term counted as often
  as it occurs (as Lucene and bm25s sum clauses); notes scoring 0 are not returned; ties by
  file name.
* `bm25s-notes`: the same with the `bm25s` package itself (`method="lucene"`, k1 1.2,
  b 0.75, its tokenizer: `\\b\\w\\w+\\b`, stop words "en", PyStemmer English), as a cross
  check; skipped with a message when bm25s is not installed.

conv-41 is the held-out set: `score` refuses a suite built from it unless
`--allow-holdout` is given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The order of the conversations in LoCoMo's locomo10.json: basic-memory names a
# conversation `locomo-cNN` by its position there.
LOCOMO10 = (
    "conv-26",
    "conv-30",
    "conv-41",
    "conv-42",
    "conv-43",
    "conv-44",
    "conv-47",
    "conv-48",
    "conv-49",
    "conv-50",
)
HOLDOUT = frozenset({"locomo-conv-41"})
# basic-memory's CATEGORY_MAP (its labels for LoCoMo's category numbers).
BM_LABELS = {1: "single_hop", 2: "multi_hop", 3: "temporal", 4: "open_domain", 5: "adversarial"}
TOP_K = 10
KS = (5, 10)
# Lucene's classic English stop set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), which bm25s
# also uses for stopwords="en".
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
TURN = re.compile(r"^\[(D(\d+):(\d+))\] \(([^)]*)\) (.*)$", re.S)
CAPTION = re.compile(r"\s*\[shares a photo: [^\]]*\]\s*$")
SESSION_FILE = re.compile(r"^session-(\d+)-(\d{4}-\d{2}-\d{2})\.md$")
WORD = re.compile(r"\w+")
METHODS = ("sagemem-search", "bm25-notes", "bm25s-notes")


# -- build ----------------------------------------------------------------------------------


@dataclass
class Session:
    number: int
    date: str  # as the shared bench writes a turn's day: "20 January 2023"
    source: str  # the bench's memory file
    turns: list[tuple[str, str]] = field(default_factory=list)  # (speaker, text)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _conversation_id(bench_name: str) -> str:
    """`locomo-c01` for `locomo-conv-30`: basic-memory's id for the conversation."""
    sample = bench_name.removeprefix("locomo-")
    if sample in LOCOMO10:
        return f"locomo-c{LOCOMO10.index(sample):02d}"
    return f"locomo-{sample}"


def _speaker_and_text(rest: str, speakers: Sequence[str]) -> tuple[str, str]:
    """`Gina: Hey Jon!` -> (`Gina`, `Hey Jon!`), preferring the bench's known speakers."""
    for speaker in speakers:
        if rest.startswith(f"{speaker}: "):
            return speaker, rest[len(speaker) + 2 :]
    speaker, sep, text = rest.partition(": ")
    if not sep:
        raise ValueError(f"no speaker in turn: {rest[:80]!r}")
    return speaker, text


def load_sessions(bench: Path, keep_captions: bool) -> dict[int, Session]:
    """The sessions of a shared LoCoMo bench, from `memory/session-*.md` (which sessions,
    which day) and `paragraphs.jsonl` (the turns, in dialogue order)."""
    meta = json.loads((bench / "meta.json").read_text(encoding="utf-8"))
    speakers = [str(s) for s in meta.get("speakers", [])]
    sessions: dict[int, Session] = {}
    for path in sorted((bench / "memory").glob("*.md")):
        match = SESSION_FILE.match(path.name)
        if match:
            sessions[int(match.group(1))] = Session(int(match.group(1)), "", path.name)
    turns: dict[int, list[tuple[int, str, str, str]]] = {n: [] for n in sessions}
    for paragraph in _read_jsonl(bench / "paragraphs.jsonl"):
        match = TURN.match(paragraph["text"])
        if not match:
            raise ValueError(f"{paragraph['id']}: not a LoCoMo turn paragraph")
        number, index, day, rest = int(match.group(2)), int(match.group(3)), match.group(4), match.group(5)
        if number not in sessions or sessions[number].source != paragraph["file"]:
            raise ValueError(f"{paragraph['id']}: in {paragraph['file']}, not a session file of the bench")
        speaker, text = _speaker_and_text(rest, speakers)
        if not keep_captions:
            text = CAPTION.sub("", text)
        turns[number].append((index, day, speaker, text.strip()))
    for number, session in sessions.items():
        ordered = sorted(turns[number])
        days = Counter(day for _, day, _, _ in ordered)
        session.date = days.most_common(1)[0][0] if days else ""
        session.turns = [(speaker, text) for _, _, speaker, text in ordered if text]
    return sessions


def _yaml_value(value: str | int) -> str:
    """A scalar as a plain YAML value, quoted when plain would not read back the same."""
    text = str(value)
    if isinstance(value, int) or re.fullmatch(r"[A-Za-z0-9][\w .,()'-]*", text) and ": " not in text:
        return text
    return json.dumps(text, ensure_ascii=False)


def render_note(conv: str, session: Session, layout: str) -> tuple[str, str]:
    """(file name, text) of a session's note, in basic-memory's format plus the three keys
    sagemem reads (`name`, `description`, `type`)."""
    doc_id = f"{conv}-s{session.number:02d}"
    title = f"{doc_id} ({session.date})" if session.date else doc_id
    heading = f"Chat session at {session.date}" if session.date else doc_id
    front: list[tuple[str, str | int]] = [
        ("name", title),
        ("description", heading),
        ("type", "user"),
        ("title", title),
        ("source_doc_id", doc_id),
        ("dataset_id", "locomo"),
        ("conversation_id", conv),
        ("session_number", session.number),
    ]
    if session.date:
        front.append(("session_date", session.date))
    lines = ["---", *(f"{key}: {_yaml_value(value)}" for key, value in front), "---", ""]
    lines += [f"# {heading}", "", "## Conversation"]
    for speaker, text in session.turns:
        text = " ".join(text.split())
        lines.append(f"- **{speaker}:** {text}")
        if layout == "spaced":
            lines.append("")
    return f"{doc_id}.md", "\n".join(lines).rstrip() + "\n"


def build(bench: Path, out: Path, layout: str, keep_captions: bool) -> None:
    started = time.perf_counter()
    bench_name = bench.resolve().name
    meta = json.loads((bench / "meta.json").read_text(encoding="utf-8"))
    names = {int(k): str(v) for k, v in meta.get("category_names", {}).items()}
    conv = _conversation_id(bench_name)
    sessions = load_sessions(bench, keep_captions)
    notes = out / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    for old in notes.glob("*.md"):
        old.unlink()
    note_of: dict[int, str] = {}
    for number, session in sorted(sessions.items()):
        name, text = render_note(conv, session, layout)
        (notes / name).write_text(text, encoding="utf-8")
        note_of[number] = name

    questions: list[dict[str, Any]] = []
    mismatched = 0
    for query in _read_jsonl(bench / "queries.jsonl"):
        category = query.get("category")
        if not isinstance(category, int):  # the bench's off-topic queries: not LoCoMo questions
            continue
        evidence = [str(g) for g in query.get("gold", [])]
        numbers = sorted({int(m.group(1)) for g in evidence if (m := re.match(r"^D(\d+):", g))})
        gold = [note_of[n] for n in numbers if n in note_of]
        bench_gold = {sessions[n].source for n in numbers if n in sessions}
        if bench_gold != set(query.get("gold_files") or []):
            mismatched += 1
        questions.append(
            {
                "id": query["id"],
                "question": query["query"],
                "category": category,
                "category_name": names.get(category, f"cat {category}"),
                "bm_label": BM_LABELS.get(category, f"cat_{category}"),
                "gold": gold,
                "evidence": evidence,
            }
        )
    with (out / "questions.jsonl").open("w", encoding="utf-8") as f:
        for question in questions:
            f.write(json.dumps(question, ensure_ascii=False) + "\n")
    suite = {
        "bench": bench_name,
        "bench_dir": str(bench.resolve()),
        "conversation_id": conv,
        "layout": layout,
        "captions": keep_captions,
        "notes": len(note_of),
        "turns": sum(len(s.turns) for s in sessions.values()),
        "questions": len(questions),
        "questions_by_category": dict(sorted(Counter(str(q["category"]) for q in questions).items())),
        "no_gold": sum(1 for q in questions if not q["gold"]),
        "gold_differs_from_bench_gold_files": mismatched,
        "category_names": {str(k): v for k, v in sorted(names.items())},
    }
    (out / "suite.json").write_text(json.dumps(suite, indent=1) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - started
    print(
        f"built {bench_name} -> {out}: {suite['notes']} notes ({layout}), {suite['turns']} turns, "
        f"{suite['questions']} questions {suite['questions_by_category']}, "
        f"{suite['no_gold']} without gold, {mismatched} gold sets differing from the bench's "
        f"gold_files; {elapsed:.2f} s"
    )


# -- methods --------------------------------------------------------------------------------


@dataclass
class Run:
    """A method's answer to every question: the sessions in rank order, and its costs."""

    method: str
    rankings: list[list[str]]
    latencies: list[float]  # seconds per question
    setup: float  # seconds to index before the first question
    notes: str = ""
    snippet_bytes: list[list[int]] | None = None  # sagemem: bytes of each of the top-5 snippets


class Skipped(Exception):
    """A method that cannot run here (a package missing)."""


def _first_seen(files: Iterable[str], k: int) -> list[str]:
    ranked: list[str] = []
    for file in files:
        if file not in ranked:
            ranked.append(file)
            if len(ranked) == k:
                break
    return ranked


def run_sagemem(notes: Path, questions: Sequence[dict[str, Any]], limit: int) -> Run:
    from sagemem.memory_set import MemorySet
    from sagemem.search.inject import read_snippet
    from sagemem.store.config import locate_scopes

    set_vars = sorted(k for k in os.environ if k.startswith(("SAGEMEM_", "SAGE_MEM_")))
    with tempfile.TemporaryDirectory(prefix="bm-locomo-state-") as state:
        memories = MemorySet.found(locate_scopes(notes, Path(state)))
        started = time.perf_counter()
        with memories.first.corpus() as corpus:  # index the notes once, as the first search would
            indexed = corpus.count
        setup = time.perf_counter() - started
        rankings, latencies, sizes = [], [], []
        for question in questions:
            started = time.perf_counter()
            hits = memories.search(question["question"], limit=limit, pull=True).hits
            snippets = []
            for hit in hits[:5]:
                snippet = read_snippet(memories.snippet_dir(hit), hit.entry, hit.start, hit.end)
                snippets.append(len(snippet.text.encode("utf-8")) if snippet else 0)
            latencies.append(time.perf_counter() - started)
            rankings.append(_first_seen((hit.entry.file for hit in hits), limit))
            sizes.append(snippets)
    notes_text = f"{indexed} notes indexed; limit {limit}; pull search"
    if set_vars:
        notes_text += f"; environment sets {', '.join(set_vars)}"
    return Run("sagemem-search", rankings, latencies, setup, notes_text, sizes)


def _stemmer() -> tuple[Callable[[list[str]], list[str]], str]:
    try:
        import Stemmer  # type: ignore[import-not-found]  # PyStemmer: Snowball's C build

        stem = Stemmer.Stemmer("english")
        return stem.stemWords, f"PyStemmer {getattr(Stemmer, '__version__', '')}".strip()
    except ImportError:
        pass
    try:
        import snowballstemmer  # type: ignore[import-not-found]

        stemmer = snowballstemmer.stemmer("english")
        return stemmer.stemWords, "snowballstemmer"
    except ImportError as exc:
        raise Skipped("needs PyStemmer or snowballstemmer for Snowball English stems") from exc


def note_text(path: Path) -> str:
    """What a full-text index sees of a note: its title and its body (no frontmatter)."""
    text = path.read_text(encoding="utf-8")
    title, body = "", text
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            block, body = text[4:end], text[end + 5 :]
            for line in block.splitlines():
                if line.startswith("title:"):
                    title = line[len("title:") :].strip().strip('"')
    return f"{title}\n{body}"


class BM25:
    """Okapi BM25 with Lucene's idf over a handful of documents, in plain Python."""

    def __init__(self, docs: Sequence[list[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(doc) for doc in docs]
        self.lengths = [len(doc) for doc in docs]
        self.mean = sum(self.lengths) / len(docs) if docs else 0.0
        df = Counter(term for tf in self.tfs for term in tf)
        n = len(docs)
        self.idf = {term: math.log(1 + (n - d + 0.5) / (d + 0.5)) for term, d in df.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        found = [0.0] * len(self.tfs)
        for term in query:
            idf = self.idf.get(term)
            if idf is None:
                continue
            for i, tf in enumerate(self.tfs):
                f = tf.get(term, 0)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.mean)
                    found[i] += idf * f * (self.k1 + 1) / (f + norm)
        return found


def run_bm25(notes: Path, questions: Sequence[dict[str, Any]], limit: int, stopwords: bool) -> Run:
    stem_words, stemmer_name = _stemmer()
    cache: dict[str, str] = {}

    def tokens(text: str) -> list[str]:
        words = [w for w in WORD.findall(text.lower()) if not (stopwords and w in LUCENE_STOPWORDS)]
        new = [w for w in set(words) if w not in cache]
        cache.update(zip(new, stem_words(new), strict=True))
        return [cache[w] for w in words]

    started = time.perf_counter()
    files = sorted(p.name for p in notes.glob("*.md"))
    index = BM25([tokens(note_text(notes / f)) for f in files])
    setup = time.perf_counter() - started
    rankings, latencies = [], []
    for question in questions:
        started = time.perf_counter()
        scores = index.scores(tokens(question["question"]))
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], files[i]))
        rankings.append([files[i] for i in order[:limit]])
        latencies.append(time.perf_counter() - started)
    words = "Lucene stop words removed" if stopwords else "no stop words"
    return Run("bm25-notes", rankings, latencies, setup, f"{stemmer_name}; {words}; k1 1.2, b 0.75")


def run_bm25s(notes: Path, questions: Sequence[dict[str, Any]], limit: int, stopwords: bool) -> Run:
    try:
        import bm25s  # type: ignore[import-not-found]
        import Stemmer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Skipped(f"needs bm25s and PyStemmer ({exc.name} is not installed)") from exc
    stemmer = Stemmer.Stemmer("english")
    words: str | None = "en" if stopwords else None
    started = time.perf_counter()
    files = sorted(p.name for p in notes.glob("*.md"))
    corpus = bm25s.tokenize(
        [note_text(notes / f) for f in files], stopwords=words, stemmer=stemmer, show_progress=False
    )
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index(corpus, show_progress=False)
    setup = time.perf_counter() - started
    k = min(limit, len(files))
    rankings, latencies = [], []
    for question in questions:
        started = time.perf_counter()
        query = bm25s.tokenize(
            [question["question"]], stopwords=words, stemmer=stemmer, return_ids=False, show_progress=False
        )[0]
        query = [t for t in query if t in retriever.vocab_dict]
        ranked: list[str] = []
        if query:
            docs, scores = retriever.retrieve([query], k=k, show_progress=False, n_threads=1)
            ranked = [files[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
        rankings.append(ranked)
        latencies.append(time.perf_counter() - started)
    version = getattr(bm25s, "__version__", "")
    return Run(
        "bm25s-notes", rankings, latencies, setup, f"bm25s {version}; stopwords={words}; k1 1.2, b 0.75"
    )


# -- scoring --------------------------------------------------------------------------------


@dataclass
class Metrics:
    n: int
    r5: float
    r10: float
    mrr: float
    empty: float


def per_question(ranking: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """basic-memory's definitions: recall@k over the gold sessions (0 with no gold), and the
    reciprocal rank of the first gold session."""
    truth = set(gold)
    found: dict[str, float] = {}
    for k in KS:
        found[f"r{k}"] = len(truth & set(ranking[:k])) / len(truth) if truth else 0.0
    found["rr"] = next((1.0 / rank for rank, f in enumerate(ranking, 1) if f in truth), 0.0)
    found["empty"] = 0.0 if ranking else 1.0
    return found


def aggregate(rows: Sequence[dict[str, float]]) -> Metrics:
    if not rows:
        return Metrics(0, 0.0, 0.0, 0.0, 0.0)
    mean = statistics.fmean
    return Metrics(
        len(rows),
        mean(r["r5"] for r in rows),
        mean(r["r10"] for r in rows),
        mean(r["rr"] for r in rows),
        100 * mean(r["empty"] for r in rows),
    )


def summarize(run: Run, questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rows = [per_question(r, q["gold"]) for r, q in zip(run.rankings, questions, strict=True)]
    groups: dict[str, list[dict[str, float]]] = {}
    labels: dict[str, str] = {}
    for row, question in zip(rows, questions, strict=True):
        key = str(question["category"])
        groups.setdefault(key, []).append(row)
        labels[key] = f"{key} {question['category_name']}"
    table: dict[str, Metrics] = {labels[k]: aggregate(groups[k]) for k in sorted(groups)}
    table["cat 1-4"] = aggregate([r for r, q in zip(rows, questions, strict=True) if q["category"] != 5])
    table["all"] = aggregate(rows)
    latencies = sorted(run.latencies)
    summary: dict[str, Any] = {
        "method": run.method,
        "notes": run.notes,
        "table": {k: vars(v) for k, v in table.items()},
        "setup_s": run.setup,
        "total_s": sum(latencies),
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else 0.0,
        "p95_ms": 1000 * latencies[min(len(latencies) - 1, math.ceil(0.95 * len(latencies)) - 1)]
        if latencies
        else 0.0,
    }
    if run.snippet_bytes is not None:
        each = [b for sizes in run.snippet_bytes for b in sizes]
        summary["top5_snippet_bytes_mean"] = statistics.fmean(each) if each else 0.0
        summary["top5_snippet_bytes_median"] = statistics.median(each) if each else 0.0
        summary["top5_bytes_per_question_mean"] = statistics.fmean(sum(s) for s in run.snippet_bytes)
    summary["per_question"] = [
        {"id": q["id"], "ranked": r, **row} for q, r, row in zip(questions, run.rankings, rows, strict=True)
    ]
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    print(f"\n{summary['method']}  ({summary['notes']})")
    print(f"  {'category':<20} {'n':>4} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'empty%':>7}")
    for label, m in summary["table"].items():
        print(
            f"  {label:<20} {m['n']:>4} {m['r5']:>6.3f} {m['r10']:>6.3f} {m['mrr']:>6.3f} {m['empty']:>7.1f}"
        )
    print(
        f"  index {summary['setup_s']:.2f} s; queries {summary['total_s']:.2f} s, "
        f"p50 {summary['p50_ms']:.2f} ms, p95 {summary['p95_ms']:.2f} ms"
    )
    if "top5_snippet_bytes_mean" in summary:
        print(
            f"  top-5 snippets: {summary['top5_snippet_bytes_mean']:.0f} bytes each on average "
            f"(median {summary['top5_snippet_bytes_median']:.0f}), "
            f"{summary['top5_bytes_per_question_mean']:.0f} bytes per question"
        )


def score(
    out: Path, methods: Sequence[str], limit: int, stopwords: bool, json_path: Path | None, holdout: bool
) -> int:
    suite = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    if suite["bench"] in HOLDOUT and not holdout:
        print(
            f"{suite['bench']} is the held-out set: not scored (pass --allow-holdout to score it)",
            file=sys.stderr,
        )
        return 2
    questions = _read_jsonl(out / "questions.jsonl")
    notes = out / "notes"
    print(
        f"suite {suite['bench']} ({suite['conversation_id']}, layout {suite['layout']}): "
        f"{suite['notes']} notes, {len(questions)} questions, top_k {limit}"
    )
    runners: dict[str, Callable[[], Run]] = {
        "sagemem-search": lambda: run_sagemem(notes, questions, limit),
        "bm25-notes": lambda: run_bm25(notes, questions, limit, stopwords),
        "bm25s-notes": lambda: run_bm25s(notes, questions, limit, stopwords),
    }
    results = []
    for method in methods:
        try:
            summary = summarize(runners[method](), questions)
        except Skipped as exc:
            print(f"\n{method}: skipped, {exc}")
            continue
        print_summary(summary)
        results.append(summary)
    if json_path is not None:
        json_path.write_text(
            json.dumps({"suite": suite, "top_k": limit, "methods": results}, indent=1) + "\n"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("build", help="write OUT_DIR/notes, questions.jsonl and suite.json")
    b.add_argument("bench", type=Path, help="a shared LoCoMo bench, e.g. /work/shared/bench/locomo-conv-30")
    b.add_argument("out", type=Path, help="where to write the suite (outside the repository)")
    b.add_argument(
        "--layout",
        choices=("basic-memory", "spaced"),
        default="basic-memory",
        help="basic-memory: bullets one after another, as basic-memory writes them (default); "
        "spaced: a blank line after each bullet (one sagemem paragraph per turn)",
    )
    b.add_argument(
        "--keep-captions", action="store_true", help="keep the bench's [shares a photo: ...] captions"
    )
    s = commands.add_parser("score", help="run methods over every question and print the metrics")
    s.add_argument("out", type=Path)
    s.add_argument("--method", action="append", choices=METHODS, help="repeatable; default: all")
    s.add_argument(
        "--limit", type=int, default=TOP_K, help=f"hits per question (default {TOP_K}, basic-memory's top_k)"
    )
    s.add_argument("--no-stopwords", action="store_true", help="BM25 methods keep stop words")
    s.add_argument("--json", type=Path, help="write the summaries and per-question rankings here")
    s.add_argument("--allow-holdout", action="store_true", help="score a suite built from a held-out bench")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.bench, args.out, args.layout, args.keep_captions)
        return 0
    return score(
        args.out,
        args.method or list(METHODS),
        args.limit,
        not args.no_stopwords,
        args.json,
        args.allow_holdout,
    )


if __name__ == "__main__":
    sys.exit(main())
