"""Every retrieval dev set at once, in one process: what a change does, per set and per kind.

    python bench/devsets.py [--shared ../shared/bench] [--sets fixtures,probe,locomo-30,cmrc]
                            [--mode inject|pull] [--json OUT] [--held-out]

The sets:

* `fixtures`: the project's own `fixtures/eval`, scored as `sagemem eval` scores it (the
  share of gold files among the first five snippets' files);
* `probe`: `probe-dev` from the shared benches, built into a temporary folder with its own
  `build.py` and scored with the rules of its `score.py` (a snippet whose header overlaps a
  gold paragraph, or that holds its text, finds it);
* `locomo-30`, `cmrc`: the shared LoCoMo conversation 30 and the CMRC 2018 trial, scored
  with the shared `evaluate.py` (dialogue markers, paragraph text);
* `locomo-41` is the set held back until the end (docs/decisions.md): it runs only with
  `--held-out`.

Each message is injected statelessly, as a session's first message would be (`--mode
inject`), or searched for on purpose as `sagemem search` does (`--mode pull`). The scorers
are imported from the shared folder, never copied, and read only the text a retriever
prints, so the figures are those the shared scripts give for the CLI, without a process
per message.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from sagemem.search import corpus as corpus_module
from sagemem.search import lexicon, retrieve
from sagemem.search.inject import inject_set, read_snippet
from sagemem.store.config import Scope, Settings

ROOT = Path(__file__).resolve().parent.parent
K = 5
DEV = ("fixtures", "probe", "locomo-30", "cmrc")
HELD_OUT = ("locomo-41",)


@dataclass
class Message:
    """One message of a set: what is asked, and how its answer is scored (None: off-topic)."""

    id: str
    query: str
    kind: str
    lang: str
    score: Callable[[str, list[Any]], dict[str, Any]] | None
    gold: tuple[str, ...] = ()  # the files that answer it


@dataclass
class DevSet:
    name: str
    memory: Path
    messages: list[Message] = field(default_factory=list)


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: cannot load it")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fixtures_set(_shared: Path, _work: Path) -> DevSet:
    folder = ROOT / "fixtures" / "eval"
    found = DevSet("fixtures", folder / "memory")
    for n, q in enumerate(_jsonl(folder / "queries.jsonl")):
        gold = {str(g) for g in q.get("gold", [])}

        def score(_text: str, hits: list[Any], gold: set[str] = gold) -> dict[str, Any]:
            files = list(dict.fromkeys(h.file for h in hits[:K]))
            return {"recall": len(gold & set(files)) / len(gold), "any": bool(gold & {h.file for h in hits})}

        kind = "off-topic" if not gold else str(q.get("kind", ""))
        found.messages.append(
            Message(
                str(q.get("id", n)),
                q["query"],
                kind,
                str(q.get("lang", "")),
                score if gold else None,
                tuple(gold),
            )
        )
    return found


def probe_set(shared: Path, work: Path) -> DevSet:
    out = work / "probe"
    subprocess.run(
        [sys.executable, str(shared / "probe-dev" / "build.py"), str(out)], check=True, capture_output=True
    )
    scorer = _module(shared / "probe-dev" / "score.py")
    memory = out / "memories"
    texts, lines_of = [], {}
    for path in sorted(memory.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        texts.append(scorer.squash(text))
        lines_of[path.name] = text.split("\n")
    counts = scorer.ngram_counts(texts)
    found = DevSet("probe", memory)
    for q in _jsonl(out / "queries.jsonl"):
        golds = []
        for g in q["gold"]:
            a, b = g["lines"]
            golds.append(scorer.Gold(g["file"], a, b, "\n".join(lines_of[g["file"]][a - 1 : b]), counts))

        def score(text: str, _hits: list[Any], golds: list[Any] = golds) -> dict[str, Any]:
            snips = scorer.split_snippets(text) if text.strip() else []
            whole = scorer.squash(text)
            top = [any(g.hit(s) for s in snips[:K]) for g in golds]
            every = [any(g.hit(s) for s in snips) or g.text_in(whole) for g in golds]
            return {"recall": sum(top) / len(golds), "any": any(every)}

        files = tuple(dict.fromkeys(g["file"] for g in q["gold"]))
        found.messages.append(Message(q["id"], q["query"], q["kind"], q["lang"], score, files))
    for q in _jsonl(out / "offtopic.jsonl"):
        found.messages.append(Message(q["id"], q["query"], "off-topic", q["lang"], None))
    return found


def bench_set(folder: str, name: str) -> Callable[[Path, Path], DevSet]:
    def load(shared: Path, _work: Path) -> DevSet:
        evaluate = _module(shared / "evaluate.py")
        bench = evaluate.Bench(str(shared / folder))
        categories = bench.meta.get("category_names", {})
        found = DevSet(name, Path(bench.memory))
        for q in bench.queries:
            category = str(q.get("category"))
            if category.startswith("offtopic"):
                found.messages.append(
                    Message(q["id"], q["query"], "off-topic", category.split("-")[-1], None)
                )
                continue

            def score(text: str, _hits: list[Any], q: dict[str, Any] = q) -> dict[str, Any]:
                got = evaluate.score_query(bench, q, text)
                return {"recall": got["R@5"], "any": got["any"]}

            kind = categories.get(category, category)
            if kind == "adversarial":
                kind = "adversarial (cat 5)"
            files = tuple(q.get("gold_files") or [q["gold_file"]])
            found.messages.append(Message(q["id"], q["query"], kind, bench.lang, score, files))
        return found

    return load


LOADERS: dict[str, Callable[[Path, Path], DevSet]] = {
    "fixtures": fixtures_set,
    "probe": probe_set,
    "locomo-30": bench_set("locomo-conv-30", "locomo-30"),
    "cmrc": bench_set("cmrc2018-trial", "cmrc"),
    "locomo-41": bench_set("locomo-conv-41", "locomo-41"),
}


def answers(
    memory: Path, work: Path, settings: Settings, mode: str
) -> Callable[[str], tuple[str, list[Any]]]:
    """A function from a message to (the text printed, the hits in order), for one set."""
    state = work / f"state-{memory.parent.name}-{memory.name}"
    corpus = corpus_module.load(memory, state, use_cache=False)
    scope = Scope("", memory, state, "eval", state / "locks")

    def inject(query: str) -> tuple[str, list[Any]]:
        injection = inject_set([scope], query, settings, corpora=[corpus])
        return injection.text, list(injection.snippets)

    def pull(query: str) -> tuple[str, list[Any]]:
        with lexicon.opened() as words:
            result = retrieve.pull(corpus, query, settings, words)
        hits = result.hits
        parts = []
        for hit in hits:
            snippet = read_snippet(memory, hit.entry, hit.start, hit.end)
            parts.append(f"### {hit.file}:{hit.start}-{hit.end}\n{snippet.text if snippet else ''}")
        return "\n\n".join(parts), list(hits)

    return inject if mode == "inject" else pull


def run(names: list[str], shared: Path, mode: str, settings: Settings) -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="sagemem-devsets-") as tmp:
        work = Path(tmp)
        for name in names:
            found = LOADERS[name](shared, work)
            answer = answers(found.memory, work, settings, mode)
            for m in found.messages:
                started = time.perf_counter()
                text, hits = answer(m.query)
                row = {
                    "set": name,
                    "id": m.id,
                    "kind": m.kind,
                    "lang": m.lang,
                    "query": m.query,
                    "bytes": len(text.encode("utf-8")),
                    "empty": not text.strip(),
                    "ms": round(1000 * (time.perf_counter() - started), 2),
                }
                if m.score is not None:
                    row.update(m.score(text, hits))
                yield row


def summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[f"{r['set']}|{r['kind']}"].append(r)
        if r["kind"] == "off-topic":
            groups[f"{r['set']}|off-topic {r['lang']}"].append(r)
        elif "cat 5" not in r["kind"]:  # LoCoMo's headline is categories 1-4
            groups[f"{r['set']}|ALL"].append(r)
    table = {}
    for key, items in sorted(groups.items()):
        on = [r for r in items if "recall" in r]
        table[key] = {
            "n": len(items),
            "R@5": _mean(r["recall"] for r in on) if on else None,
            "empty": _mean(float(r["empty"]) for r in items),
            "false": None if on else _mean(float(not r["empty"]) for r in items),
            "bytes": _mean(r["bytes"] for r in items),
        }
    return table


def _mean(values: Any) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0


def show(table: dict[str, dict[str, Any]]) -> None:
    print(f"{'set':<10} {'kind':<22} {'n':>5} {'R@5':>6} {'empty':>6} {'false':>6} {'bytes':>6}")
    for key, s in table.items():
        name, kind = key.split("|")
        r5 = f"{s['R@5']:.3f}" if s["R@5"] is not None else ""
        false = f"{100 * s['false']:.1f}%" if s["false"] is not None else ""
        print(
            f"{name:<10} {kind:<22} {s['n']:>5} {r5:>6} {100 * s['empty']:>5.1f}%"
            f" {false:>6} {s['bytes']:>6.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument("--sets", default=",".join(DEV))
    parser.add_argument("--mode", choices=("inject", "pull"), default="inject")
    parser.add_argument("--json", type=Path, help="write the summary and every message's row here")
    parser.add_argument(
        "--held-out", action="store_true", help="also run the held-back set (at the end only)"
    )
    args = parser.parse_args()
    names = [n for n in args.sets.split(",") if n] + (list(HELD_OUT) if args.held_out else [])
    unknown = [n for n in names if n not in LOADERS]
    if unknown:
        raise SystemExit(f"unknown set(s): {', '.join(unknown)}; known: {', '.join(LOADERS)}")
    if any(n in HELD_OUT for n in names) and not args.held_out:
        raise SystemExit("locomo-41 is held back: pass --held-out to run it")
    rows = list(run(names, args.shared, args.mode, Settings()))
    table = summary(rows)
    show(table)
    if args.json:
        args.json.write_text(
            json.dumps({"summary": table, "rows": rows}, ensure_ascii=False, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
