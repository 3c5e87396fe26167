"""Where a secret already on disk could still reach a model, and the hook's own screen of
Claude's writes: every path is closed, as real processes.

- A file the prompt hook indexes itself (the pattern pass) is read again with the full scan
  without anyone running a command: the hook starts it, detached, once it has answered.
- A task checkpoint's items, the MEMORY.md line, the gap card's advice.
- A snippet of a file that holds a private key does not make the hook scan the whole file.
- The PreToolUse screen: links, sizes, another project's memory, innocent code.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.search import cache, inject
from sagemem.search import corpus as corpus_module
from sagemem.store import secrets
from sagemem.store.secrets import MARKER, NOT_A_SECRET

from .memories import make_project
from .test_secrets import pem

TOKEN = "ghp_" + "Q7w" * 12
QUOTED = "Pq8 zz Lm2 kk"  # a quoted value with blanks: once only detect-secrets' keyword rule read it whole
NOTES = f"""---
name: quokka pipeline
description: quokka pipeline notes
type: project
---

The quokka pipeline deploys on push with the token {TOKEN}.

The quokka pipeline config: secret = "{QUOTED}"
"""


def run_hook(project: Path, event: dict[str, object], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        input=json.dumps({"cwd": str(project), **event}),
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
    )
    assert done.returncode == 0 and done.stderr == ""
    return done.stdout


def prompt(project: Path, session: str, text: str = "how does the quokka pipeline deploy?") -> str:
    return run_hook(project, {"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": text})


def scanned(memory: Path, name: str) -> int | None:
    [db] = (memory / ".sagemem" / "cache").glob("index-v*.sqlite")
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT scanned FROM files WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def wait_for_full_scan(memory: Path, name: str, seconds: float = 60) -> bool:
    """Polls the index (never a timed assertion: the bound only stops a test that fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if scanned(memory, name) == 1:
            return True
        time.sleep(0.1)
    return False


# --- 1: the hook's own indexing is scanned fully without a command ---------------------------


def test_a_file_the_prompt_hook_indexed_itself_gets_its_full_scan_from_the_hook(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    (memory / "project_quokka.md").write_text(NOTES)
    text = prompt(project, "q1")
    assert "project_quokka.md" in text and TOKEN not in text and QUOTED not in text
    assert wait_for_full_scan(memory, "project_quokka.md"), "no full scan ran after the hook answered"
    # The next change is scanned again at once: a finished scan leaves no wait behind it.
    (memory / "project_quokka.md").write_text(NOTES + "\nThe quokka pipeline also runs nightly.\n")
    text = prompt(project, "q2")
    assert "project_quokka.md" in text and QUOTED not in text
    assert wait_for_full_scan(memory, "project_quokka.md")
    with corpus_module.load(memory, memory / ".sagemem") as corpus:
        [entry] = [e for e in corpus.entries() if e.file == "project_quokka.md"]
    again = NOTES + "\nThe quokka pipeline also runs nightly.\n"
    assert {again[a:b] for a, b in entry.secrets} == {TOKEN, QUOTED}


def test_session_start_has_the_full_scan_done_too(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    (memory / "project_quokka.md").write_text(NOTES)
    run_hook(project, {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"})
    assert wait_for_full_scan(memory, "project_quokka.md")


def test_a_scan_that_started_lately_and_did_not_finish_is_not_started_again(tmp_path: Path) -> None:
    """Its stamp says it is running (or it died): the hook starts none for a while, so a scan
    that fails every time costs no process per prompt."""
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    places = [(memory, memory / ".sagemem")]
    with corpus_module.load(*places[0], deadline=time.monotonic() + 60) as corpus:
        index = corpus.unscanned
    assert index is not None
    lock = index.with_name(index.name + ".scan")
    lock.write_text("")  # a scan that started just now
    assert corpus_module.full_scan_later([(*places[0], index)]) is False
    os.utime(lock, (0, 0))  # the last one finished
    assert corpus_module.full_scan_later([(*places[0], index)]) is True
    assert wait_for_full_scan(memory, "project_studio_opening.md")


def test_the_pattern_pass_reads_a_quoted_value_whole_as_the_full_scan_does() -> None:
    for line in (f'secret = "{QUOTED}"', f"password: '{QUOTED}'", 'PASSWORD: "correct horse battery 7"'):
        full = [(s.start, s.end) for s in secrets.scan(line)]
        assert full and [(s.start, s.end) for s in secrets.scan_patterns(line)] == full, line


# --- 2: a task checkpoint is redacted --------------------------------------------------------


def test_a_task_checkpoint_shows_no_secret(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    state = project / ".sagemem" / "memory" / ".sagemem"
    (state / "tasks" / "t1").mkdir(parents=True)
    (state / "tasks" / "t1" / "WORKING.md").write_text(
        f"# t1\n\n- [x] rotated the CI token to {TOKEN}\n- [ ] more\n"
    )
    text = prompt(project, "t1", "when does the studio lease start and what is the rent?")
    assert "Task checkpoint: t1" in text and "rotated the CI token to" in text
    assert TOKEN not in text and TOKEN[:20] not in text and MARKER[:10] in text


# --- 4: MEMORY.md never copies a secret ------------------------------------------------------


def test_the_memory_md_line_never_copies_a_secret(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_deploy.md").write_text(
        f"---\nname: deploy {TOKEN}\ndescription: deploy with token {TOKEN}\ntype: project\n---\n\nsteps\n"
    )
    store.rebuild_index()
    index = (store.memory_dir / "MEMORY.md").read_text()
    assert "project_deploy.md" in index and TOKEN not in index and MARKER in index
    assert store.check_index().ok  # the redacted line is the memory's line: not stale
    # A line a person (or an older sagemem) wrote with the secret is stale, and rebuilt without it.
    (store.memory_dir / "MEMORY.md").write_text(f"# Memory\n\n- [deploy {TOKEN}](project_deploy.md) — old\n")
    assert not store.check_index().ok
    store.rebuild_index()
    assert TOKEN not in (store.memory_dir / "MEMORY.md").read_text()


def test_a_new_memory_writes_its_index_line_redacted(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    store.create(type="project", name="deploy", description="how the studio website deploys", body="make")
    (store.memory_dir / "project_deploy.md").write_text(
        f"---\nname: deploy\ndescription: deploy with token {TOKEN}\ntype: project\n---\n\nsteps\n"
    )
    store.refresh_index_line("project_deploy.md")  # as after Claude's own Write
    index = (store.memory_dir / "MEMORY.md").read_text()
    assert "project_deploy.md" in index and TOKEN not in index


# --- 6: the gap card sends no agent to a raw copy ----------------------------------------------


def test_a_gap_card_for_a_memory_holding_a_secret_does_not_send_the_agent_to_read_it(
    tmp_path: Path,
) -> None:
    """The lead the budget kept out holds a secret: `read` would show it raw, so the card says
    so and sends the agent to the redacting search instead; another lead keeps `read`."""
    store = MemoryStore(tmp_path / "mem")
    store.init()
    long = "The quokka deploy step runs the release job. " * 40
    (store.memory_dir / "project_quokka_short.md").write_text(
        "---\ndescription: quokka deploy step\ntype: project\n---\n\nThe quokka deploy step is make ship.\n"
    )
    (store.memory_dir / "project_quokka_long.md").write_text(
        f"---\ndescription: quokka deploy step in full\ntype: project\n---\n\n{long}\n"
    )
    (store.state_dir / "settings.json").write_text(json.dumps({"budget": 4096}))
    cards = {}
    for name, secret in (("project_quokka_plain.md", ""), ("project_quokka_token.md", f" Token {TOKEN}.")):
        (store.memory_dir / name).write_text(
            f"---\ndescription: quokka deploy step in full\ntype: project\n---\n\n{long}{secret}\n"
        )
        injection = store.inject("quokka deploy step", session=name)
        assert TOKEN not in injection.text and f"Best lead: {name}" in injection.card
        cards[name] = injection.card
        (store.memory_dir / name).unlink()
    assert " read project_quokka_plain.md" in cards["project_quokka_plain.md"]
    assert "holds a likely secret" not in cards["project_quokka_plain.md"]
    token_card = cards["project_quokka_token.md"]
    assert "holds a likely secret" in token_card and " read project_quokka_token.md" not in token_card


def test_a_snippet_and_its_cut_marker_say_the_file_holds_a_secret(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    body = f"quokka deploy uses {TOKEN} for the bot. " + "quokka words go on and on. " * 80
    (store.memory_dir / "project_quokka.md").write_text(f"---\ndescription: quokka deploy\n---\n\n{body}\n")
    text = store.inject("quokka deploy bot").text
    assert (
        TOKEN not in text and "holds a likely secret" in text and "read project_quokka.md --lines" not in text
    )


# --- 8: a file that mentions a private key does not make every snippet scan it whole -------------


def test_a_snippet_under_a_key_header_scans_only_near_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    key = pem("snippet", "RSA PRIVATE KEY", 900)
    filler = "\n\n".join(f"quokka paragraph {i} " + "token token: " * 300 for i in range(120))
    text = f"---\ndescription: quokka notes\n---\n\nPRIVATE KEY mentioned here\n\n{filler}\n\n{key}\n"
    (store.memory_dir / "project_quokka.md").write_text(text)
    with corpus_module.load(store.memory_dir, store.state_dir) as corpus:
        [entry] = [e for e in corpus.entries() if e.file == "project_quokka.md"]
    seen: list[int] = []
    real = secrets.scan_patterns
    monkeypatch.setattr(secrets, "scan_patterns", lambda t: seen.append(len(t)) or real(t))
    lines = text.split("\n")
    inside = next(n for n, line in enumerate(lines, 1) if line.startswith("-----BEGIN")) + 5
    quiet = entry._replace(secrets=())  # as a forged index would have it: the key is found anyway
    snippet = inject.read_snippet(store.memory_dir, quiet, inside, inside + 2, limit=inject.SHOWN_CHARS)
    assert snippet is not None and snippet.text.strip() == "\n".join([MARKER] * 3) and snippet.secret
    for paragraph in entry.paragraphs[:10]:
        inject.read_snippet(store.memory_dir, entry, paragraph.start, paragraph.end, limit=inject.SHOWN_CHARS)
    assert seen and max(seen) < 20_000  # the snippet's lines, never the 470 KB file


# --- 5: the screen of Claude's own writes -----------------------------------------------------


def tool(project: Path, name: str, path: Path, **arguments: object) -> str:
    out = run_hook(
        project,
        {
            "hook_event_name": "PreToolUse",
            "session_id": "w1",
            "tool_name": name,
            "tool_input": {"file_path": str(path), **arguments},
        },
    )
    if not out:
        return ""
    decision = json.loads(out)["hookSpecificOutput"]
    assert decision["permissionDecision"] == "deny"
    return str(decision["permissionDecisionReason"])


def read(project: Path, path: Path) -> None:
    event = {"tool_name": "Read", "tool_input": {"file_path": str(path)}, "tool_response": {}}
    run_hook(project, {"hook_event_name": "PostToolUse", "session_id": "w1", **event})


FRONT = "---\nname: n\ndescription: d\ntype: project\n---\n\n"


def test_a_write_through_a_link_in_a_memory_folder_is_screened_as_its_target(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    (memory / "project_target.md").write_text(FRONT + "target\n")
    (memory / "project_alias.md").symlink_to(memory / "project_target.md")
    (memory / "project_dangling.md").symlink_to(memory / "project_new_target.md")
    for link in ("project_alias.md", "project_dangling.md"):
        reason = tool(project, "Write", memory / link, content=FRONT + f"token {TOKEN}\n")
        assert "looks like a GitHub token" in reason and TOKEN not in reason, link
        assert tool(project, "Write", memory / link, content=FRONT + "no secret here\n") == "", link
    assert (memory / "project_target.md").read_text() == FRONT + "target\n"


def test_a_write_too_large_to_screen_is_refused_and_a_large_innocent_edit_is_not(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    memory = project / ".sagemem" / "memory"
    huge = f"token {TOKEN}\n" + "password password password: token token: \n" * 15_000
    reason = tool(project, "Write", memory / "project_huge.md", content=huge)
    assert "larger than 512 KiB" in reason and TOKEN not in reason
    big = memory / "project_big.md"
    big.write_text(FRONT + "quokka notes line with words\n" * 17_000)
    read(project, big)  # else the write guard refuses the Edit for its own reason
    assert (
        tool(project, "Edit", big, old_string="quokka notes line with words\n", new_string="quokka notes\n")
        == ""
    )
    reason = tool(
        project, "Edit", big, old_string="quokka notes line with words\n", new_string=f"token {TOKEN}\n"
    )
    assert "looks like a GitHub token" in reason
    big.write_text(FRONT + "quokka notes line with words\n" * 20_000)  # over the cap already
    read(project, big)
    reason = tool(project, "Edit", big, old_string="quokka notes", new_string=f"token {TOKEN}")
    assert "larger than 512 KiB" in reason


def test_another_projects_memory_folder_is_screened_wherever_the_session_runs(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    other = tmp_path / "other" / ".sagemem" / "memory"
    other.mkdir(parents=True)
    reason = tool(project, "Write", other / "project_x.md", content=FRONT + f"token {TOKEN}\n")
    assert "looks like a GitHub token" in reason
    assert tool(project, "Write", tmp_path / "other" / "notes.md", content=f"token {TOKEN}\n") == ""


@pytest.mark.parametrize(
    "line",
    [
        "tokenizer: cl100k_base",
        "def refresh(token: AccessToken) -> None:",
        "api_key: _AzureApiKeyT | None = None",
    ],
)
def test_code_in_a_memory_is_not_refused(tmp_path: Path, line: str) -> None:
    project = make_project(tmp_path / "proj")
    path = project / ".sagemem" / "memory" / "project_code.md"
    assert tool(project, "Write", path, content=FRONT + f"```python\n{line}\n```\n") == ""


def test_a_refusal_says_how_to_mark_a_line_that_is_no_secret(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj")
    path = project / ".sagemem" / "memory" / "project_db.md"
    reason = tool(project, "Write", path, content=FRONT + "db_password: Zq8!rT5vLm2\n")
    assert NOT_A_SECRET in reason
    marked = FRONT + "db_password: Zq8!rT5vLm2  <!-- pragma: allowlist secret -->\n"
    assert tool(project, "Write", path, content=marked) == ""


def test_the_index_keeps_no_entry_field_for_the_scan() -> None:
    """Whether the full scan has read a file is the row's (`files.scanned`), once."""
    assert "scanned" not in corpus_module.Entry._fields
    assert "scanned" in cache.SCHEMA


# --- 3 and 6: listings and a conflict's diff, where an agent is sent -------------------------


def test_listings_show_no_secret_in_a_field(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from sagemem.cli import cli

    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_deploy.md").write_text(
        f"---\nname: deploy {TOKEN}\ndescription: deploy with token {TOKEN}\ntype: project\n"
        f"tags: [{TOKEN}]\naliases: [ship {TOKEN}]\n---\n\nsteps\n"
    )
    for args in (["list"], ["list", "--json"]):
        out = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), *args], catch_exceptions=False).stdout
        assert "project_deploy.md" in out and TOKEN not in out and MARKER in out
    [listed] = json.loads(CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "list", "--json"]).stdout)
    assert listed["description"] == f"deploy with token {MARKER}" and listed["tags"] == [MARKER]


def test_mcp_memory_list_shows_no_secret(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio

    from .mcp_client import connect

    store = MemoryStore(tmp_path / "mem")
    store.init()
    (store.memory_dir / "project_deploy.md").write_text(
        f"---\ndescription: deploy with token {TOKEN}\ntype: project\n---\n\nsteps\n"
    )

    async def listed() -> str:
        async with connect(store) as client:
            result = await client.call_tool("memory_list", {})
            return json.dumps(result.structured_content) + "".join(
                getattr(c, "text", "") for c in result.content
            )

    out = anyio.run(listed)
    assert "project_deploy.md" in out and TOKEN not in out and MARKER in out


def test_a_conflicts_diff_shows_no_secret_already_on_disk(tmp_path: Path) -> None:
    """The write guard's refusal sends the agent to `conflicts show`: the side on disk holds
    the secret the person has not moved out yet; neither the diff nor the JSON repeats it."""
    from click.testing import CliRunner

    from sagemem.cli import cli
    from sagemem.store.errors import VersionConflict

    store = MemoryStore(tmp_path / "mem")
    store.init()
    path = store.memory_dir / "project_deploy.md"
    path.write_text(f"---\ndescription: deploy\ntype: project\n---\n\nThe bot token is {TOKEN}.\n")
    old = store.read("project_deploy.md").version
    path.write_text(path.read_text() + "Deploys run at noon.\n")
    with pytest.raises(VersionConflict) as refused:
        store.write(
            "project_deploy.md",
            "---\ndescription: deploy\ntype: project\n---\n\nsteps\n",
            expected_version=old,
        )
    cid = refused.value.conflict_id
    for args in (["conflicts", "show", cid], ["conflicts", "show", cid, "--json"]):
        out = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), *args], catch_exceptions=False).stdout
        assert "Deploys run at noon." in out and TOKEN not in out and MARKER in out
    assert TOKEN in path.read_text()  # the file itself is the person's, as it was
