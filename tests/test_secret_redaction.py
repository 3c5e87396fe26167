"""A secret already on disk never reaches a prompt: every snippet injected (the hook, `inject`)
or pulled (`search`, MCP `memory_search`) shows MARKER in its place, whatever the index says;
the file stays as the person wrote it and `check` names it; the index holds no copy; a file
name holding a secret is refused."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sagemem import MemoryStore
from sagemem.search import cache
from sagemem.search import corpus as corpus_module
from sagemem.store.errors import InvalidName
from sagemem.store.secrets import MARKER

from .memories import DANCE, make

TOKEN = "ghp_" + "Q7w" * 12
PASSWORD = "Pw7&Zq8!rT5v"
CELL = "Lm4#Tr9@Kx2w"
SECRETS = (TOKEN, PASSWORD, CELL)
DEPLOY = f"""---
name: Deploy
description: Deploying the studio website, with the CI token {TOKEN}
type: project
---

## Deploy

The studio website deploy runs from CI with the token {TOKEN}; the admin password is {PASSWORD}.

| setting | value |
|---|---|
| password | {CELL} |
| region | eu-west-1 |
"""
QUESTION = "how does the studio website deploy work?"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    store = make(tmp_path / "mem", DANCE)
    (store.memory_dir / "project_deploy.md").write_text(DEPLOY)  # by hand: a write would refuse it
    return store


def cli(store: MemoryStore, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_redacted(text: str) -> None:
    assert MARKER in text
    assert not [s for s in SECRETS if s in text], text


def test_an_injected_snippet_shows_the_marker_and_the_file_keeps_its_secret(store: MemoryStore) -> None:
    injection = store.inject(QUESTION, session="s1")
    assert "project_deploy.md" in injection.text and "studio website deploy runs from CI" in injection.text
    assert_redacted(injection.text)
    assert (store.memory_dir / "project_deploy.md").read_text() == DEPLOY  # the person's file
    found = {(f.check, f.file, f.line) for f in store.check().findings if f.check == "secret"}
    assert {("secret", "project_deploy.md", line) for line in (3, 9, 13)} <= found


def test_the_prompt_hook_redacts_what_it_indexes_itself(store: MemoryStore) -> None:
    """The hook is the first to read the file, within its deadline: the pattern pass."""
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "h1", "prompt": QUESTION, "cwd": "/"}
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env={**os.environ, "SAGEMEM_DIR": str(store.memory_dir)},
    )
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "project_deploy.md" in context
    assert_redacted(context)


def test_a_pulled_snippet_is_redacted_in_search_and_its_description_too(store: MemoryStore) -> None:
    done = cli(store, "search", QUESTION, "--json")
    assert done.returncode == 0, done.stderr
    hits = [h for h in json.loads(done.stdout) if h["file"] == "project_deploy.md"]
    assert hits and all(MARKER in h["snippet"] + h["description"] for h in hits)
    assert_redacted(done.stdout)
    assert_redacted(cli(store, "search", QUESTION).stdout)


def test_a_pulled_snippet_is_redacted_through_mcp(store: MemoryStore) -> None:
    pytest.importorskip("mcp")
    import anyio

    from .mcp_client import connect

    async def search() -> Any:
        async with connect(store) as client:
            result = await client.call_tool("memory_search", {"query": QUESTION, "limit": 10})
            assert result.is_error is False
            return (
                json.loads(result.content[0].text)
                if result.structured_content is None
                else result.structured_content
            )

    found = json.dumps(anyio.run(search))
    assert "project_deploy.md" in found
    assert_redacted(found)


def test_the_index_holds_no_copy_and_a_search_for_a_secret_finds_nothing(store: MemoryStore) -> None:
    store.search(QUESTION)  # builds the index
    files = list((store.state_dir / "cache").glob("index-*"))
    assert files and not [f for f in files for s in SECRETS if s.encode() in f.read_bytes()]
    done = cli(store, "search", TOKEN, "--json")
    assert done.returncode == 0 and "project_deploy.md" not in done.stdout


def _entries(store: MemoryStore) -> tuple[Path, dict[str, Any]]:
    store.search(QUESTION)
    [db] = (store.state_dir / "cache").glob("index-*.sqlite")
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT entry FROM files WHERE name = 'project_deploy.md'").fetchone()
    return db, json.loads(raw)


def _forge(db: Path, entry: dict[str, Any]) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE files SET entry = ? WHERE name = 'project_deploy.md'",
            (json.dumps(entry, ensure_ascii=False),),
        )


def test_the_index_keeps_where_the_secrets_are_and_a_snippet_uses_it(store: MemoryStore) -> None:
    db, entry = _entries(store)
    text = DEPLOY
    spans = [text[a:b] for a, b in entry["secrets"]]
    assert TOKEN in spans and PASSWORD in spans and CELL in spans and "scanned" not in entry
    # A span the index names is redacted even where no scan would find anything.
    at = text.index("eu-west-1")
    _forge(db, {**entry, "secrets": [*entry["secrets"], [at, at + len("eu-west-1")]]})
    snippet = next(
        s
        for s in store.inject("studio website deploy region", session="s2").snippets
        if s.file == "project_deploy.md"
    )
    assert "eu-west-1" not in snippet.text and MARKER in snippet.text


def test_a_forged_index_cannot_put_a_secret_into_a_prompt(store: MemoryStore) -> None:
    """A committed state dir is untrusted: an entry that names no secret, and a description
    with one, still give redacted text (the pattern pass runs on every snippet shown)."""
    db, entry = _entries(store)
    _forge(db, {**entry, "secrets": [], "description": f"deploy with {TOKEN}", "name": f"token {TOKEN}"})
    injection = store.inject(QUESTION, session="s3")
    assert "project_deploy.md" in injection.text
    assert_redacted(injection.text)


# What only detect-secrets' keyword rule found before the pattern pass read quoted values whole.
QUOTED = "Pq8 zz Lm2 kk"


def test_a_forged_index_hides_no_quoted_value_either(store: MemoryStore) -> None:
    """The same with a quoted value holding blanks after a label: the pattern pass reads it
    whole, as the full scan does, so a forged entry hides it from no snippet, injected or
    pulled."""
    text = DEPLOY + f'\nThe studio website deploy config: secret = "{QUOTED}"\n'
    (store.memory_dir / "project_deploy.md").write_text(text)
    db, entry = _entries(store)
    assert any(text[a:b] == QUOTED for a, b in entry["secrets"])
    _forge(db, {**entry, "secrets": []})
    injection = store.inject("studio website deploy config secret", session="s6")
    assert "project_deploy.md" in injection.text and QUOTED not in injection.text
    pulled = cli(store, "search", "studio website deploy config secret", "--json")
    assert "project_deploy.md" in pulled.stdout and QUOTED not in pulled.stdout


@pytest.mark.parametrize(
    "bad",
    [
        {"secrets": [[5, 2]]},
        {"secrets": [["a", 3]]},
        {"secrets": [[True, 3]]},
        {"secrets": "everything"},
        {"mtime": "yesterday"},
        {"paragraphs": [[1]]},
    ],
)
def test_an_entry_of_the_wrong_shape_is_damage_and_rebuilt(store: MemoryStore, bad: dict[str, Any]) -> None:
    db, entry = _entries(store)
    _forge(db, {**entry, **bad})
    injection = store.inject(QUESTION, session="s4")  # rebuilt, not a traceback
    assert "project_deploy.md" in injection.text
    assert_redacted(injection.text)


def test_a_file_the_hook_indexed_is_scanned_fully_by_the_next_command(store: MemoryStore) -> None:
    """Within a deadline the pattern pass runs and the row says so; a call without one reads
    the file again with the full scan."""
    import time

    query = "SELECT scanned FROM files WHERE name = 'project_deploy.md'"
    with corpus_module.load(store.memory_dir, store.state_dir, deadline=time.monotonic() + 60) as corpus:
        [entry] = [e for e in corpus.entries() if e.file == "project_deploy.md"]
        assert corpus.connection.execute(query).fetchone() == (0,) and entry.secrets
        assert corpus.unscanned is not None and corpus.unscanned.name == cache.db_name(store.memory_dir)
    with corpus_module.load(store.memory_dir, store.state_dir) as corpus:
        [entry] = [e for e in corpus.entries() if e.file == "project_deploy.md"]
        assert {DEPLOY[a:b] for a, b in entry.secrets} >= set(SECRETS)
        conn = corpus.connection
        assert conn.execute("SELECT COUNT(*) FROM files WHERE NOT scanned").fetchone() == (0,)
        assert corpus.unscanned is None
    assert cache.FORMAT >= 10


# --- names ---------------------------------------------------------------------------------


def test_a_file_name_holding_a_secret_is_refused_by_the_cli_and_says_not_what_it_is(
    store: MemoryStore,
) -> None:
    name = f"reference_{TOKEN}.md"
    done = cli(store, "write", name, stdin="---\ndescription: x\n---\n\nbody\n")
    assert done.returncode != 0 and "looks like a GitHub token" in done.stderr and TOKEN not in done.stderr
    body = "Run make deploy."
    done = cli(
        store,
        "new",
        "--type",
        "project",
        "--name",
        "deploy",
        "--description",
        "d",
        "--file",
        name,
        "--body",
        body,
    )
    assert (
        done.returncode != 0 and "keep secrets out of file names" in done.stderr and TOKEN not in done.stderr
    )
    assert not list(store.memory_dir.glob("*ghp_*"))
    with pytest.raises(InvalidName, match="GitHub token"):
        store.read(name)


def test_a_file_name_holding_a_secret_is_refused_through_mcp(store: MemoryStore) -> None:
    pytest.importorskip("mcp")
    import anyio

    from .mcp_client import connect

    async def write() -> Any:
        async with connect(store) as client:
            return await client.call_tool(
                "memory_write",
                {"file": f"project_{TOKEN}.md", "content": "---\ndescription: x\n---\n\nbody\n"},
            )

    result = anyio.run(write)
    assert result.is_error is True
    said = " ".join(getattr(c, "text", "") for c in result.content)
    assert "looks like a GitHub token" in said and TOKEN not in said
    assert not list(store.memory_dir.glob("*ghp_*"))


def test_a_file_already_named_with_a_secret_is_left_out_and_named_by_check(store: MemoryStore) -> None:
    named = store.memory_dir / f"reference_{TOKEN}.md"
    named.write_text("---\ndescription: studio website deploy notes\n---\n\nThe studio website deploy.\n")
    assert TOKEN not in store.inject(QUESTION, session="s5").text
    assert not [m for m in store.memories() if TOKEN in m.file]
    assert [f for f in store.check().findings if "file name" in f.message or "GitHub token" in f.message]
