"""A memory set: the project's memory, the user's and Claude Code's auto-memory folder, found,
ranked as one collection, written to one scope at a time, each keeping its own state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemem import MemorySet, MemoryStore, VersionConflict
from sagemem.search.corpus import load
from sagemem.search.retrieve import Shelf, search
from sagemem.store.config import locate_scopes
from sagemem.store.native import claude_memory_dir, claude_slug

from .memories import DANCE, make
from .test_git import git

ROOT = Path(__file__).resolve().parents[1]


def home() -> Path:
    return Path(os.environ["HOME"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project with its own memory, a user memory, and Claude Code's folder for it."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    project = MemoryStore(root / ".sagemem" / "memory")
    project.init()
    project.create(
        type="project", name="deploy", description="How we deploy to production", body="make deploy"
    )
    user = MemoryStore(home() / ".sagemem" / "memory")
    user.init()
    user.create(
        type="user", name="pnpm", description="The user prefers pnpm over npm", body="Use pnpm install."
    )
    claude = claude_memory_dir(root, home(), os.environ)
    claude.mkdir(parents=True)
    (claude / "MEMORY.md").write_text("- [Cat](user_cat.md) — the user's cat\n")
    (claude / "user_cat.md").write_text(
        "---\nname: cat\ndescription: the user's cat\ntype: user\n---\n\nThe cat is called Sesame (芝麻).\n"
    )
    return root


def cli(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemem", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_the_set_is_project_user_and_claude_in_that_order(project: Path) -> None:
    scopes = locate_scopes(cwd=project)
    assert [s.name for s in scopes] == ["project", "user", "claude"]
    claude = scopes[2]
    assert claude.native and claude.memory_dir.name == "memory"
    assert claude.memory_dir.parent.name == claude_slug(str(project))
    assert claude.state_dir.is_relative_to(home() / ".sagemem" / "adopted")  # never in Claude's folder
    assert scopes[1].state_dir == home() / ".sagemem" / "memory" / ".sagemem"
    one = locate_scopes(project / ".sagemem" / "memory")
    assert [s.name for s in one] == ["dir"]  # a directory named by hand is a set of one


def test_a_setting_turns_a_scope_off(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGEMEM_SCOPES", "project,claude")
    assert [s.name for s in locate_scopes(cwd=project)] == ["project", "claude"]
    monkeypatch.delenv("SAGEMEM_SCOPES")
    state = project / ".sagemem" / "memory" / ".sagemem"
    (state / "settings.json").write_text(json.dumps({"scopes": ["project", "user"]}))
    assert [s.name for s in locate_scopes(cwd=project)] == ["project", "user"]


def test_a_user_memory_is_found_inside_a_project(project: Path) -> None:
    memories = MemorySet.locate(cwd=project)
    hits = memories.search("should I use pnpm or npm").hits
    assert hits and hits[0].file == "user:user_pnpm.md" and hits[0].scope == "user"
    injection = memories.inject("what is my cat called?", session="s1")
    assert "### claude:user_cat.md:" in injection.text and "Sesame" in injection.text
    # the session's ledger is in the first scope's state
    assert list((project / ".sagemem" / "memory" / ".sagemem" / "sessions").glob("*.json"))
    assert memories.store("claude").ledger()["user_cat.md"].injected.count == 1
    assert not (claude_memory_dir(project, home(), os.environ) / ".sagemem").exists()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(split=st.lists(st.integers(min_value=0, max_value=2), min_size=len(DANCE), max_size=len(DANCE)))
def test_splitting_a_directory_into_scopes_changes_no_score(
    tmp_path_factory: pytest.TempPathFactory, split: list[int]
) -> None:
    """One BM25 scale: the statistics are summed over the scopes, so a memory scores the same
    in whichever directory it is."""
    root = tmp_path_factory.mktemp("split")
    whole = make(root / "whole", DANCE)
    parts = [root / f"part{n}" for n in range(3)]
    for folder in parts:
        folder.mkdir()
    for (name, text), n in zip(sorted(DANCE.items()), split, strict=True):
        (parts[n] / name).write_text(text)
    queries = [
        "studio lease rent",
        "competition judges scoring",
        "evening rehearsal classes",
        "salsa teacher",
    ]
    one = load(whole.memory_dir, root / "state-whole")
    shelves = [Shelf(f"p{n}", load(p, root / f"state{n}")) for n, p in enumerate(parts)]
    for query in queries:
        expected = {(h.file, h.start, round(h.score, 9)) for h in search(one, query).ranked}
        got = {(h.file.split(":", 1)[1], h.start, round(h.score, 9)) for h in search(shelves, query).ranked}
        assert got == expected, query


def test_new_memories_go_where_their_type_belongs(project: Path) -> None:
    done = cli(project, "new", "--type", "user", "--name", "editor", "--description", "The user edits in vim")
    assert done.returncode == 0 and done.stdout.startswith("user:user_editor.md ")
    assert (home() / ".sagemem" / "memory" / "user_editor.md").is_file()
    done = cli(
        project, "new", "--type", "feedback", "--name", "tests", "--description", "Run the tests first"
    )
    assert done.stdout.startswith("project:feedback_tests.md ")
    done = cli(
        project, "new", "--in", "user", "--type", "project", "--name", "side", "--description", "A side"
    )
    assert done.stdout.startswith("user:project_side.md ")
    index = (home() / ".sagemem" / "memory" / "MEMORY.md").read_text()
    assert "(user_editor.md)" in index and "(project_side.md)" in index


def test_remember_names_the_similar_memories(project: Path) -> None:
    done = cli(
        project,
        "remember",
        "--type",
        "user",
        "--name",
        "package manager",
        "--description",
        "The user prefers pnpm as package manager",
        "--json",
    )
    data = json.loads(done.stdout)
    assert data["file"] == "user:user_package_manager.md"
    assert [s["file"] for s in data["similar"]][:1] == ["user:user_pnpm.md"]


def test_names_are_scoped_and_a_plain_name_finds_its_scope(project: Path) -> None:
    listed = cli(project, "list").stdout
    assert "project:project_deploy.md" in listed and "claude:user_cat.md" in listed
    assert "Sesame" in cli(project, "read", "user_cat.md").stdout  # one scope holds it
    MemoryStore(project / ".sagemem" / "memory").create(type="user", name="pnpm", description="a clash")
    clash = cli(project, "read", "user_pnpm.md")
    assert clash.returncode == 1 and "more than one scope holds it" in clash.stderr
    assert "prefers pnpm" in cli(project, "read", "user:user_pnpm.md").stdout
    where = cli(project, "path").stdout
    assert where.splitlines()[0].startswith("project: ") and "claude:" in where


def test_move_is_guarded_and_fixes_both_indexes(project: Path) -> None:
    memories = MemorySet.locate(cwd=project)
    store, moved = memories.move("project:project_deploy.md", "user")
    assert store.scope == "user" and moved.file == "project_deploy.md"
    assert not (project / ".sagemem" / "memory" / "project_deploy.md").exists()
    assert "(project_deploy.md)" not in (project / ".sagemem" / "memory" / "MEMORY.md").read_text()
    assert "(project_deploy.md)" in (home() / ".sagemem" / "memory" / "MEMORY.md").read_text()
    again = cli(project, "move", "user:project_deploy.md", "--to", "user")
    assert again.returncode == 1 and "is in user already" in again.stderr
    # a copy already there: refused, nothing lost
    MemoryStore(project / ".sagemem" / "memory").create(type="project", name="deploy", description="again")
    refused = cli(project, "move", "project:project_deploy.md", "--to", "user")
    assert refused.returncode == 3
    assert (project / ".sagemem" / "memory" / "project_deploy.md").is_file()


def test_a_move_that_races_an_edit_keeps_both_copies(project: Path) -> None:
    memories = MemorySet.locate(cwd=project)
    source = memories.store("project")
    read = source.read("project_deploy.md")
    target = memories.store("user")
    target.write("project_deploy.md", read.text, expected_version=None)  # as the move does
    (source.memory_dir / "project_deploy.md").write_text(read.text + "\nedited meanwhile\n")
    with pytest.raises(VersionConflict):
        source.take_out("project_deploy.md", expected_version=read.version)
    assert "edited meanwhile" in (source.memory_dir / "project_deploy.md").read_text()


def test_claude_codes_folder_is_guarded_with_its_state_kept_apart(project: Path) -> None:
    memory = claude_memory_dir(project, home(), os.environ) / "user_cat.md"

    def tool(fired: str, name: str, **arguments: object) -> str:
        event = {
            "session_id": "cc1",
            "cwd": str(project),
            "hook_event_name": fired,
            "tool_name": name,
            "tool_input": {"file_path": str(memory), **arguments},
        }
        done = cli(project, "hook", "claude-code", stdin=json.dumps(event))
        assert done.returncode == 0 and done.stderr == ""
        return done.stdout

    denied = json.loads(tool("PreToolUse", "Edit", old_string="Sesame", new_string="Mochi"))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"  # never read in this session
    assert tool("PostToolUse", "Read") == ""
    assert tool("PreToolUse", "Edit", old_string="Sesame", new_string="Mochi") == ""
    assert not (memory.parent / ".sagemem").exists()  # locks, conflicts, ledgers: all elsewhere
    assert list((home() / ".sagemem" / "adopted").glob("claude-*/conflicts/*.json"))


def test_the_prompt_hook_ranks_every_scope(project: Path) -> None:
    event = {"session_id": "h1", "cwd": str(project), "hook_event_name": "UserPromptSubmit"}
    done = cli(
        project, "hook", "claude-code", stdin=json.dumps({**event, "prompt": "do I prefer pnpm or npm?"})
    )
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "### user:user_pnpm.md:" in context
    assert str(project / ".sagemem" / "memory") in context.splitlines()[0]  # every scope named
    assert str(home() / ".sagemem" / "memory") in context.splitlines()[0]


def test_two_scopes_cost_the_eval_set_nothing(tmp_path: Path) -> None:
    """The bundled evaluation set dealt into two and three directories: the same answers."""
    from sagemem.search.evaluate import evaluate
    from sagemem.store.config import Settings

    base = evaluate(ROOT / "fixtures" / "eval", Settings()).summary()
    for count in (2, 3):
        split = evaluate(ROOT / "fixtures" / "eval", Settings(), scopes=count).summary()
        assert split["recall_at_5"] == base["recall_at_5"]
        assert split["false_injection"] == base["false_injection"]
        assert split["evidence_at_5"] == base["evidence_at_5"]


def test_an_explicit_directory_is_one_scope_with_plain_names(tmp_path: Path) -> None:
    store = make(tmp_path / "mem", DANCE)
    done = cli(tmp_path, "--dir", str(store.memory_dir), "list")
    assert "project_studio_opening.md" in done.stdout and ":project_studio_opening.md" not in done.stdout
    assert shutil.which("git")  # the fixtures above need it


# -- the rules for saving, at a session's start ---------------------------------------------


def start(project: Path, harness: str, sid: str = "r1", source: str = "startup", **env: str) -> str:
    event = {"session_id": sid, "cwd": str(project), "hook_event_name": "SessionStart", "source": source}
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", harness, "SessionStart"],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, **env},
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout else ""


def test_harnesses_without_memory_rules_get_ours_once_a_session(project: Path) -> None:
    from sagemem.store.command import command_line

    text = start(project, "codex")
    assert "How to save a memory" in text and f"`{command_line('remember')}" in text
    assert "memory_remember" not in text  # no MCP server configured for Codex here
    rules = text.split("How to save a memory", 1)[1].split("```", 1)[0]
    assert len(("How to save a memory" + rules).encode("utf-8")) <= 1200
    assert "How to save a memory" not in start(project, "codex", source="resume")  # once
    assert "How to save a memory" in start(project, "codex", source="compact")  # again after compaction
    assert "How to save a memory" not in start(project, "codex", sid="r2", SAGEMEM_RULES="0")


def test_dsh_gets_the_rules_with_the_first_prompt_whenever_its_start_event_runs(project: Path) -> None:
    """dsh runs SessionStart detached, at the same moment as the first prompt's hook, and
    what it says reaches only the second model request: the rules ride on the prompt, so the
    first request has them (a session of one answer has no second), whichever hook ran first."""

    def prompt(sid: str) -> str:
        event = {"session_id": sid, "cwd": str(project), "hook_event_name": "UserPromptSubmit"}
        event["prompt"] = "What is the capital of France?"  # no memory bears on it
        done = subprocess.run(
            [sys.executable, "-m", "sagemem", "hook", "dsh", "UserPromptSubmit"],
            input=json.dumps(event),
            capture_output=True,
            text=True,
            cwd=project,
            timeout=120,
        )
        assert done.returncode == 0 and done.stderr == ""
        return done.stdout

    assert "How to save a memory" in prompt("late")  # the start event comes after
    assert "How to save a memory" not in start(project, "dsh", sid="late")
    assert "How to save a memory" not in start(project, "dsh", sid="early")  # the start came first
    assert "How to save a memory" in prompt("early")
    assert "How to save a memory" not in prompt("early")  # once a session
    assert "How to save a memory" in start(project, "codex", sid="c1")  # elsewhere with the start


def test_claude_code_gets_no_rules_while_its_own_memory_is_on(project: Path) -> None:
    assert "How to save a memory" not in start(project, "claude-code")
    off = start(project, "claude-code", sid="r2", CLAUDE_CODE_DISABLE_AUTO_MEMORY="1")
    assert "How to save a memory" in off


def test_the_rules_name_the_mcp_tools_where_the_server_is_configured(project: Path) -> None:
    (project / ".gemini").mkdir()
    entry = {"mcpServers": {"sagemem": {"command": "sagemem", "args": ["mcp"]}}}
    (project / ".gemini" / "settings.json").write_text(json.dumps(entry))
    text = start(project, "gemini")
    assert "memory_remember(" in text and "remember --type" not in text
    assert "mcp_sagemem_memory_remember(" in text  # as Gemini CLI names an MCP server's tool
    assert "Type user → user" in text  # the scopes: where each type goes


def test_the_rules_name_the_tools_as_claude_code_shows_them(project: Path) -> None:
    from sagemem.search.rules import MAX_RULES_BYTES

    entry = {"mcpServers": {"sagemem": {"command": "sagemem", "args": ["mcp"]}}}
    (project / ".mcp.json").write_text(json.dumps(entry))
    text = start(project, "claude-code", CLAUDE_CODE_DISABLE_AUTO_MEMORY="1")
    assert "mcp__sagemem__memory_remember(" in text and "mcp__sagemem__memory_search" in text
    rules = text.split("\n\n", 1)[0]
    assert rules.startswith("How to save a memory") and len(rules.encode("utf-8")) <= MAX_RULES_BYTES
    gemini = project / ".gemini"
    gemini.mkdir()
    (gemini / "settings.json").write_text(json.dumps(entry))
    assert "mcp__" not in start(project, "gemini", sid="g1")  # Gemini CLI: mcp_<server>_<tool>


def test_the_rules_follow_the_language_the_memories_are_written_in(tmp_path: Path) -> None:
    store = make(
        tmp_path / "proj" / ".sagemem" / "memory",
        {
            f"project_zh{n}.md": f"---\ndescription: 部署流程第{n}步的说明\n---\n\n先跑测试。\n"
            for n in range(3)
        },
    )
    assert "如何保存记忆" in start(store.memory_dir.parent.parent, "gemini")


def test_the_rules_are_a_block_of_their_own_in_the_memories_language(tmp_path: Path) -> None:
    """Rules are instructions: never under the records' "background, not instructions"
    framing, and with no record no framing and no "0 injected" status at all; the framing of
    a start's records speaks the memories' language, as the rules do."""
    root = tmp_path / "proj"
    store = make(
        root / ".sagemem" / "memory",
        {
            f"project_zh{n}.md": f"---\ndescription: 部署流程第{n}步的说明\n---\n\n先跑测试。\n"
            for n in range(3)
        },
    )
    alone = start(root, "codex")
    assert alone.startswith("如何保存记忆") and "以下是可能" not in alone and "sagemem：" not in alone
    assert "background" not in alone and "(sagemem:" not in alone
    (store.memory_dir / "user_me.md").write_text(
        "---\ndescription: 用户是谁\nbaseline: true\n---\n\n用户在杭州做后端开发。\n", encoding="utf-8"
    )
    both = start(root, "codex", sid="r2")
    rules, records = both.split("以下是可能与这条消息有关的历史记忆", 1)
    assert rules.startswith("如何保存记忆") and "用户在杭州做后端开发" in records


def test_a_claude_memory_without_a_body_is_not_injected_again(project: Path) -> None:
    """Claude Code puts its MEMORY.md lines (title and description) into its context itself."""
    folder = claude_memory_dir(project, home(), os.environ)
    (folder / "user_editor.md").write_text(
        "---\nname: editor\ndescription: the user edits with helix\ntype: user\n---\n"
    )
    memories = MemorySet.locate(cwd=project)
    assert not any("user_editor.md" in s.file for s in memories.inject("which editor, helix?").snippets)
    MemoryStore(project / ".sagemem" / "memory").create(
        type="user", name="editor", description="the user edits with helix", body=""
    )
    shown = [s.file for s in memories.inject("which editor, helix?").snippets]
    assert "project:user_editor.md" in shown  # sagemem's own memory of the same is shown


def test_conflicts_of_every_scope_are_listed_shown_and_resolved(project: Path) -> None:
    memories = MemorySet.locate(cwd=project)
    user = memories.store("user")
    read = user.read("user_pnpm.md")
    (user.memory_dir / "user_pnpm.md").write_text(read.text + "\nedited by hand\n")
    stale = cli(
        project, "write", "user:user_pnpm.md", "--expected-version", read.version, stdin=read.text + "x\n"
    )
    assert stale.returncode == 3
    cid = stale.stderr.split("conflict ")[1].split()[0]
    assert list((user.state_dir / "conflicts").glob(f"{cid}.json"))  # in the user scope's own state
    listed = cli(project, "conflicts").stdout
    assert cid in listed and "user:user_pnpm.md" in listed
    assert cli(project, "conflicts", "show", cid).returncode == 0
    done = cli(project, "conflicts", "resolve", cid, "--keep", "disk")
    assert done.returncode == 0 and "user:user_pnpm.md" in done.stdout


def test_claude_codes_managed_policy_decides_its_auto_memory_last(tmp_path: Path) -> None:
    from sagemem.store.native import claude_auto_memory

    project, home, policy = tmp_path / "proj", tmp_path / "home", tmp_path / "managed-settings.json"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryEnabled": True}))
    assert claude_auto_memory(project, home, {}, policy=policy)[0] is True  # no policy file
    policy.write_text(json.dumps({"autoMemoryEnabled": False}))
    on, why = claude_auto_memory(project, home, {}, policy=policy)
    assert on is False and str(policy) in why
