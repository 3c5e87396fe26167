"""A value with `: ` in it and no quotes is read as the text it holds, as Claude Code reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.store.errors import InvalidMemory
from sagemem.store.frontmatter import parse, set_keys, unquoted

from .conftest import write_file

DEPLOY = (
    "---\n"
    "name: Deploy flow\n"
    "description: How code reaches prod: Actions builds the image, Argo CD syncs\n"
    "type: project\n"
    "tags: [deploy, argocd]\n"
    "---\n\n"
    "Promotion to production is a manual PR that needs one approval.\n"
)


def _store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    return store


def test_a_colon_in_a_value_is_text() -> None:
    matter = DEPLOY.split("---\n")[1]
    assert parse(matter, "x.md") == {
        "name": "Deploy flow",
        "description": "How code reaches prod: Actions builds the image, Argo CD syncs",
        "type": "project",
        "tags": ["deploy", "argocd"],
    }
    assert unquoted(matter) == [1]
    assert unquoted("name: a\ndescription: plain\n") == []


@pytest.mark.parametrize(
    "line, value",
    [
        ('description: say "hi": then go\n', 'say "hi": then go'),
        ("description: 部署流程: 见下\n", "部署流程: 见下"),
        ("description: Examples:\n", "Examples:"),
        ("description: a: b: c\r\n", "a: b: c"),
    ],
)
def test_what_the_value_holds_is_kept_exactly(line: str, value: str) -> None:
    assert parse(line, "x.md") == {"description": value}


@pytest.mark.parametrize(
    "matter, line",
    [
        ("name: x\ndescription: [unclosed\n", 4),  # a flow list stays a flow list
        ("description: a: b\nx: [\n", 4),  # a mended line does not hide another error
        ("description: a: b\n  c: d\n", 3),  # a value that goes on below is no sentence
        ('description: "a": b\n', 2),  # a quote opens YAML's own syntax
    ],
)
def test_other_errors_stay_errors_and_name_their_line(matter: str, line: int) -> None:
    with pytest.raises(InvalidMemory, match=f"not valid YAML at line {line}"):
        parse(matter, "x.md")


def test_a_memory_with_it_is_read_found_and_changed_in_place(tmp_path: Path) -> None:
    store = _store(tmp_path)
    write_file(store, "project_deploy_flow.md", DEPLOY)
    scan = store.scan()
    assert not scan.problems and [m.file for m in scan.memories] == ["project_deploy_flow.md"]
    memory = store.get("project_deploy_flow.md")
    assert memory.description.startswith("How code reaches prod: Actions")
    found = store.search("who approves promoting a build to production?")
    assert [h.file for h in found.hits] == ["project_deploy_flow.md"]

    changed = store.update("project_deploy_flow.md", expected_version=memory.version, tags=["deploy"])
    text = (store.memory_dir / "project_deploy_flow.md").read_text()
    assert "description: How code reaches prod: Actions builds the image, Argo CD syncs\n" in text
    assert "tags:\n- deploy\n" in text or "tags: [deploy]\n" in text
    assert changed.description == memory.description


def test_a_write_with_it_is_accepted_as_written(tmp_path: Path) -> None:
    store = _store(tmp_path)
    written = store.write("project_deploy_flow.md", DEPLOY, expected_version=None)
    assert written.description == "How code reaches prod: Actions builds the image, Argo CD syncs"
    assert (store.memory_dir / "project_deploy_flow.md").read_text() == DEPLOY


def test_check_gives_a_hint_not_a_problem(tmp_path: Path) -> None:
    store = _store(tmp_path)
    write_file(store, "project_deploy_flow.md", DEPLOY)
    store.rebuild_index()
    report = store.check()
    hints = [(f.check, f.file, f.line, f.severity) for f in report.findings if f.check == "unquoted-colon"]
    assert hints == [("unquoted-colon", "project_deploy_flow.md", 3, "hint")]
    assert report.problems == 0


def test_set_keys_keeps_the_unquoted_line() -> None:
    changed = set_keys(DEPLOY, {"type": "reference"}, "x.md")
    assert changed == DEPLOY.replace("type: project", "type: reference")


def test_a_line_inside_a_quoted_value_is_never_touched() -> None:
    """Only the lines YAML stops at are quoted: one inside a quoted value that goes on over
    several lines is part of that value, as YAML reads it."""
    matter = 'description: "Steps\nstep: one: two\nend"\ntype: a: b\n'
    assert parse(matter, "x.md") == {"description": "Steps step: one: two end", "type": "a: b"}
    assert unquoted(matter) == [3]


def test_a_comment_after_a_mended_value_is_a_comment() -> None:
    assert parse("description: Deploy flow: how code ships # see runbook\n", "x.md") == {
        "description": "Deploy flow: how code ships"
    }


def test_a_block_unreadable_anyway_gets_no_hint() -> None:
    assert unquoted("description: a: b\nx: [\n") == []
