"""Words of the other language (`bilingual.py`): built from a CC-CEDICT file, used for the
terms of a question that no memory holds."""

from __future__ import annotations

import gzip
import shutil
import time
from pathlib import Path

import pytest

from sagemem.search import bilingual, lexicon, retrieve
from sagemem.search.tokenize import stem

from .memories import make

# Lines in CC-CEDICT's own format (traditional, simplified, [pinyin], /glosses/), written here.
DICTIONARY = """\
# CC-CEDICT-format lines written for these tests
發票 发票 [fa1 piao4] /invoice/receipt/bill/
部署 部署 [bu4 shu3] /to dispose/to deploy/deployment/
回滾 回滚 [hui2 gun3] /(computing) to roll back/rollback/
緩存 缓存 [huan3 cun2] /(computing) cache/buffer memory/
貓 猫 [mao1] /cat/CL:隻|只[zhi1]/
生產 生产 [sheng1 chan3] /to produce/to manufacture/production/
這是一個很長的詞 这是一个很长的词 [x] /a long headword/
"""

MEMORIES = {
    "project_发票.md": "---\ndescription: 发票放在哪里\ntype: project\n---\n\n发票存放在共享盘。\n",
    "project_deploy.md": (
        "---\ndescription: How we deploy to production\ntype: project\n---\n\nRun `make deploy`.\n"
    ),
    "user_music.md": "---\ndescription: the user's favourite bands\ntype: user\n---\n\nTelevision, Wire.\n",
}
INVOICES = "---\ndescription: invoice numbering\ntype: project\n---\n\nINV-1.\n"


@pytest.fixture
def cedict(tmp_path: Path) -> Path:
    path = tmp_path / "cedict.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(DICTIONARY)
    return path


@pytest.fixture
def bare_lexicon(tmp_path: Path, lexicon_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lexicon folder of this test's own, with the lexicon and no pairs yet."""
    folder = tmp_path / "lexicon"
    folder.mkdir()
    shutil.copy2(lexicon_dir / lexicon.NAME, folder / lexicon.NAME)
    monkeypatch.setenv("SAGEMEM_LEXICON", str(folder))
    return folder


@pytest.fixture
def with_pairs(bare_lexicon: Path, cedict: Path) -> Path:
    """A lexicon folder with the pairs built from the test dictionary."""
    assert bilingual.build(bare_lexicon / bilingual.NAME, cedict)
    return bare_lexicon


def test_the_dictionary_is_read_into_pairs_both_ways(cedict: Path) -> None:
    found = bilingual.pairs(bilingual.entries(cedict))
    assert found["发票"] == [stem("invoice"), "receipt", "bill"]
    assert found[stem("invoice")] == ["发票"] and found[stem("deploy")] == ["部署"]
    assert found["回滚"] == ["roll", "back", "rollback"]  # "(computing)" and "to" dropped
    assert found["缓存"] == [stem("cache"), "buffer", stem("memory")]
    assert "猫" not in found  # one character means too many things
    assert "这是一个很长的词" not in found and "cl" not in found and "只" not in found


def test_a_word_with_too_many_counterparts_is_left_out(cedict: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bilingual, "MAX_OTHERS", 2)
    found = bilingual.pairs(bilingual.entries(cedict))
    assert "发票" not in found and "缓存" not in found  # three counterparts each
    assert found[stem("invoice")] == ["发票"]


def test_a_question_in_english_finds_a_memory_in_chinese(tmp_path: Path, with_pairs: Path) -> None:
    store = make(tmp_path / "mem", MEMORIES)
    query = "where are the invoices kept?"
    found = store.search(query, pull=True)
    assert [h.file for h in found.hits][:1] == ["project_发票.md"]
    asked = found.query
    assert asked is not None and asked.translated == {"发票": stem("invoice")}
    assert asked.weights["发票"] <= retrieve.TRANSLATED * asked.weights[stem("invoice")] + 1e-9
    assert found.verdict is not None and found.verdict.evidence["translated"] == 1
    assert found.verdict.evidence["unheld"] == 0  # held, through its counterpart


def test_a_question_in_chinese_finds_a_memory_in_english(tmp_path: Path, with_pairs: Path) -> None:
    store = make(tmp_path / "mem", MEMORIES)
    found = store.search("怎么部署到生产环境？", pull=True)
    assert [h.file for h in found.hits][:1] == ["project_deploy.md"]
    assert found.query is not None and set(found.query.translated) >= {stem("deploy")}


def test_without_the_pairs_nothing_changes(tmp_path: Path) -> None:
    store = make(tmp_path / "mem", MEMORIES)
    found = store.search("where are the invoices kept?", pull=True)
    assert found.hits == () and found.query is not None and found.query.translated == {}


def test_a_term_a_memory_holds_is_not_translated(tmp_path: Path, with_pairs: Path) -> None:
    files = {
        **MEMORIES,
        "project_invoices.md": INVOICES,
    }
    store = make(tmp_path / "mem", files)
    found = store.search("invoice numbering", pull=True)
    assert found.query is not None and found.query.translated == {}
    assert [h.file for h in found.hits] == ["project_invoices.md"]


@pytest.mark.parametrize("seconds", [0.5, 3600])
def test_the_hook_never_builds_the_pairs(
    bare_lexicon: Path, cedict: Path, monkeypatch: pytest.MonkeyPatch, seconds: float
) -> None:
    """Whatever time a prompt's deadline leaves; a command, with no deadline, builds them."""
    monkeypatch.setattr(bilingual, "source", lambda: cedict)
    with lexicon.opened(time.monotonic() + seconds) as words:
        assert words is not None and words.bilingual is None
    assert not (bare_lexicon / bilingual.NAME).exists()
    with lexicon.opened() as words:
        assert words is not None and words.others([stem("invoice")]) == {stem("invoice"): ["发票"]}
    assert (bare_lexicon / bilingual.NAME).is_file()


def test_a_pairs_file_sagemem_did_not_write_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / bilingual.NAME
    path.write_bytes(b"not a database")
    assert bilingual.load(path) is None
    assert not bilingual.build(path, tmp_path / "missing.txt.gz")
    assert bilingual.load(path) is None


def test_the_store_answers_the_same_with_pairs_it_cannot_use(tmp_path: Path, with_pairs: Path) -> None:
    """A memory set in one language: its questions never reach the pairs."""
    store = make(tmp_path / "mem", {k: v for k, v in MEMORIES.items() if not k.endswith("发票.md")})
    found = store.search("how do we deploy to production?")
    assert [h.file for h in found.hits] == ["project_deploy.md"]
    assert found.query is not None and found.query.translated == {}


def test_one_kind_of_file_is_never_read_as_the_other(tmp_path: Path, lexicon_dir: Path, cedict: Path) -> None:
    pairs = tmp_path / bilingual.NAME
    assert bilingual.build(pairs, cedict)
    assert lexicon.load(pairs) is None  # the same format number, another table
    assert bilingual.load(lexicon_dir / lexicon.NAME) is None
    assert bilingual.load(pairs) is not None and lexicon.load(lexicon_dir / lexicon.NAME) is not None
