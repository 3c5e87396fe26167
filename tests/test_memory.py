from __future__ import annotations

import datetime as dt
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagemem.store.errors import InvalidMemory
from sagemem.store.memory import parse_memory, render_new, validate_for_write

CLAUDE_STYLE = """---
name: prefers-uv
description: The user packages Python with uv, not pip
metadata:
  node_type: memory
  type: feedback
  updated: 2026-03-04
originSessionId: s-1
---
Use `uv add`.
"""


def test_fields_are_read() -> None:
    text = """---
name: Deploy
description: "How we deploy:   staging
  then prod"
type: Project
tags: [deploy, ci, "", deploy-2]
aliases:
  - ship it
  - 发布
baseline: yes
baselinePriority: "7.5"
updated: 2026-11-03
custom: {a: 1}
---
body
"""
    m = parse_memory("project_deploy.md", text.encode())
    assert m.name == "Deploy"
    assert m.description == "How we deploy: staging then prod"
    assert m.type == "project"
    assert m.tags == ("deploy", "ci", "deploy-2")
    assert m.aliases == ("ship it", "发布")
    assert m.baseline is True
    assert m.baseline_priority == 7.5
    assert m.updated == "2026-11-03"
    assert dict(m.extra) == {"custom": {"a": 1}}
    assert m.body == "body\n"
    assert m.body_line == 15
    assert m.version == hashlib.sha256(text.encode()).hexdigest()
    assert m.title == "Deploy"


def test_type_and_updated_from_metadata_block() -> None:
    m = parse_memory("feedback_uv.md", CLAUDE_STYLE.encode())
    assert m.type == "feedback"
    assert m.updated == "2026-03-04"
    assert m.extra["originSessionId"] == "s-1"
    assert m.extra["metadata"]["node_type"] == "memory"


def test_top_level_type_wins_over_metadata() -> None:
    text = CLAUDE_STYLE.replace("name: prefers-uv", "name: prefers-uv\ntype: user")
    assert parse_memory("x.md", text.encode()).type == "user"


def test_loose_tag_string_and_limits_on_read() -> None:
    tags = ", ".join(f"t{i}" for i in range(30))
    long_alias = "a" * 100
    text = f"---\ntags: {tags}\naliases: [{long_alias}]\n---\n"
    m = parse_memory("x.md", text.encode())
    assert len(m.tags) == 20 and m.tags[0] == "t0"
    assert m.aliases == ("a" * 60,)


def test_crlf_file_reads_like_lf() -> None:
    lf = CLAUDE_STYLE
    crlf = lf.replace("\n", "\r\n")
    a, b = parse_memory("x.md", lf.encode()), parse_memory("x.md", crlf.encode())
    assert (a.name, a.description, a.type, a.updated, a.body) == (
        b.name,
        b.description,
        b.type,
        b.updated,
        b.body,
    )
    assert a.version != b.version


def test_file_without_frontmatter_is_a_memory_with_empty_fields() -> None:
    m = parse_memory("notes.md", b"# Notes\nhello\n")
    assert (m.name, m.description, m.type, m.tags) == ("", "", "", ())
    assert m.title == "notes"
    assert m.body == "# Notes\nhello\n"


def test_invalid_utf8_is_reported() -> None:
    with pytest.raises(InvalidMemory, match="not valid UTF-8"):
        parse_memory("x.md", b"---\nname: \xff\n---\n")


@pytest.mark.parametrize(
    "text, rule",
    [
        ("---\ntype: journal\n---\n", "type must be one of"),
        ("---\ntags: [" + ", ".join(f"t{i}" for i in range(21)) + "]\n---\n", "tags: at most 20"),
        ("---\ntags: [" + "x" * 41 + "]\n---\n", "tags: each item at most 40"),
        ("---\naliases: [" + ", ".join(f"a{i}" for i in range(25)) + "]\n---\n", "aliases: at most 24"),
        ("---\naliases: [" + "y" * 61 + "]\n---\n", "aliases: each item at most 60"),
        ("x" * (512 * 1024 + 1), "larger than 512 KiB"),
        ("---\n- a list\n---\n", "must be a YAML mapping"),
    ],
)
def test_write_side_rules(text: str, rule: str) -> None:
    with pytest.raises(InvalidMemory, match=rule) as caught:
        validate_for_write("project_x.md", text)
    assert caught.value.file == "project_x.md"


def test_rendered_new_memory() -> None:
    text = render_new(
        name="Deploy flow",
        description="How we deploy",
        type="project",
        tags=["deploy"],
        aliases=["ship"],
        baseline=True,
        baseline_priority=3,
        updated=dt.date(2026, 1, 2),
        body="line\r\nline2",
    )
    assert text == (
        "---\nname: Deploy flow\ndescription: How we deploy\ntype: project\ntags: [deploy]\n"
        "aliases: [ship]\nbaseline: true\nbaselinePriority: 3\nupdated: 2026-01-02\n---\n\nline\nline2\n"
    )


words = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=200)
@given(
    name=words,
    description=words,
    type_=st.sampled_from(["user", "feedback", "project", "reference"]),
    tags=st.lists(words.map(lambda s: s[:40]), max_size=5),
    body=st.text(max_size=300),
)
def test_new_memory_round_trips(name: str, description: str, type_: str, tags: list[str], body: str) -> None:
    text = render_new(name=name, description=description, type=type_, tags=tags, body=body)
    m = validate_for_write("x.md", text)
    assert m.name == " ".join(name.split())
    assert m.description == " ".join(description.split())
    assert m.type == type_
    assert m.tags == tuple(t for t in (" ".join(t.split()) for t in tags) if t)
    expected_body = body.replace("\r\n", "\n").replace("\r", "\n")
    if expected_body and not expected_body.endswith("\n"):
        expected_body += "\n"
    assert m.body == "\n" + expected_body
