"""List items and table rows are retrieval units, shown under their heading and lead; a search
asked for answers whenever a memory holds a word of the question."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagemem import MemoryStore
from sagemem.search import cache
from sagemem.search.corpus import Paragraph, split_units
from sagemem.search.retrieve import pull
from sagemem.search.tokenize import document_tokens

from .memories import make

RUNBOOK = """---
name: Rollback runbook
description: How to roll back a bad release of the billing service
type: project
---

# Rollback

Steps, in this order:
- freeze the deploy pipeline in Spinnaker
- page the billing on-call through Opsgenie
- run `make rollback VERSION=previous` from the release tag
  and wait for the canary to go green
  - the canary dashboard is in Grafana
- announce the rollback in #billing-status
- open a postmortem ticket in Jira within a day
- tell customer support which invoices were affected
- check that the Kafka consumer lag is back under a minute
- re-enable the pipeline once the fix is merged
- update the changelog with the reverted version
- archive the incident channel after a week

## Hosts

| env | host | owner |
|---|---|---|
| production | bill-p1.internal | Ana |
| staging | bill-s1.internal | Wei |
"""


def units(body: str) -> list[tuple[Paragraph, str]]:
    return split_units(body, 1)


def test_each_item_of_a_list_is_a_unit_with_its_heading_and_lead() -> None:
    body = (
        "# Rollback\n\nSteps:\n- freeze the pipeline\n- run make rollback\n  with care\n  - a sub-item\n"
        "- tell ops\n"
    )
    found = units(body)
    assert [u for u, _ in found] == [
        Paragraph(4, 4, 1, 3, 3),
        Paragraph(5, 7, 1, 3, 3),  # indented lines and sub-items belong to their item
        Paragraph(8, 8, 1, 3, 3),
    ]
    assert found[1][1] == "# Rollback\nSteps:\n- run make rollback\n  with care\n  - a sub-item"


def test_each_row_of_a_table_is_a_unit_under_its_header_row() -> None:
    body = "## Hosts\n\n| env | host |\n|:--|--:|\n| prod | p1 |\n| stage | s1 |\n"
    found = units(body)
    assert [u for u, _ in found] == [Paragraph(5, 5, 1, 3, 4), Paragraph(6, 6, 1, 3, 4)]
    assert found[1][1] == "## Hosts\n| env | host |\n|:--|--:|\n| stage | s1 |"


@pytest.mark.parametrize(
    "body",
    [
        "Just a paragraph\nof two lines.\n",
        "Intro:\n- one item only\n",  # one item is no list to cut
        "```\n- a code line\n- another\n```\n",  # a fence is never cut
        "| a | b |\n| c | d |\n",  # no rule under the first row: no table
    ],
)
def test_what_is_no_list_or_table_stays_one_unit(body: str) -> None:
    found = units(body)
    assert len(found) == 1 and found[0][0].context == ()


def test_items_of_a_loose_list_take_the_lead_that_ends_in_a_colon() -> None:
    body = "Before a release:\n\n- run the tests\n\n- tag the commit\n\nThat is all.\n\n- a later item\n"
    found = [u for u, _ in units(body)]
    assert found == [
        Paragraph(1, 1),
        Paragraph(3, 3, 0, 1, 1),
        Paragraph(5, 5, 0, 1, 1),
        Paragraph(7, 7),
        Paragraph(9, 9),  # a paragraph came between: no longer that list
    ]


def test_a_detail_of_a_long_list_comes_as_that_item_under_its_heading(tmp_path: Path) -> None:
    store = make(tmp_path / "m", {"project_rollback.md": RUNBOOK})
    hits = store.search("how do we roll back: which Kafka lag is fine?").hits
    assert hits, "the item that names Kafka is found"
    top = hits[0]
    assert top.start == 18  # the item, with the short one after it
    text = store.inject("how do we roll back: which Kafka lag is fine?").text
    assert "- check that the Kafka consumer lag is back under a minute" in text
    assert "# Rollback\nSteps, in this order:\n…\n" in text  # where it stands, and a gap marked
    assert "Spinnaker" not in text and "archive the incident channel" not in text  # not the list


def test_only_lines_left_out_are_marked_not_a_blank_one(tmp_path: Path) -> None:
    hosts = "---\ndescription: Where the workers run\ntype: project\n---\n\n## Hosts\n\n"
    hosts += "- alpha worker runs on p1, restarted nightly by cron at two\n- beta worker runs on s1\n"
    store = make(tmp_path / "m", {"project_hosts.md": hosts})
    assert "## Hosts\n- alpha worker" in store.inject("where does the alpha worker run?").text
    assert "## Hosts\n…\n- beta worker" in store.inject("where does the beta worker run?").text


def test_a_table_row_comes_with_its_header_row(tmp_path: Path) -> None:
    store = make(tmp_path / "m", {"project_rollback.md": RUNBOOK})
    text = store.inject("which host does the billing staging env run on?").text
    first = text.split("### ")[1]
    assert first.startswith("project_rollback.md:28-28\n")
    assert "| env | host | owner |\n|---|---|---|\n…\n| staging | bill-s1.internal | Wei |" in first
    assert "bill-p1" not in first


def test_contexts_survive_the_index_and_a_forged_one_is_refused(tmp_path: Path) -> None:
    store = make(tmp_path / "m", {"project_rollback.md": RUNBOOK})
    first = store.inject("which host does the billing staging env run on?").text
    again = store.inject("which host does the billing staging env run on?").text  # from the index
    assert again == first and "| env | host | owner |" in again
    db = store.state_dir / "cache" / cache.db_name(store.memory_dir)
    conn = sqlite3.connect(db)
    (raw,) = conn.execute("SELECT entry FROM files WHERE name = 'project_rollback.md'").fetchone()
    fields = json.loads(raw)
    assert len(fields["contexts"]) == len(fields["paragraphs"])
    sound = fields["contexts"][-1]
    fields["contexts"][-1] = [999, 0, 0]  # a heading after its row
    conn.execute("UPDATE files SET entry = ? WHERE name = 'project_rollback.md'", (json.dumps(fields),))
    conn.commit()
    conn.close()
    assert store.inject("which host does the billing staging env run on?").text == first
    conn = sqlite3.connect(db)
    (raw,) = conn.execute("SELECT entry FROM files WHERE name = 'project_rollback.md'").fetchone()
    conn.close()
    assert json.loads(raw)["contexts"][-1] == sound  # refused, and the index built again


def test_a_list_of_conversation_turns_gives_turns_not_the_session(tmp_path: Path) -> None:
    speakers = ["Gina", "Jon"]
    turns = "\n".join(f"- **{speakers[i % 2]}:** line {i} about the weather and tea" for i in range(40))
    turns += "\n- **Jon:** my studio opens on Fifth Street in March\n"
    front = "---\nname: session 3\ndescription: Chat session on 3 May\ntype: user\n---\n\n"
    session = f"{front}## Conversation\n{turns}"
    store = make(tmp_path / "m", {"user_session_03.md": session})
    with store.corpus() as corpus:
        hits = pull(corpus, "when does Jon's studio open?").hits
    assert hits[0].start == hits[0].end == 48
    shown = store.inject("when does Jon's studio open?").text
    assert "Fifth Street" in shown and len(shown.encode()) < 1200


# -- a search asked for answers whenever a memory holds a word of the question ----------------

WORDS = re.compile(r"[A-Za-z]{6,}")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    root = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
    return MemoryStore(root, state_dir=tmp_path_factory.mktemp("state"))


def _body_words(store: MemoryStore) -> list[str]:
    words = set()
    for memory in store.scan().select():
        words.update(w.lower() for w in WORDS.findall(memory.body))
    return sorted(w for w in words if document_tokens(w))  # a stop word is no word to search for


@settings(max_examples=60)
@given(data=st.data())
def test_a_search_asked_for_answers_whenever_a_memory_holds_a_word(
    demo: MemoryStore, data: st.DataObject
) -> None:
    word = data.draw(st.sampled_from(_body_words(demo)))
    chatter = data.draw(st.sampled_from(["", "hey, quick one about", "can you remind me of", "我想问一下"]))
    strangers = data.draw(st.sampled_from(["", "zorbulated quixotic flimflam", "in the medieval castle"]))
    query = f"{chatter} {word} {strangers}".strip()
    with demo.corpus() as corpus:
        hits = pull(corpus, query).hits
    assert hits, f"nothing for {query!r}"
