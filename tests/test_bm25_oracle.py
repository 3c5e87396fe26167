"""sagemem's BM25, as its persisted index computes it, against rank-bm25, the reference BM25 of
the Python ecosystem, over generated memory directories (with edits and deletions, so the
index reuses ids and keeps its statistics across updates).

rank-bm25's Okapi idf floors negative values at a share of the mean idf; sagemem uses
Lucene's ln(1 + (N - n + 0.5) / (n + 0.5)) (see bm25.py). The oracle gets that idf
substituted, and sagemem's k1, so every score must agree to rounding.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import rank_bm25
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemem import MemoryStore
from sagemem.search.bm25 import K1, B
from sagemem.search.corpus import index_file, load

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


class LuceneBM25(rank_bm25.BM25Okapi):
    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, n in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - n + 0.5) / (n + 0.5))


paragraph = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
memory = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    st.lists(paragraph, min_size=1, max_size=4),
)
directory = st.dictionaries(st.sampled_from([f"note_{i}.md" for i in range(8)]), memory, min_size=1)


def write(folder: Path, files: dict[str, tuple[str, list[str]]]) -> None:
    for name, (description, paragraphs) in files.items():
        text = f"---\ndescription: {description}\n---\n\n" + "\n\n".join(paragraphs) + "\n"
        (folder / name).write_text(text, encoding="utf-8")


def expanded(counts: dict[str, int]) -> list[str]:
    return [term for term, n in sorted(counts.items()) for _ in range(n)]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=directory, then=directory, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))
def test_index_scores_are_the_reference_bm25(
    tmp_path_factory: pytest.TempPathFactory,
    first: dict[str, tuple[str, list[str]]],
    then: dict[str, tuple[str, list[str]]],
    query: list[str],
) -> None:
    folder = tmp_path_factory.mktemp("mem")
    store = MemoryStore(folder)
    store.init()
    write(folder, first)
    load(folder, store.state_dir).close()  # indexed once, then edited, some files deleted
    for name in set(first) - set(then):
        (folder / name).unlink()
    write(folder, then)

    with load(folder, store.state_dir) as corpus, load(folder, store.state_dir) as whole:
        # What each live document holds, from the files themselves: doc ids as the index has
        # them, walked on a second corpus read whole (`corpus` reads what the query needs).
        whole.read_arrays()
        rows = corpus.connection.execute("SELECT name, doc FROM files WHERE entry IS NOT NULL")
        names = dict(rows.fetchall())
        assert set(names) == set(then)
        described, paragraphs = {}, {}
        for name, doc in names.items():
            _, (description, bodies) = index_file(name, (folder / name).read_bytes(), 0.0)
            described[doc] = expanded(description)
            pids = [p for p in range(len(whole.owners)) if whole.owners[p] == doc]
            pids.sort(key=lambda p: whole.starts[p])
            assert len(pids) == len(bodies)
            paragraphs.update({p: expanded(b) for p, b in zip(pids, bodies, strict=True)})

        terms = list(dict.fromkeys(query))
        for index, documents in ((corpus.descriptions, described), (corpus.paragraphs, paragraphs)):
            ids = sorted(documents)
            assert index.documents == len(ids) and index.total == sum(len(documents[i]) for i in ids)
            oracle = LuceneBM25([documents[i] for i in ids], k1=K1, b=B)
            expected = dict(zip(ids, oracle.get_scores(terms), strict=True))
            found = index.scores(index.weights(terms))
            for i in ids:
                got = found[i][0] if i in found else 0.0
                assert got == pytest.approx(expected[i], rel=1e-9, abs=1e-12), (i, terms)
