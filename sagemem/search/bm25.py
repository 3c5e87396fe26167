"""Okapi BM25 over an inverted index, with the always-positive Lucene idf.

rank-bm25's Okapi idf, log((N - n + 0.5) / (n + 0.5)), is zero or negative for a term in
half the documents or more, which in a directory of a few dozen memories zeroes real
matches. Lucene's ln(1 + (N - n + 0.5) / (n + 0.5)) is positive for every term. Postings are
packed machine integers, so a cached index loads in one read and a query touches only the
documents that hold its terms; no numpy on the hot path.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence

from ..store.records import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any

K1 = 1.2
B = 0.75


class Index(Record):
    """Per term, its postings as packed (document id, term frequency) pairs; per document id,
    its length in tokens. `documents` and `total` are the number of documents and their summed
    length: an id may be unused (a cache reuses ids), so neither is read off `lengths`."""

    postings: Mapping[str, bytes]
    lengths: Sequence[int]
    documents: int
    total: int

    @property
    def mean_length(self) -> float:
        return self.total / self.documents if self.documents else 0.0

    def df(self, term: str) -> int:
        return len(self.postings.get(term, b"")) // (2 * array("I").itemsize)

    def idf(self, term: str) -> float:
        """Lucene idf; a term no document has gets the highest idf, as a one-off would."""
        n = self.df(term)
        return math.log(1 + (self.documents - n + 0.5) / (n + 0.5))

    def weights(self, query: Sequence[str]) -> dict[str, float]:
        """Each (deduplicated) query term's idf, computed once per query."""
        return {term: self.idf(term) for term in dict.fromkeys(query)}

    def scores(self, weights: Mapping[str, float]) -> dict[int, list[Any]]:
        """Every document holding at least one query term, as [BM25 score, idf mass of the
        query terms it holds, how many it holds, which: bit i for the i-th term of
        `weights`]. Bare lists, not objects: tens of thousands of paragraphs can hold a
        common word in a large directory.

        The idf mass over the query's whole mass is a document's coverage, in [0, 1]: unlike
        a raw BM25 score it is on the query's own scale, so one threshold works for short and
        long queries and for small and large directories."""
        acc: dict[int, list[Any]] = {}  # [float, float, int, int], mutated in place
        mean = self.mean_length or 1.0
        lengths = self.lengths
        for position, (term, idf) in enumerate(weights.items()):
            packed = self.postings.get(term)
            if not packed:
                continue
            bit = 1 << position
            pairs = array("I")
            pairs.frombytes(packed)
            it = iter(pairs)
            for doc, f in zip(it, it, strict=True):
                value = idf * f * (K1 + 1) / (f + K1 * (1 - B + B * lengths[doc] / mean))
                found = acc.get(doc)
                if found is None:
                    acc[doc] = [value, idf, 1, bit]
                else:
                    found[0] += value
                    found[1] += idf
                    found[2] += 1
                    found[3] |= bit
        return acc
