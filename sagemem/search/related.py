"""Words related in meaning (`outage` and `incident`, `payout` and `compensation`), from a
static embedding model: one vector a token, a word the mean of its tokens' vectors.

Two models are read, whichever is there: the folder `SAGEMEM_MODEL` names, a model2vec
model a person has on disk (`potion-multilingual-128M`, say: `model.safetensors` and
`tokenizer.json`, as model2vec saves them), else the English model the `wordllama` package
ships (installed with the `semantic` extra). Neither package is imported: their files are
read with numpy, safetensors and tokenizers, which never reach for the network.

Embedding words is for a command, never for a prompt hook: the commonest words of English
and Chinese (wordfreq's lists, `WORDS` of each) are embedded once per machine, and each
with its nearest few, closer than `CLOSENESS`, go into a small SQLite file beside the
lexicon (`related-v1.sqlite`, `lexicon.py`), the model it came from in its header; a
command builds it again when that model changed. A neighbour that shares a token or three
letters with the word (`voice` for `invoice`, `approx` for `approval`) is a look-alike of
its spelling, not of its meaning, and is left out. A query then costs one lookup of the
terms no memory holds, as for the other language's words (`bilingual.py`).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from ..store.config import model_folder
from ..store.records import TYPE_CHECKING, Record
from .tables import Pairs, open_table, writable, write_table
from .tokenize import STOP_EN, is_chinese, normalize, stems

if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    import numpy as np

FORMAT = 1
NAME = f"related-v{FORMAT}.sqlite"
WORDS = 20_000  # of each language, commonest first
NEIGHBOURS = 3  # kept for a word, closest first
CLOSENESS = 0.30  # cosine: below it, a neighbour is as likely noise as kin
LOOKALIKE = 3  # letters in a row two English words share that make them look-alikes
MAX_TOKENS = 4  # a word spelled with more tokens than this has no vector worth the name
MAX_MODEL_BYTES = 4 * 1024**3  # a multilingual model is about 0.5 GB
MAX_FILE_BYTES = 64 * 1024 * 1024  # tokenizer.json, config.json
BLOCK = 512  # words compared with all the others at once (a block of cosines: 60 MB)


class Model(Record):  # not a dataclass: `dataclasses` imports `inspect`, 8 ms a prompt
    """A static embedding model's files."""

    weights: Path  # safetensors: `embeddings` (model2vec) or `embedding.weight` (wordllama)
    tokenizer: Path  # a `tokenizers` JSON file
    config: Path | None = None  # model2vec's config.json

    def signature(self) -> str:
        """Which model, as it is now on disk: a changed file is another model."""
        info = self.weights.stat()
        return f"{self.weights.resolve()} {info.st_size} {info.st_mtime_ns}"


def source() -> Model | None:
    """The model this machine's related words come from: `SAGEMEM_MODEL`'s folder, else
    wordllama's, else none. `SAGEMEM_MODEL=off` turns both off."""
    on, chosen = model_folder()
    if not on:
        return None
    return in_folder(chosen) if chosen is not None else wordllama()


def in_folder(folder: Path) -> Model | None:
    """The model2vec model in `folder` (or its `0_StaticEmbedding/`, as sentence-transformers
    saves one); None when the files are not there."""
    for place in (folder, folder / "0_StaticEmbedding"):
        weights, tokenizer = place / "model.safetensors", place / "tokenizer.json"
        if _regular(weights, MAX_MODEL_BYTES) and _regular(tokenizer, MAX_FILE_BYTES):
            config = folder / "config.json"
            return Model(weights, tokenizer, config if _regular(config, MAX_FILE_BYTES) else None)
    return None


def wordllama() -> Model | None:
    """The model the `wordllama` package ships, found without importing it (its import
    configures the root logger, and its loader reaches for the network)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent
    weights = folder / "weights" / "l2_supercat_256.safetensors"
    tokenizer = folder / "tokenizers" / "l2_supercat_tokenizer_config.json"
    if _regular(weights, MAX_MODEL_BYTES) and _regular(tokenizer, MAX_FILE_BYTES):
        return Model(weights, tokenizer)
    return None


def encoder(model: Model) -> Callable[[Sequence[str]], tuple[np.ndarray, list[frozenset[int]]]]:
    """A function from words to their unit vectors (a zero row for a word the model cannot
    spell) and the tokens each was spelled with."""
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    tensors = load_file(str(model.weights))
    table = tensors.get("embeddings", tensors.get("embedding.weight"))
    if table is None or table.ndim != 2:
        raise ValueError(f"{model.weights}: no `embeddings` matrix")
    table = table.astype(np.float32)
    scale, mapping = tensors.get("weights"), tensors.get("mapping")
    tokenizer = Tokenizer.from_str(model.tokenizer.read_text(encoding="utf-8"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    vocabulary = tokenizer.get_vocab()
    # A bare word boundary says nothing about a word; a word spelled with an unknown or a
    # byte-fallback token is one the model does not know.
    boundary = {i for t, i in vocabulary.items() if t.strip("▁ Ġ") == ""}
    unknown = {i for t, i in vocabulary.items() if t.startswith("<0x") and t.endswith(">")}
    unknown |= {vocabulary[t] for t in ("[UNK]", "<unk>", "<UNK>") if t in vocabulary}
    rows = table.shape[0] if mapping is None else len(mapping)

    def encode(words: Sequence[str]) -> tuple[np.ndarray, list[frozenset[int]]]:
        vectors = np.zeros((len(words), table.shape[1]), np.float32)
        spelled: list[frozenset[int]] = []
        for i, found in enumerate(tokenizer.encode_batch(list(words), add_special_tokens=False)):
            ids = [t for t in found.ids if t not in boundary]
            # A Chinese word spelled character by character is a bag of its characters.
            lettered = len(ids) > 1 and len(ids) == len(words[i]) and is_chinese(words[i][0])
            if not ids or len(ids) > MAX_TOKENS or lettered or any(t in unknown or t >= rows for t in ids):
                spelled.append(frozenset())
                continue
            picked = table[mapping[ids]] if mapping is not None else table[ids]
            if scale is not None:
                picked = picked * scale[ids][:, None]
            vectors[i] = picked.mean(0)
            spelled.append(frozenset(ids))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms), spelled

    return encode


def vocabulary(count: int = WORDS) -> tuple[list[str], list[str]]:
    """The terms to relate, as the index holds them (English by Snowball stem, Chinese as it
    is), and for each the commonest word spelling it: `count` words of each language."""
    import wordfreq

    english = [w for w in wordfreq.top_n_list("en", count * 2) if w.isascii() and w.isalpha() and len(w) > 2]
    english = [normalize(w) for w in english if w not in STOP_EN][:count]
    chinese = [normalize(w) for w in wordfreq.top_n_list("zh", count * 2)]
    chinese = [w for w in chinese if 2 <= len(w) <= 4 and all(is_chinese(c) for c in w)][:count]
    spelled: dict[str, str] = {}
    for term, word in [*zip(stems(english), english, strict=True), *zip(chinese, chinese, strict=True)]:
        spelled.setdefault(term, word)
    return list(spelled), list(spelled.values())


def neighbours(
    terms: Sequence[str], words: Sequence[str], encode: Callable[[Sequence[str]], Any]
) -> dict[str, list[str]]:
    """Each term with its `NEIGHBOURS` closest others, closer than `CLOSENESS`, look-alikes
    left out."""
    import numpy as np

    vectors, spelled = encode(words)
    found: dict[str, list[str]] = {}
    wanted = NEIGHBOURS * 4  # room for the look-alikes dropped
    for start in range(0, len(terms), BLOCK):
        cosines = vectors[start : start + BLOCK] @ vectors.T
        best = np.argpartition(-cosines, min(wanted, len(terms) - 1), axis=1)[:, :wanted]
        for row, candidates in enumerate(best):
            i = start + row
            if not spelled[i]:
                continue
            kept: list[str] = []
            for j in sorted(candidates, key=lambda j: -cosines[row, j]):
                if len(kept) == NEIGHBOURS or cosines[row, j] < CLOSENESS:
                    break
                if j != i and spelled[j] and not _lookalike(words[i], words[j], spelled[i], spelled[j]):
                    kept.append(terms[j])
            if kept:
                found[terms[i]] = kept
    return found


def _lookalike(a: str, b: str, tokens_a: frozenset[int], tokens_b: frozenset[int]) -> bool:
    """Whether two words look alike rather than mean alike: a shared token, a shared
    character (Chinese), or `LOOKALIKE` letters in a row (English)."""
    if tokens_a & tokens_b:
        return True
    if is_chinese(a[0]) or is_chinese(b[0]):
        return bool(set(a) & set(b))
    return any(a[k : k + LOOKALIKE] in b for k in range(len(a) - LOOKALIKE + 1))


class Related(Pairs):
    """An open related-words file: `others(terms)` for the terms of one query."""

    def __init__(self, pairs: Pairs, model: str) -> None:
        super().__init__(pairs.conn)
        self.model = model


def load(path: Path) -> Related | None:
    """The related-words file at `path`, read-only; None when it is missing or not one
    sagemem wrote."""
    conn = open_table(path, FORMAT, "pairs")
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
    except sqlite3.Error:  # a damaged file: from no model anyone has
        row = None
    return Related(Pairs(conn), row[0] if row and isinstance(row[0], str) else "")


def build(path: Path, model: Model | None = None, known: tuple[list[str], list[str]] | None = None) -> bool:
    """Embed the terms `known` (terms and the words spelling them; else `vocabulary()`) with
    `model` (else `source()`) into a new file at `path` (`tables.py`). False when there is
    no model, it cannot be read, numpy, safetensors or tokenizers are missing, or the folder
    cannot be written."""
    model = model or source()
    if model is None or not writable(path):
        return False
    try:
        terms, words = known or vocabulary()
        found = neighbours(terms, words, encoder(model))
        signature = model.signature()
    except Exception:  # noqa: BLE001 - numpy, safetensors and tokenizers each raise their own
        # A model is the person's own file, but any file can be damaged: no table, no harm.
        return False
    rows = sorted((term, " ".join(others)) for term, others in found.items())
    schema = "pairs(term TEXT PRIMARY KEY, others TEXT NOT NULL)"
    return write_table(path, FORMAT, schema, rows, [("model", signature)])


def _regular(path: Path, limit: int) -> bool:
    """A regular file (no link) no larger than `limit`."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= limit
