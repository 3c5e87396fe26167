"""Words related in meaning (`related.py`): read from a static embedding model (a tiny
model2vec folder written here), built once by a command, used for the terms of a question
that no memory holds."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from sagemem.search import lexicon, related
from sagemem.search.tokenize import stem, stems
from sagemem.store.config import model_folder

from .memories import make

# A vector a word, chosen so that who is whose neighbour is known: deploy, release and 部署
# point one way, incident and outage another, invoice and voice a third (a look-alike pair),
# lunch a fourth, alone.
VECTORS = {
    "deploy": [1.0, 0.0, 0.0, 0.0],
    "release": [0.9, 0.1, 0.0, 0.0],
    "部署": [0.95, 0.0, 0.0, 0.05],
    "incident": [0.0, 1.0, 0.0, 0.0],
    "outage": [0.0, 0.95, 0.05, 0.0],
    "invoice": [0.0, 0.0, 1.0, 0.0],
    "voice": [0.0, 0.0, 0.99, 0.0],
    "lunch": [0.0, 0.0, 0.0, 1.0],
}
WORDS = list(VECTORS)
TERMS = [w if not w.isascii() else stem(w) for w in WORDS]
MEMORIES = {
    "project_incidents.md": (
        "---\ndescription: Incident review checklist\ntype: project\n---\n\n"
        "Every incident gets a review within two days.\n"
    ),
    "user_food.md": "---\ndescription: where the team eats\ntype: user\n---\n\nNoodles on Fridays.\n",
}


def write_model(folder: Path, vectors: dict[str, list[float]], *, quantized: bool = False) -> Path:
    """A model2vec folder: a word-level tokenizer, one row a word (`quantized`: rows shared
    through a `mapping`, each scaled by its `weights`, as model2vec's smaller models are)."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", *vectors])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.normalizer = normalizers.Lowercase()
    rows = np.array([[0.0] * 4, [0.0] * 4, *vectors.values()], np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    if quantized:  # rows stored in reverse and halved: the mapping finds them, the weights double them
        reverse = np.arange(len(rows), dtype=np.int64)[::-1].copy()
        tensors = {"embeddings": rows[::-1].copy() / 2, "mapping": reverse}
        tensors["weights"] = np.full(len(rows), 2.0, np.float32)
    else:
        tensors = {"embeddings": rows}
    save_file(tensors, str(folder / "model.safetensors"))
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec", "normalize": True}))
    return folder


@pytest.fixture
def model(tmp_path: Path) -> related.Model:
    found = related.in_folder(write_model(tmp_path / "model", VECTORS))
    assert found is not None
    return found


@pytest.fixture
def folder(tmp_path: Path, lexicon_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lexicon folder of this test's own, with the lexicon and no related words yet."""
    found = tmp_path / "lexicon"
    found.mkdir()
    shutil.copy2(lexicon_dir / lexicon.NAME, found / lexicon.NAME)
    monkeypatch.setenv("SAGEMEM_LEXICON", str(found))
    return found


@pytest.fixture
def with_model(folder: Path, model: related.Model, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny model named by SAGEMEM_MODEL, its words known as the machine's vocabulary."""
    monkeypatch.setenv("SAGEMEM_MODEL", str(model.weights.parent))
    monkeypatch.setattr(related, "vocabulary", lambda: (TERMS, WORDS))
    return folder


def test_a_word_is_the_unit_mean_of_its_tokens(model: related.Model) -> None:
    vectors, spelled = related.encoder(model)(["deploy", "Outage", "nothing-known", "deploy lunch"])
    assert np.allclose(vectors[0], [1, 0, 0, 0])
    expected = np.array([0.0, 0.95, 0.05, 0.0])
    assert np.allclose(vectors[1], expected / np.linalg.norm(expected))
    assert not vectors[2].any() and spelled[2] == frozenset()  # a word the model cannot spell
    assert np.allclose(vectors[3], np.array([1, 0, 0, 1]) / np.sqrt(2))
    assert len(spelled[3]) == 2


def test_a_quantized_model_reads_the_same(tmp_path: Path, model: related.Model) -> None:
    small = related.in_folder(write_model(tmp_path / "small", VECTORS, quantized=True))
    assert small is not None
    words = ["deploy", "outage", "部署"]
    assert np.allclose(related.encoder(small)(words)[0], related.encoder(model)(words)[0])


def test_neighbours_are_close_and_not_look_alikes(model: related.Model) -> None:
    found = related.neighbours(TERMS, WORDS, related.encoder(model))
    assert found[stem("deploy")] == ["部署", stem("release")]
    assert found["部署"] == [stem("deploy"), stem("release")]
    assert found[stem("outage")] == [stem("incident")]
    assert stem("invoice") not in found  # `voice` is as close as can be, and a look-alike
    assert stem("lunch") not in found  # nothing is closer than CLOSENESS


def test_a_question_finds_a_memory_through_a_related_word(tmp_path: Path, with_model: Path) -> None:
    store = make(tmp_path / "mem", MEMORIES)
    found = store.search("outage postmortem", pull=True)
    assert [h.file for h in found.hits] == ["project_incidents.md"]
    assert found.query is not None and found.query.translated == {stem("incident"): stem("outage")}
    assert (with_model / related.NAME).is_file()


def test_without_a_model_nothing_changes(tmp_path: Path, folder: Path) -> None:
    store = make(tmp_path / "mem", MEMORIES)
    found = store.search("outage postmortem", pull=True)
    assert found.hits == () and not (folder / related.NAME).exists()


@pytest.mark.parametrize("seconds", [0.5, 3600])
def test_the_hook_never_embeds(with_model: Path, seconds: float) -> None:
    """Whatever time a prompt's deadline leaves; a command, with no deadline, does."""
    with lexicon.opened(time.monotonic() + seconds) as words:
        assert words is not None and words.related is None
    assert not (with_model / related.NAME).exists()
    with lexicon.opened() as words:
        assert words is not None and words.others([stem("outage")]) == {stem("outage"): [stem("incident")]}
    with lexicon.opened(time.monotonic() + seconds) as words:  # built: the hook reads it
        assert words is not None and words.others([stem("outage")]) == {stem("outage"): [stem("incident")]}


def test_a_changed_model_is_embedded_again(with_model: Path, model: related.Model) -> None:
    with lexicon.opened() as words:
        assert words is not None and words.others([stem("lunch")]) == {}
    moved = {**VECTORS, "lunch": [0.0, 0.9, 0.0, 0.1]}  # lunch is now an incident
    write_model(model.weights.parent, moved)
    os.utime(model.weights, ns=(time.time_ns(), time.time_ns() + 10**9))
    with lexicon.opened() as words:
        assert words is not None and stem("incident") in words.others([stem("lunch")])[stem("lunch")]


def test_turned_off_the_words_are_neither_used_nor_kept(
    with_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with lexicon.opened() as words:
        assert words is not None and words.related is not None
    monkeypatch.setenv("SAGEMEM_MODEL", "off")
    with lexicon.opened(time.monotonic() + 3600) as words:  # the hook: not used
        assert words is not None and words.related is None
    assert (with_model / related.NAME).is_file()
    with lexicon.opened() as words:  # a command: gone, it can be built again
        assert words is not None and words.related is None
    assert not (with_model / related.NAME).exists()


def test_other_language_words_come_first(tmp_path: Path, with_model: Path) -> None:
    """The dictionary's counterparts, then the model's, each once."""
    with lexicon.opened() as words:
        assert words is not None
        words.bilingual = related.Pairs(_pairs(tmp_path / "pairs.sqlite", {stem("deploy"): ["部署", "发布"]}))
        assert words.others([stem("deploy")]) == {stem("deploy"): ["部署", "发布", stem("release")]}


def _pairs(path: Path, rows: dict[str, list[str]]):  # noqa: ANN202 - a connection, for the test
    from sagemem.search.tables import open_table, write_table

    schema = "pairs(term TEXT PRIMARY KEY, others TEXT NOT NULL)"
    assert write_table(path, 1, schema, [(k, " ".join(v)) for k, v in rows.items()])
    return open_table(path, 1, "pairs")


@pytest.mark.parametrize(
    "damage",
    [
        lambda folder: (folder / "model.safetensors").write_bytes(b"\x00" * 64),
        lambda folder: (folder / "tokenizer.json").write_text("{not json"),
        lambda folder: save_file({"other": np.zeros((2, 2), np.float32)}, str(folder / "model.safetensors")),
    ],
    ids=["weights", "tokenizer", "no-embeddings"],
)
def test_a_damaged_model_builds_nothing(tmp_path: Path, model: related.Model, damage) -> None:  # noqa: ANN001
    damage(model.weights.parent)
    path = tmp_path / related.NAME
    assert not related.build(path, model, (TERMS, WORDS))
    assert not path.exists() and list(tmp_path.glob(f".{related.NAME}*")) == []


def test_a_linked_or_incomplete_folder_is_no_model(tmp_path: Path, model: related.Model) -> None:
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "model.safetensors").symlink_to(model.weights)
    shutil.copy2(model.tokenizer, linked / "tokenizer.json")
    assert related.in_folder(linked) is None
    (tmp_path / "half").mkdir()
    shutil.copy2(model.weights, tmp_path / "half" / "model.safetensors")
    assert related.in_folder(tmp_path / "half") is None
    assert related.in_folder(tmp_path / "missing") is None


def test_a_sentence_transformers_folder_is_read(tmp_path: Path) -> None:
    write_model(tmp_path / "st" / "0_StaticEmbedding", VECTORS)
    found = related.in_folder(tmp_path / "st")
    assert found is not None and found.weights.parent.name == "0_StaticEmbedding"


def test_the_vocabulary_is_the_languages_commonest_words() -> None:
    terms, words = related.vocabulary(500)
    assert len(terms) == len(words) == len(set(terms))
    assert stem("people") in terms and "我们" in terms
    english = [w for w in words if w.isascii()]
    assert stems(english) == [t for t in terms if t.isascii()]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", (True, None)),
        ("off", (False, None)),
        ("0", (False, None)),
        ("/m/potion", (True, Path("/m/potion"))),
    ],
)
def test_the_model_setting(value: str, expected: tuple[bool, Path | None]) -> None:
    assert model_folder({"SAGEMEM_MODEL": value}) == expected
