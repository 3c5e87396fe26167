"""Conflict markers: a memory with a conflict git left in it (wherever it is, in a fenced
block too), or half of one outside code (an opening line without its closing one or the
reverse, a slightly indented one), is left out of search and injection, and `check` names the
line; a memory that shows markers as code (indented, or in a fence but not as git writes
them) is an ordinary memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.store.text import conflict_marker_line

HEAD = "---\ndescription: the deploy checklist for the studio website\n---\n\n"


def lines(*parts: str, end: str = "\n") -> str:
    return end.join(parts) + end


CONFLICTED = {
    "git's own": lines("Deploy.", "<<<<<<< HEAD", "make deploy", "=======", "make ship", ">>>>>>> alice"),
    "indented": lines(
        "Deploy.", "  <<<<<<< HEAD", "  make deploy", "  =======", "  make ship", "  >>>>>>> alice"
    ),
    "indented by three blanks, half left": lines("Deploy.", "   <<<<<<< HEAD", "make deploy"),
    "eight characters": lines(
        "Deploy.", "<<<<<<<< ours", "make deploy", "========", "make ship", ">>>>>>>> theirs"
    ),
    "unclosed": lines("Deploy.", "<<<<<<< HEAD", "make deploy", "=======", "make ship"),
    "opening line alone": lines("Deploy.", "<<<<<<< HEAD", "make deploy"),
    "closing line alone": lines("Deploy.", "make deploy", "=======", "make ship", ">>>>>>> alice"),
    "diff3, CRLF": lines(
        "Deploy.",
        "<<<<<<< HEAD",
        "make deploy",
        "||||||| base",
        "make",
        "=======",
        "make ship",
        ">>>>>>> alice",
        end="\r\n",
    ),
    "jj's": lines(
        "Deploy.",
        "<<<<<<< Conflict 1 of 1",
        "%%%%%%% Changes from base to side #1",
        "+make deploy",
        "+++++++ Contents of side #2",
        "make ship",
        ">>>>>>> Conflict 1 of 1 ends",
    ),
    "after a closed fence": lines("```", "code", "```", "<<<<<<< HEAD", "make deploy", ">>>>>>> alice"),
    # git writes into a code block as into any other line: a whole conflict counts there too.
    "git's own inside a fence": lines(
        "A conflict looks like this:",
        "",
        "```",
        "<<<<<<< HEAD",
        "ours",
        "=======",
        "theirs",
        ">>>>>>> branch",
        "```",
    ),
    "in a config block": lines(
        "```yaml",
        "replicas: 2",
        "<<<<<<< HEAD",
        "image: app:1.4",
        "=======",
        "image: app:1.5",
        ">>>>>>> feature",
        "```",
    ),
    "one side opens a fence": lines(
        "Deploy.", "<<<<<<< HEAD", "```bash", "make deploy", "=======", "make ship", ">>>>>>> alice", "```"
    ),
    "after a fence left open": lines("```", "code never closed", "", "<<<<<<< HEAD", "make deploy"),
    "eight characters in a fence": lines(
        "~~~", "<<<<<<<< ours", "make deploy", "========", "make ship", ">>>>>>>> theirs", "~~~"
    ),
}
CLEAN = {
    "an indented block showing a conflict": lines(
        "A conflict looks like this:",
        "",
        "    <<<<<<< HEAD",
        "    ours",
        "    =======",
        "    theirs",
        "    >>>>>>> branch",
    ),
    "a fenced block showing a conflict, indented": lines(
        "A conflict looks like this:",
        "",
        "```",
        "  <<<<<<< HEAD",
        "  ours",
        "  =======",
        "  theirs",
        "  >>>>>>> branch",
        "```",
    ),
    "a tab-indented example": lines("Deploy.", "", "\t<<<<<<< HEAD", "\tmake deploy", "\t>>>>>>> alice"),
    "half of one in a fence": lines("```", "<<<<<<< HEAD", "```", "make deploy"),
    "a separator line of arrows": lines("Section one", ">>>>>>>>>>>>>>>>>>>>", "make deploy"),
    "a long line of arrows with words": lines("<<<<<<<<<<<<<<<<<<<< back to the top"),
    "a label glued to the marker": lines("<<<<<<<HEAD", "make deploy", ">>>>>>>alice"),
    "a quoted conflict": lines("> <<<<<<< HEAD", "> ours", "> >>>>>>> branch"),
    "a tilde fence with an info string": lines("~~~diff", "<<<<<<< HEAD", "~~~~", "make deploy"),
    "a longer fence holding a shorter one": lines(
        "````md", "```", "<<<<<<< HEAD", "```", "````", "make deploy"
    ),
    "a Markdown heading underline": lines("Deploy", "=======", "", "make deploy"),
    "markers inside a sentence": lines("Git writes <<<<<<< HEAD and >>>>>>> branch around each side."),
    "shorter arrows": lines("Pipe it: make deploy >>>>>> log.txt and <<<<<< EOF"),
    "a heredoc": lines("cat <<EOF", "make deploy", "EOF"),
}


@pytest.mark.parametrize("body", CONFLICTED.values(), ids=CONFLICTED.keys())
def test_each_variant_is_a_conflict_and_its_first_marker_is_named(body: str) -> None:
    line = conflict_marker_line(body)
    assert line is not None
    first = body.split("\n")[line - 1].strip()
    assert first.startswith(("<<<<<<<", ">>>>>>>"))


@pytest.mark.parametrize("body", CLEAN.values(), ids=CLEAN.keys())
def test_markers_in_fenced_code_or_prose_are_not_a_conflict(body: str) -> None:
    assert conflict_marker_line(body) is None


@pytest.mark.parametrize("body", CONFLICTED.values(), ids=CONFLICTED.keys())
def test_a_half_resolved_memory_is_not_injected_and_check_names_it(tmp_path: Path, body: str) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_deploy.md").write_bytes((HEAD + body).encode())
    injection = store.inject("how do we deploy the studio website?", session="s")
    assert "make deploy" not in injection.text and "make ship" not in injection.text
    assert "project_deploy.md" in injection.text  # named as left out, at the session's start
    found = [(f.check, f.line) for f in store.check().findings if f.file == "project_deploy.md"]
    assert ("merge-conflict", conflict_marker_line(HEAD + body)) in found


def test_a_memory_documenting_conflicts_in_a_fence_is_found(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    body = CLEAN["a fenced block showing a conflict, indented"]
    (store.memory_dir / "reference_git_conflicts.md").write_text(
        "---\ndescription: how git marks a merge conflict in a file\n---\n\n" + body
    )
    text = store.inject("what does a git merge conflict look like in a file?").text
    assert "reference_git_conflicts.md" in text and "left out" not in text
    assert not [f for f in store.check().findings if f.check == "merge-conflict"]
