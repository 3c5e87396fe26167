"""The word-frequency lexicon, and what it changes in retrieval: a common word no memory
holds no longer silences a clear question, a message about something else stays silent."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.search import lexicon, tables
from sagemem.search.tokenize import stem

from .memories import make

TEAM = {
    "project_deploy_production.md": """---
name: Deploy to production
description: How we deploy to production
type: project
---

Run `make deploy-prod` from the release tag.
""",
    "project_build_cache.md": """---
name: Build cache
description: How the build cache is invalidated
type: project
---

The cache key is the hash of the lockfile; bumping the lockfile invalidates the cache.
""",
    "reference_sentry_projects.md": """---
name: Sentry projects
description: Which Sentry projects the services report errors to
type: reference
---

The API reports to `ledger-api`; the workers report to `ledger-workers`.
""",
}


@pytest.fixture
def team(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", TEAM)


def found(store: MemoryStore, query: str) -> list[str]:
    return [h.file for h in store.search(query).hits]


@pytest.fixture
def words(lexicon_dir: Path) -> lexicon.Lexicon:
    opened = lexicon.load(lexicon_dir / lexicon.NAME)
    assert opened is not None
    return opened


def test_common_words_weigh_less_than_rare_ones(words: lexicon.Lexicon) -> None:
    got = words.weights([stem("say"), stem("process"), stem("deployment"), "istio", "pgbouncer"])
    assert got[stem("say")] == pytest.approx(lexicon.LEAST)
    assert got[stem("say")] < got[stem("process")] < got[stem("deployment")] < 1
    assert "istio" not in got and "pgbouncer" not in got  # unlisted: rare, full weight
    # Chinese words as they are: 大学 (university) is far commoner than 死因 (cause of death).
    chinese = words.weights(["大学", "死因"])
    assert chinese["大学"] < chinese["死因"] < 1


def test_a_stem_weighs_as_its_commonest_word(words: lexicon.Lexicon) -> None:
    import wordfreq

    forms = ["deploy", "deploys", "deployed", "deploying", "deployment", "deployments"]
    assert {stem(w) for w in forms} == {"deploy"}
    commonest = max(wordfreq.zipf_frequency(w, "en") for w in forms)
    assert words.weights(["deploy"])["deploy"] == pytest.approx(lexicon.weight(commonest), abs=0.01)
    assert commonest > wordfreq.zipf_frequency("deploy", "en")  # not the bare word's own


def test_weight_falls_with_frequency() -> None:
    assert lexicon.weight(2.0) == lexicon.weight(lexicon.FULL) == 1.0
    assert lexicon.weight(4.5) == pytest.approx(0.5)
    assert lexicon.weight(7.0) == lexicon.LEAST


def test_the_questions_of_a_new_user_find_their_memory(team: MemoryStore) -> None:
    for query in (
        "how do we do deployments to production?",
        "what is our deployment process?",
    ):
        assert found(team, query) == ["project_deploy_production.md"], query
        assert team.inject(query).snippets, query
    for query in ("cache invalidation", "when is the build cache invalidated"):
        assert found(team, query) == ["project_build_cache.md"], query


def test_without_the_lexicon_a_common_unknown_word_silences_the_question(
    team: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGEMEM_LEXICON", "off")
    assert found(team, "what is our deployment process?") == []


@pytest.mark.parametrize(
    "query",
    [
        "what's the weather like in Paris tomorrow?",
        # One word shared with a memory, two informative words no memory holds: about
        # something else.
        "what did a sentry do in a medieval castle?",
    ],
)
def test_messages_about_something_else_stay_silent(team: MemoryStore, query: str) -> None:
    assert found(team, query) == []
    assert not team.inject(query).snippets


def test_two_foreign_informative_words_outweigh_one_shared_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a larger directory a memory alone holding `sentry` covers enough of the message's
    weight to pass the gate; the message's two informative words no memory holds say it is
    about something else."""
    files = dict(TEAM)
    for i, word in enumerate("alpha bravo charlie delta echo foxtrot golf hotel india juliet".split() * 4):
        head = f"---\ndescription: Notes on the {word} service, batch {i}\ntype: project\n---\n"
        files[f"project_note_{i}.md"] = f"{head}\n{word} runs daily.\n"
    store = make(tmp_path / "mem", files)
    query = "what did a sentry do in a medieval castle?"
    result = store.search(query)
    assert result.hits == () and result.verdict is not None
    assert result.verdict.evidence["unheld"] == 2 and not result.verdict.inject
    assert [h.file for h in store.search(query, pull=True).hits][:1] == ["reference_sentry_projects.md"]


def test_one_unknown_word_beside_a_known_one_still_finds(team: MemoryStore) -> None:
    assert found(team, "which Sentry project gets the errors of the workers?") == [
        "reference_sentry_projects.md"
    ]


def test_a_missing_lexicon_is_built_when_there_is_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "lex #1?x é"  # a path a URI would misread unquoted
    monkeypatch.setenv("SAGEMEM_LEXICON", str(folder))
    # The prompt hook with little time left answers without it and builds nothing.
    assert lexicon.current(deadline=time.monotonic() + 0.5) is None
    assert not folder.exists()
    with lexicon.opened() as built:
        assert built is not None and built.weights([stem("process")])
    assert sorted(p.name for p in folder.iterdir()) == [lexicon.NAME]


def test_off_means_no_lexicon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMEM_LEXICON", "off")
    assert lexicon.current() is None


def test_a_lexicon_sagemem_did_not_write_is_not_read(tmp_path: Path, lexicon_dir: Path) -> None:
    path = tmp_path / lexicon.NAME
    assert lexicon.load(path) is None  # missing
    path.write_bytes(b"not a database at all")
    assert lexicon.load(path) is None
    path.unlink()
    with sqlite3.connect(path) as conn:  # another format
        conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value)")
        conn.execute("INSERT INTO meta VALUES ('format', 99)")
    assert lexicon.load(path) is None
    path.unlink()
    os.symlink(lexicon_dir / lexicon.NAME, path)  # a link is never followed
    assert lexicon.load(path) is None


def test_a_lexicon_larger_than_one_grows_is_not_read(
    lexicon_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tables, "MAX_BYTES", 1024)
    assert lexicon.load(lexicon_dir / lexicon.NAME) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_builds_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert lexicon.build(folder / lexicon.NAME) is False
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


def test_a_linked_folder_builds_nothing(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, tmp_path / "link")
    assert lexicon.build(tmp_path / "link" / lexicon.NAME) is False
    assert list(target.iterdir()) == []


def test_an_empty_lexicon_variable_is_unset(tmp_path: Path) -> None:
    """`SAGEMEM_LEXICON=` (set to nothing) is not the current folder: the lexicon is looked
    for where it would be without the variable."""
    from sagemem.store.config import lexicon_folders

    env = {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert list(lexicon_folders({**env, "SAGEMEM_LEXICON": ""})) == list(lexicon_folders(env))
    assert list(lexicon_folders({**env, "SAGEMEM_LEXICON": "  "})) == list(lexicon_folders(env))
    assert Path("") not in list(lexicon_folders({**env, "SAGEMEM_LEXICON": ""}))
    assert list(lexicon_folders({**env, "SAGEMEM_LEXICON": "off"})) == []
    assert list(lexicon_folders({**env, "SAGEMEM_LEXICON": str(tmp_path / "x")})) == [tmp_path / "x"]
