from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.search.corpus import split_paragraphs

from .memories import DANCE, make


@pytest.fixture
def dance(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", DANCE)


def files(store: MemoryStore, query: str) -> list[str]:
    return [h.file for h in store.search(query).hits]


def test_a_real_question_finds_its_memory(dance: MemoryStore) -> None:
    assert (
        files(dance, "when does the studio lease start and what is the rent?")[0]
        == "project_studio_opening.md"
    )
    assert files(dance, "周一晚上可以排舞蹈课吗")[0] == "feedback_舞蹈课.md"


@pytest.mark.parametrize(
    "query",
    [
        "how do I undo a git commit",
        "今天天气怎么样",
        "write a haiku about autumn",
        "thanks, that worked!",
        "ok",
    ],
)
def test_unrelated_messages_find_nothing(dance: MemoryStore, query: str) -> None:
    result = dance.search(query)
    assert result.hits == () and result.held_back == ()


def test_one_rare_word_gets_through(dance: MemoryStore) -> None:
    assert files(dance, "what is the kerfuffle?") == ["reference_competition_rules.md"]


def test_a_detail_only_the_body_mentions_is_found(dance: MemoryStore) -> None:
    hits = dance.search("which theatre hosts the regional final").hits
    assert hits[0].file == "reference_competition_rules.md"
    assert (hits[0].start, hits[0].end) == (11, 11)


def test_snippets_carry_line_ranges_of_the_file(dance: MemoryStore) -> None:
    hit = dance.search("salsa teacher classes").hits[0]
    assert (hit.file, hit.start, hit.end) == ("project_studio_opening.md", 12, 14)
    lines = (dance.memory_dir / hit.file).read_text().splitlines()[hit.start - 1 : hit.end]
    assert lines[0] == "## Classes" and "salsa" in lines[-1]


def test_memory_without_a_matching_paragraph_offers_its_opening(tmp_path: Path) -> None:
    store = make(
        tmp_path / "m",
        {
            "reference_ports.md": (
                "---\ndescription: local ports of the ledger API\n---\n\nSee the table.\n\nMore.\n"
            )
        },
    )
    hit = store.search("ledger api ports").hits[0]
    assert hit.stage == "opening" and (hit.start, hit.end) == (4, 7)


def test_a_long_memory_cannot_crowd_out_a_short_one(tmp_path: Path) -> None:
    long_body = "\n\n".join(
        f"Redis cache eviction note {i}: eviction policy and cache sizing." for i in range(30)
    )
    store = make(
        tmp_path / "m",
        {
            "reference_cache_notes.md": f"---\ndescription: redis cache eviction notes\n---\n\n{long_body}\n",
            "project_cache_decision.md": "---\ndescription: decision on redis cache eviction policy\n---\n\n"
            "We chose allkeys-lru for the redis cache eviction policy.\n",
        },
    )
    assert {h.file for h in store.search("redis cache eviction policy").hits[:2]} == {
        "reference_cache_notes.md",
        "project_cache_decision.md",
    }


def test_limit_and_ties_are_deterministic(tmp_path: Path) -> None:
    same = "---\ndescription: invoice export format\n---\n\nInvoices are exported as CSV.\n"
    others = {
        f"project_other{i}.md": f"---\ndescription: unrelated topic {i}\n---\n\nbody {i}\n" for i in range(12)
    }
    store = make(tmp_path / "m", {**others, **{f"reference_{c}.md": same for c in "edcbafgh"}})
    result = store.search("invoice export format csv")
    assert [h.file for h in result.hits] == [f"reference_{c}.md" for c in "abcde"]
    assert [h.file for h in result.held_back] == [f"reference_{c}.md" for c in "fgh"]
    assert store.search("invoice export format csv") == result


def test_paragraph_split() -> None:
    body = "\n# Title\n\nintro line\nsecond\n\n## Part\n```sh\nmake a\n\nmake b\n```\ntail\n\n\nlast\n"
    assert split_paragraphs(body, 5) == [
        (6, 9, "# Title\nintro line\nsecond"),
        (11, 17, "## Part\n```sh\nmake a\n\nmake b\n```\ntail"),
        (20, 20, "last"),
    ]


def test_the_gate_keeps_out_messages_that_share_a_word(
    dance: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "python classes and inheritance tutorial for beginners"
    assert dance.search(query).hits == ()
    monkeypatch.setenv("SAGEMEM_GATE", "0")
    monkeypatch.setenv("SAGEMEM_BODY_GATE", "0")
    result = dance.search(query)
    assert result.hits == ()  # its informative words no memory holds keep it out too
    assert result.verdict is not None and result.verdict.evidence["unheld"] >= 3
    assert "rare word(s) no memory holds" in result.verdict.why
    assert dance.search(query, pull=True).hits  # asked for, it still gets the best there is


def test_a_same_size_edit_with_the_mtime_put_back_is_seen(dance: MemoryStore) -> None:
    path = dance.memory_dir / "reference_competition_rules.md"
    assert [h.file for h in dance.search("kerfuffle trophy").hits] == [path.name]
    info = path.stat()
    path.write_text(path.read_text().replace("kerfuffle", "kerplunks"))  # same length
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    assert dance.search("kerfuffle trophy").hits == ()
    assert [h.file for h in dance.search("kerplunks trophy").hits] == [path.name]


def test_a_memory_with_no_body_points_at_its_frontmatter(tmp_path: Path) -> None:
    store = make(tmp_path / "m", {"project_bare.md": "---\ndescription: bare zeppelin memory\n---"})
    injection = store.inject("bare zeppelin memory")
    assert injection.snippets[0].start == 1 and injection.snippets[0].end == 3
    assert "### project_bare.md:1-3" in injection.text and "bare zeppelin memory" in injection.text


def test_two_words_find_the_memory_that_writes_them_as_one(tmp_path: Path) -> None:
    demo = Path(__file__).parent.parent / "fixtures" / "demo"
    shutil.copytree(demo, tmp_path / "demo")
    store = MemoryStore(tmp_path / "demo", tmp_path / "state")
    found = store.search("how do I roll back production after a bad deploy?").hits
    assert found and found[0].file == "project_deploy_flow.md"
    assert any(hit.start <= 22 <= hit.end for hit in found if hit.file == "project_deploy_flow.md")


def test_a_search_asked_for_returns_weak_matches_marked_as_such(dance: MemoryStore) -> None:
    from sagemem.search.retrieve import pull

    query = "what was the lease negotiation about with the bank?"  # one shared word among strangers
    assert dance.search(query).hits == ()  # the injection stays silent
    with dance.corpus() as corpus:
        weak = pull(corpus, query).hits
        strong = pull(corpus, "when does the studio lease start and what is the rent?").hits
        nothing = pull(corpus, "write a haiku about autumn").hits
    assert weak and weak[0].file == "project_studio_opening.md" and not any(h.strong for h in weak)
    assert strong[0].file == "project_studio_opening.md" and strong[0].strong
    assert nothing == ()  # no shared word: nothing, even asked


def test_a_search_asked_for_finds_one_rare_word_only_a_body_holds(tmp_path: Path) -> None:
    from sagemem.search.retrieve import pull

    review = """---
description: Decisions of the August architecture review
type: project
---

No service mesh: with a dozen services, running Istio costs more than it brings.

Kafka stays on the managed Redpanda cluster.
"""
    store = make(tmp_path / "mem", {"project_architecture_review.md": review, **DANCE})
    query = "are we planning to adopt Istio?"
    assert store.search(query).hits == ()  # one word among strangers: the injection is silent
    with store.corpus() as corpus:
        found = pull(corpus, query).hits
    assert [(h.file, h.start, h.strong) for h in found] == [("project_architecture_review.md", 6, False)]


def test_the_search_command_is_a_pull_search(dance: MemoryStore) -> None:
    import json
    import subprocess
    import sys

    query = "what was the lease negotiation about with the bank?"
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(dance.memory_dir), "search", query, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    [*hits] = json.loads(done.stdout)
    assert hits[0]["file"] == "project_studio_opening.md" and hits[0]["strong"] is False
    shown = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(dance.memory_dir), "inject", "-q", query],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == ""


def test_a_search_asked_for_gives_all_the_injection_would_and_first(dance: MemoryStore) -> None:
    from sagemem.search.retrieve import pull, search

    queries = ["when does the studio lease start and what is the rent?", "salsa teacher classes", "judges"]
    with dance.corpus() as corpus:
        for query in queries:
            pushed = search(corpus, query).hits
            pulled = pull(corpus, query).hits
            assert pulled[: len(pushed)] == tuple(h._replace(strong=True) for h in pushed), query
            assert all(h.strong for h in pulled[: len(pushed)]) and not any(
                h.strong for h in pulled[len(pushed) :]
            )


CHAT = {
    "project_chat.md": """---
name: Chat with Gina
description: Gina and Jon talk about dance styles and the studio
type: project
---

Gina: Got any favourite styles?

Jon: Contemporary is my top pick, so expressive.

Gina: What about the studio lease downtown?

Jon: Signed last week, five years.

Gina: And the opening party for the studio lease?

Line one of a long answer.
Line two.
Line three.
Line four.
Line five.
Line six.
Line seven.
""",
}


def test_a_short_paragraph_comes_with_the_one_after_it(tmp_path: Path) -> None:
    store = make(tmp_path / "mem", CHAT)
    hit = store.search("which dance styles are Gina's favourite?").hits[0]
    lines = (store.memory_dir / hit.file).read_text().splitlines()[hit.start - 1 : hit.end]
    assert lines[0] == "Gina: Got any favourite styles?"
    assert lines[-1] == "Jon: Contemporary is my top pick, so expressive."


def test_the_next_paragraph_is_not_added_when_long_or_shown_itself(tmp_path: Path) -> None:
    store = make(tmp_path / "mem", CHAT)
    hits = store.search("the studio lease downtown and the opening party").hits
    text = (store.memory_dir / "project_chat.md").read_text().splitlines()
    shown = [text[h.start - 1 : h.end] for h in hits]
    party = next(s for s in shown if s[0].startswith("Gina: And the opening party"))
    assert party == ["Gina: And the opening party for the studio lease?"]  # the next is 7 lines
    flat = [line for s in shown for line in s]
    assert len(flat) == len(set(flat))  # no line twice


def test_the_next_paragraph_ranked_past_the_limit_still_comes_along(tmp_path: Path) -> None:
    """The answer ranks too, but past the limit: it is not shown by itself, so the question
    before it brings it."""
    store = make(tmp_path / "mem", CHAT)
    query = "which dance styles are Gina's favourite, contemporary?"
    assert [h.start for h in store.search(query).ranked][:2] == [7, 9]
    (hit,) = store.search(query, limit=1).hits
    assert (hit.start, hit.end, hit.own_end) == (7, 9, 7)


FISH = {
    "reference_yellowfin.md": """---
name: Yellowfin snapper
description: The yellowfin snapper, a deep-water fish of the western Pacific
type: reference
---

The yellowfin snapper lives in the western Pacific, from the Philippines, Indonesia and
Taiwan to New Caledonia, Fiji and Samoa, over rocky bottoms at depths of 90 to 360 metres,
and looks much like its cousin the threadfin, whose last soft rays are longer.

Pale blue-red with a net of spots on the head and a golden edge to the tail fin; its
length reaches 50 centimetres. It hunts alone or in small groups in deep water, eating
smaller fish and crustaceans, and is eaten itself, though its flesh is coarse.
""",
    "reference_threadfin.md": """---
name: Threadfin
description: The threadfin, a reef fish with long trailing fin rays
type: reference
---

The threadfin's last soft fin rays trail far behind its tail.
""",
}


def test_a_further_paragraph_counts_what_it_adds_to_the_description(tmp_path: Path) -> None:
    """The description names the fish; the question's other word, its length, is only in
    the second paragraph, which a word of the first outweighed."""
    store = make(tmp_path / "mem", FISH)
    query = "yellowfin snapper western Pacific depths and length"
    hits = [(h.file, h.start) for h in store.search(query).hits]
    assert ("reference_yellowfin.md", 11) in hits


EVAL = Path(__file__).resolve().parent.parent / "fixtures" / "eval" / "memory"


def test_a_paragraph_counts_with_its_memory_s_description(tmp_path: Path) -> None:
    """In the team's 79 memories, `recap` is in one memory's name, `apply` and `postmortem`
    in one of its paragraphs: neither passes the gates alone, together they hold most of the
    question."""
    shutil.copytree(EVAL, tmp_path / "mem")
    store = MemoryStore(tmp_path / "mem")
    query = "does the no-recap rule also apply when writing a postmortem?"
    found = [(h.file, h.start, h.stage) for h in store.search(query).hits]
    assert found == [("feedback_no_trailing_summary.md", 14, "body")]
    # Named without the word, the memory's paragraph alone is not enough.
    memory = tmp_path / "mem" / "feedback_no_trailing_summary.md"
    memory.write_text(memory.read_text(encoding="utf-8").replace("No recap", "Short"), encoding="utf-8")
    assert MemoryStore(tmp_path / "mem").search(query).hits == ()
