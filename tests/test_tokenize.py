from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sagemem.search.tokenize import (
    CJK,
    PARTICLES,
    RUNS,
    STOP_ZH,
    _content,
    _pairs,
    _stop_words,
    document_tokens,
    has_cjk,
    is_chinese,
    latin_tokens,
    normalize,
    query_tokens,
    runs,
    stem,
)


def test_english_words_are_stemmed_alike() -> None:
    forms = ["deploy", "deploys", "deployed", "deploying", "deployment", "deployments"]
    assert {stem(w) for w in forms} == {"deploy"}
    assert stem("invalidation") == stem("invalidated") == stem("invalidate")
    assert stem("queries") == stem("query")
    assert stem("running") == stem("run")
    assert stem("release") == stem("releases") == stem("released")
    assert stem("status") == "status" and stem("process") == "process"
    assert stem("v2") == "v2" and stem("数据") == "数据"  # identifiers and other scripts as they are


def test_identifiers_are_kept_whole_and_in_parts() -> None:
    assert document_tokens("ERR_42 in v2.3") == ["err_42", "err", "42", "v2.3", "v2"]
    assert document_tokens("pnpm install") == ["pnpm", stem("install")]
    assert document_tokens("deploy-staging job") == ["deploy-staging", "deploy", stem("staging"), "job"]
    assert latin_tokens("x") == []


def test_stop_words_are_dropped_in_both_languages() -> None:
    assert document_tokens("How do I use the thing?") == ["thing"]
    assert query_tokens("我们怎么样", set()) == []
    assert query_tokens("thanks, ok!", set()) == []


def test_chinese_memory_text_gets_words_and_pairs() -> None:
    tokens = document_tokens("数据库迁移的规范")
    assert {"数据库", "数据", "迁移", "规范"} <= set(tokens)
    assert "的规" not in tokens and "移的" not in tokens  # no pair holds a particle


def test_chinese_query_is_matched_against_the_vocabulary() -> None:
    vocabulary = set(document_tokens("上线前必须在预发环境跑一遍数据库迁移"))
    assert {"预发", "环境", "数据库", "迁移"} <= set(query_tokens("预发环境的数据库迁移怎么做", vocabulary))
    # Unknown characters stay as unknown terms (in pairs), so the relevance gate sees them.
    assert query_tokens("今天天气怎么样", vocabulary) == ["今天", "天气"]


def test_a_stop_phrase_does_not_eat_a_known_word() -> None:
    # 叫 is a content word (to be called): `叫什么` is no stop phrase, so `猫叫` is found.
    vocabulary = set(document_tokens("用户的猫叫芝麻。"))
    assert query_tokens("我的猫叫什么？", vocabulary) == ["猫叫"]
    # A single character left between stop words counts as nothing: not `熊猫` for `猫`.
    assert query_tokens("我的猫呢", set(document_tokens("熊猫项目的发布计划"))) == []
    assert query_tokens("你好", set(document_tokens("你好，先看文档再问"))) == []


def test_mixed_language_text() -> None:
    tokens = document_tokens("Ledgerly 的 webhook 签名失败")
    assert {stem("ledgerly"), "webhook", "签名", "失败"} <= set(tokens)
    vocabulary = set(tokens)
    assert {stem("ledgerly"), "webhook", "签名"} <= set(
        query_tokens("Ledgerly webhook 签名怎么排查", vocabulary)
    )


def test_full_width_and_case_are_normalised() -> None:
    assert document_tokens("ＡＰＩ Gateway") == ["api", "gateway"]


def test_two_query_words_the_memories_write_as_one_become_that_word() -> None:
    vocabulary = set(document_tokens("The rollback target, the dev setup; the workout, feelin' fine."))
    assert query_tokens("how do I roll back production", vocabulary) == ["rollback", stem("production")]
    assert query_tokens("set up the dev box, then work out", vocabulary) == ["setup", "dev", "box", "workout"]
    assert query_tokens("what do they feel in the store", vocabulary) == ["feel", stem("store")]
    assert query_tokens("roll back", set()) == ["roll", "back"]  # unknown compound: words stay
    assert query_tokens("roll, back", vocabulary) == ["roll", "back"]  # not adjacent
    # A stop word never starts a compound ("for me" is not "forme").
    assert query_tokens("push it for me", set(document_tokens("forme"))) == ["push"]


@settings(max_examples=500)
@given(st.text(alphabet=st.sampled_from("ab Z9_.-:/ é中文部署ｱ\u3400\uf900。，x\t"), max_size=40))
def test_runs_cut_text_exactly_as_the_full_pattern_does(text: str) -> None:
    full = re.compile(RUNS)
    chinese = re.compile(f"[{CJK}]+")
    expected = [
        (m.group(), m.start(), m.end(), bool(chinese.fullmatch(m.group()))) for m in full.finditer(text)
    ]
    assert list(runs(text)) == expected


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("ab Z9_.-:/'xdeployingThe\tＡＢé"), max_size=60))
def test_text_without_chinese_gives_the_tokens_of_its_runs(text: str) -> None:
    """The fast path for text that has no Chinese run (ASCII once normalised) gives what
    cutting it into runs does (half-width `ＡＢ` becomes ASCII; `é` takes the general path)."""
    expected = [t for piece, _, _, _ in runs(normalize(text)) for t in latin_tokens(piece)]
    assert document_tokens(text) == expected


def test_a_thank_you_is_no_question() -> None:
    from sagemem.search.tokenize import acknowledges

    for message in (
        "thanks, that worked!",
        "ok great, fixed it",
        "Perfect, works now",
        "thanks, that's it",
        "谢谢，问题解决了！",
        "搞定了，多谢",
    ):
        assert acknowledges(message), message
    for message in (
        "thanks — how do we deploy to production?",
        "ok, deploy to production",
        "great, now the rollback",  # one content word, and not an outcome: a request
        "thanks, that worked? not sure",
        "nice work on the migration",
        "work hours",
        "谢谢，但是还是不行",  # still broken: a report
        "谢谢，那部署流程呢",  # a new question
        "问题解决了",  # no thanks: a statement that may want its memory
        "ok, it did not work",  # a negation, or a question word, makes it a report or a question
        "thanks, but it is not working",
        "great, who fixed it",
    ):
        assert not acknowledges(message), message


def test_question_forms_are_no_terms() -> None:
    """`一共有几台`, `要不要`, `是用来` ask; they say nothing of what is asked about, and as
    unknown pairs they outweighed the identifier a question names."""
    vocabulary = set(document_tokens("CI runners are tagged `ldg-runner`; there are four."))
    assert query_tokens("ldg-runner 一共有几台", vocabulary) == ["ldg-runner", "ldg", "runner"]
    assert query_tokens("fx_id 是用来做什么的", vocabulary) == ["fx_id", "fx", "id"]
    assert query_tokens("LDG-5032 要不要重试", vocabulary)[-1] == "重试"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(sorted(STOP_ZH) + list("猫叫芝麻数据库的迁移是有几用来")), max_size=12))
def test_stop_words_are_cut_as_a_pattern_of_them_all_would(pieces: list[str]) -> None:
    run = "".join(pieces)
    pattern = re.compile("|".join(sorted(STOP_ZH, key=len, reverse=True)))
    assert _content(run) == [part for part in pattern.split(run) if part]
    assert _content(run) == [part for part in _stop_words().split(run) if part]  # what a build uses


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=sorted(PARTICLES) + list("猫叫芝麻数据库"), max_size=12))
def test_pairs_are_every_two_neighbours_without_a_particle(part: str) -> None:
    pairs = [part[i : i + 2] for i in range(len(part) - 1)]
    assert list(_pairs(part)) == [pair for pair in pairs if not set(pair) & PARTICLES]


def test_colloquial_question_words_are_no_terms() -> None:
    """啥 and 咋 are 什么 and 怎么 as people type them; 来着 a particle of recall."""
    vocabulary = set(document_tokens("在本地把 Ledgerly 跑起来：先装 Go 1.23。"))
    assert not any(set(token) & set("啥来着") for token in query_tokens("先要装啥来着", vocabulary))
    assert query_tokens("这个咋办", vocabulary) == []
    assert not any("啥" in token for token in document_tokens("装啥都行"))


def test_english_memories_never_load_a_chinese_segmenter(tmp_path: Path) -> None:
    """A build of English memories (identifiers, accents and numbers too) loads neither
    jieba nor rjieba: only Chinese runs are segmented."""
    memory = tmp_path / "memory"
    memory.mkdir()
    for n, body in enumerate(
        [
            "Deploy with `make deploy-prod`; roll back with make rollback.",
            "Café rules: no résumé talk, v2.3.1",
        ]
    ):
        (memory / f"project_n{n}.md").write_text(f"---\ndescription: note {n} on deploys\n---\n\n{body}\n")
    code = (
        "import sys; from pathlib import Path; from sagemem.search.corpus import load\n"
        "corpus = load(Path(sys.argv[1]), Path(sys.argv[2]), use_cache=False)\n"
        "print(corpus.count, sorted({'jieba', 'rjieba'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(memory), str(tmp_path / "state")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["2", "[]"]


@given(st.text(alphabet=st.sampled_from(list("ab Z9_-.é部署回滚，。")), max_size=40))
def test_only_chinese_runs_are_marked_for_the_segmenter(text: str) -> None:
    """`document_tokens` hands the segmenter the runs marked Chinese: they hold Chinese only."""
    for piece, start, end, chinese in runs(text):
        assert text[start:end] == piece
        if chinese:
            assert is_chinese(piece)
        else:
            assert not has_cjk(piece)
