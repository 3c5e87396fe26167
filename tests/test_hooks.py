"""Harness hooks, fed recorded event JSON for every event of every harness, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.agents import hooks
from sagemem.store import listing

from .memories import QUESTION, make_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


def hook(args: list[str], event: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    stdin = event if isinstance(event, str) else json.dumps(event)
    return subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", *args], input=stdin, capture_output=True, text=True, cwd=cwd
    )


def context(done: subprocess.CompletedProcess[str], event: str) -> str:
    assert done.returncode == 0 and done.stderr == ""
    data = json.loads(done.stdout)
    assert set(data) == {"hookSpecificOutput"}
    assert data["hookSpecificOutput"]["hookEventName"] == event
    return str(data["hookSpecificOutput"]["additionalContext"])


CLAUDE_PROMPT = {
    "session_id": "abc123",
    "transcript_path": "/tmp/x.jsonl",
    "permission_mode": "default",
    "hook_event_name": "UserPromptSubmit",
}
CODEX_PROMPT = {
    "session_id": "c-1",
    "turn_id": "t-1",
    "transcript_path": None,
    "hook_event_name": "UserPromptSubmit",
    "model": "gpt-x",
    "permission_mode": "default",
}
GEMINI_PROMPT = {
    "session_id": "g-1",
    "transcript_path": "/t",
    "hook_event_name": "BeforeAgent",
    "timestamp": "2026-11-30T09:00:00Z",
}


@pytest.mark.parametrize(
    "harness, base, event",
    [
        ("claude-code", CLAUDE_PROMPT, "UserPromptSubmit"),
        ("codex", CODEX_PROMPT, "UserPromptSubmit"),
        ("gemini", GEMINI_PROMPT, "BeforeAgent"),
    ],
)
def test_prompt_event_injects_context(project: Path, harness: str, base: dict, event: str) -> None:
    done = hook([harness, event], {**base, "cwd": str(project / "src"), "prompt": QUESTION}, project)
    text = context(done, event)
    assert "### project_studio_opening.md:" in text and "Citation discipline" in text
    assert "user_me.md" in text  # the session's first call brings the baseline


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_session_start_gives_baseline_and_compact_resets(project: Path, harness: str) -> None:
    start = {"session_id": "s9", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    assert "user_me.md" in context(hook([harness], start, project), "SessionStart")
    assert hook([harness], {**start, "source": "resume"}, project).stdout == ""  # already given
    assert "user_me.md" in context(hook([harness], {**start, "source": "compact"}, project), "SessionStart")


@pytest.mark.parametrize(
    "stdin",
    [
        "",
        "not json",
        "[1, 2]",
        json.dumps({"hook_event_name": "UserPromptSubmit"}),  # no prompt, no cwd, no session
        json.dumps({**CLAUDE_PROMPT, "prompt": "write a haiku about autumn", "session_id": None}),
        json.dumps({**CLAUDE_PROMPT, "hook_event_name": "PostToolUse", "tool_name": "Write"}),
        "\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ],
)
@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_bad_or_irrelevant_input_says_nothing_and_exits_0(project: Path, stdin: str, harness: str) -> None:
    done = hook([harness], stdin, project)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_failures_are_logged_not_shown(project: Path) -> None:
    done = hook(["claude-code", "UserPromptSubmit"], "not json", project)
    assert done.stdout == "" and done.returncode == 0
    log = (project / ".sagemem" / "memory" / ".sagemem" / "hook.log").read_text()
    assert "JSONDecodeError" in log


def test_no_memory_dir_means_silence(tmp_path: Path) -> None:
    done = hook(
        ["codex", "UserPromptSubmit"], {**CODEX_PROMPT, "cwd": str(tmp_path), "prompt": QUESTION}, tmp_path
    )
    assert done.returncode == 0 and done.stdout == ""


def test_a_huge_prompt_stays_within_the_harness_cap(project: Path) -> None:
    files = {
        f"reference_r{i}.md": f"---\ndescription: rent notes {i}\n---\n\n" + "rent lease " * 300 + "\n"
        for i in range(30)
    }
    for name, text in files.items():
        (project / ".sagemem" / "memory" / name).write_text(text)
    prompt = "rent lease " * 20_000
    done = hook(
        ["claude-code", "UserPromptSubmit"], {**CLAUDE_PROMPT, "cwd": str(project), "prompt": prompt}, project
    )
    assert len(context(done, "UserPromptSubmit")) < 10_000


def test_sagemem_text_coming_back_as_a_prompt_is_not_a_question(project: Path) -> None:
    first = context(
        hook(["claude-code"], {**CLAUDE_PROMPT, "cwd": str(project), "prompt": QUESTION}, project),
        "UserPromptSubmit",
    )
    again = hook(
        ["claude-code"],
        {**CLAUDE_PROMPT, "session_id": "other", "cwd": str(project), "prompt": first},
        project,
    )
    assert again.stdout == ""


def test_a_gemini_prompt_led_by_hook_context_still_gets_its_answer(project: Path) -> None:
    """Gemini CLI in `-p` mode puts the SessionStart context before the question, in
    `<hook_context>` blocks; sagemem's own text among them is not the question."""
    MemoryStore(project / ".sagemem" / "memory").search("lease")  # indexed outside the hook's deadline
    start = hook(
        ["gemini", "SessionStart"],
        {**GEMINI_PROMPT, "hook_event_name": "SessionStart", "cwd": str(project), "source": "startup"},
        project,
    )
    baseline = context(start, "SessionStart")
    assert "I teach evening classes" in baseline  # the baseline memory
    prompt = f"<hook_context>{baseline}</hook_context>\n<hook_context>other</hook_context>\n\n{QUESTION}"
    answer = context(
        hook(["gemini", "BeforeAgent"], {**GEMINI_PROMPT, "cwd": str(project), "prompt": prompt}, project),
        "BeforeAgent",
    )
    assert "Fifth Street" in answer


def test_the_hook_path_skips_click(project: Path) -> None:
    code = (
        "import sys, io; sys.argv = ['sagemem', 'hook', 'claude-code']; sys.stdin = io.StringIO('')\n"
        "from sagemem.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n"
        "    print(e.code, 'click' in sys.modules, 'sagemem.cli' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project)
    assert done.stderr.strip() == "0 False False"


def test_output_is_utf8_whatever_the_console_encoding(project: Path) -> None:
    (project / ".sagemem" / "memory" / "project_lease_zh.md").write_text(
        "---\ndescription: 舞蹈工作室租约 三月一日开始 月租八千元\n---\n\n"
        "舞蹈工作室的租约三月一日开始，月租八千元。\n",
        encoding="utf-8",
    )
    event = json.dumps({**CLAUDE_PROMPT, "cwd": str(project), "prompt": "舞蹈工作室租约什么时候开始？"})
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        input=event.encode("utf-8"),
        capture_output=True,
        cwd=project,
        env={**os.environ, "PYTHONIOENCODING": "ascii", "LC_ALL": "C"},
    )
    assert done.returncode == 0 and done.stderr == b""
    assert "月租八千元" in json.loads(done.stdout.decode("utf-8"))["hookSpecificOutput"]["additionalContext"]


# -- the write guard on the agent's own file tools ---------------------------------------------------


def tool(project: Path, fired: str, name: str, path: Path, session: str = "g1", **arguments: object) -> str:
    event = {
        "session_id": session,
        "cwd": str(project),
        "hook_event_name": fired,
        "tool_name": name,
        "tool_input": {"file_path": str(path), **arguments},
    }
    done = hook(["claude-code"], event, project)
    assert done.returncode == 0 and done.stderr == ""
    return done.stdout


def test_guard_allows_a_write_over_what_the_session_read(project: Path) -> None:
    memory = project / ".sagemem" / "memory" / "project_studio_opening.md"
    assert tool(project, "PostToolUse", "Read", memory) == ""
    assert tool(project, "PreToolUse", "Edit", memory, old_string="five years", new_string="six years") == ""
    store = MemoryStore(project / ".sagemem" / "memory")
    assert store.ledger()[memory.name].read.count == 1


def test_guard_denies_a_stale_edit_and_keeps_it_as_a_conflict(project: Path) -> None:
    memory = project / ".sagemem" / "memory" / "project_studio_opening.md"
    tool(project, "PostToolUse", "Read", memory)
    memory.write_text(memory.read_text().replace("first", "fifth"))  # a person edits it meanwhile
    out = json.loads(
        tool(project, "PreToolUse", "Edit", memory, old_string="five years", new_string="six years")
    )
    decision = out["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse" and decision["permissionDecision"] == "deny"
    assert "changed since this session last read it" in decision["permissionDecisionReason"]
    store = MemoryStore(project / ".sagemem" / "memory")
    [conflict] = store.conflicts()
    assert conflict.id in decision["permissionDecisionReason"]
    assert b"six years" in (conflict.proposed or b"") and b"fifth" in (conflict.proposed or b"")


def test_guard_denies_writing_a_memory_never_read_but_allows_creating_one(project: Path) -> None:
    folder = project / ".sagemem" / "memory"
    out = json.loads(tool(project, "PreToolUse", "Write", folder / "user_me.md", content="---\n---\nnew\n"))
    assert "was never read in this session" in out["hookSpecificOutput"]["permissionDecisionReason"]
    assert tool(project, "PreToolUse", "Write", folder / "project_new.md", content="---\n---\n") == ""


def test_after_a_write_the_index_follows_and_the_session_may_edit_again(project: Path) -> None:
    folder = project / ".sagemem" / "memory"
    path = folder / "project_new.md"
    path.write_text("---\ndescription: written by the agent's Write tool\n---\n\nbody\n")
    assert tool(project, "PostToolUse", "Write", path) == ""
    assert "(project_new.md) — written by the agent's Write tool" in (folder / "MEMORY.md").read_text()
    assert tool(project, "PreToolUse", "Edit", path, old_string="body", new_string="more") == ""


def test_a_write_someone_else_overwrote_does_not_count_as_read(project: Path) -> None:
    path = project / ".sagemem" / "memory" / "project_studio_opening.md"
    path.write_text("---\ndescription: saved by someone else meanwhile\n---\n\nother\n")
    assert tool(project, "PostToolUse", "Write", path, content="---\n---\nmine\n") == ""
    out = json.loads(tool(project, "PreToolUse", "Edit", path, old_string="other", new_string="x"))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_relative_path_counts_from_the_agents_directory(project: Path) -> None:
    event = {
        "session_id": "g1",
        "cwd": str(project),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": ".sagemem/memory/user_me.md", "content": "---\n---\nnew\n"},
    }
    done = hook(["claude-code"], event, project.parent)  # the hook itself runs elsewhere
    out = json.loads(done.stdout)
    assert "was never read in this session" in out["hookSpecificOutput"]["permissionDecisionReason"]


def test_compaction_keeps_what_the_session_read(project: Path) -> None:
    memory = project / ".sagemem" / "memory" / "project_studio_opening.md"
    assert tool(project, "PostToolUse", "Read", memory) == ""
    start = {"session_id": "g1", "cwd": str(project), "hook_event_name": "SessionStart", "source": "compact"}
    assert hook(["claude-code"], start, project).returncode == 0
    assert tool(project, "PreToolUse", "Edit", memory, old_string="five years", new_string="six years") == ""


def test_guard_ignores_files_that_are_not_memories(project: Path) -> None:
    for path in [
        project / "src" / "main.py",
        project / ".sagemem" / "memory" / "archive" / "x.md",
        project / "README.md",
    ]:
        assert tool(project, "PreToolUse", "Write", path, content="x") == ""


def test_session_start_repairs_an_index_a_merge_left_behind(project: Path) -> None:
    folder = project / ".sagemem" / "memory"
    store = MemoryStore(folder)
    store.rebuild_index()
    index = folder / "MEMORY.md"
    line = next(x for x in index.read_text().splitlines() if "(project_studio_opening.md)" in x)
    index.write_text(
        index.read_text()
        + line.replace("Opening", "Opening (other branch)")
        + "\n- [Gone](gone.md) — deleted\n"
    )
    assert not store.check_index().ok
    start = {"session_id": "m1", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    hook(["claude-code"], start, project)
    assert store.check_index().ok
    assert store.snapshots()[-1].label == "before index --rebuild"


@pytest.mark.parametrize("broken", ["duplicate", "dangling"])
def test_a_start_finds_either_fault_from_the_names_alone(project: Path, broken: str) -> None:
    """A start reads MEMORY.md and the file names; each fault alone still leads to the repair."""
    folder = project / ".sagemem" / "memory"
    store = MemoryStore(folder)
    store.rebuild_index()
    index = folder / "MEMORY.md"
    line = next(x for x in index.read_text().splitlines() if "(project_studio_opening.md)" in x)
    index.write_text(index.read_text() + (line if broken == "duplicate" else "- [Gone](gone.md) — x") + "\n")
    assert listing.index_needs_mending(folder)
    start = {"session_id": "m2", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    hook(["claude-code"], start, project)
    assert store.check_index().ok and not listing.index_needs_mending(folder)


def test_a_repair_too_late_for_the_start_waits_for_the_next(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = project / ".sagemem" / "memory"
    store = MemoryStore(folder)
    index = folder / "MEMORY.md"
    index.write_text(index.read_text() + "- [Gone](gone.md) — deleted\n")
    start = {"session_id": "m3", "cwd": str(project), "hook_event_name": "SessionStart", "source": "startup"}
    monkeypatch.setattr(hooks, "REPAIR_SECONDS", -1.0)  # the deadline has passed at once
    hooks.handle("claude-code", None, json.dumps(start), env={**os.environ})
    assert not store.check_index().ok and store.snapshots() == []  # nothing begun, nothing half done
    log = (folder / ".sagemem" / "hook.log").read_text()
    assert "index repair at session start put off" in log
    monkeypatch.setattr(hooks, "REPAIR_SECONDS", 1.5)
    hooks.handle("claude-code", None, json.dumps({**start, "session_id": "m4"}), env={**os.environ})
    assert store.check_index().ok


# -- secrets in what the agent's file tools write to memory -----------------------------------------

TOKEN = "ghp_" + "Q7w" * 12  # a GitHub token's shape


def claude_tool(home: Path, project: Path, fired: str, name: str, path: Path, **arguments: object) -> str:
    """Claude Code's hook, its own folder (auto memory) under `home`, on one file tool event."""
    event = {
        "session_id": "w1",
        "cwd": str(project),
        "hook_event_name": fired,
        "tool_name": name,
        "tool_input": {"file_path": str(path), **arguments},
    }
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code"],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")},
    )
    assert done.returncode == 0 and done.stderr == ""
    return done.stdout


def denied(out: str) -> str:
    decision = json.loads(out)["hookSpecificOutput"]
    assert decision["hookEventName"] == "PreToolUse" and decision["permissionDecision"] == "deny"
    return str(decision["permissionDecisionReason"])


def written_by_cli(folder: Path, file: str, text: str) -> str:
    """What `sagemem write` says when refusing `text` for `file` in `folder`."""
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(folder), "write", file],
        input=text,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    return done.stderr.strip()


def refused_as_write(reason: str, folder: Path, file: str, text: str) -> bool:
    """The hook says what `sagemem write` says, and how to mark a line that is no secret."""
    from sagemem.store.secrets import NOT_A_SECRET

    said = written_by_cli(folder, file, text)
    return NOT_A_SECRET in reason and reason in (said, f"{said}. {NOT_A_SECRET}")


@pytest.fixture
def auto_memory(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A project with no sagemem memory at all, and Claude Code's auto-memory folder for it."""
    from sagemem.store.native import claude_slug

    home, project = tmp_path / "home", tmp_path / "work" / "app"
    project.mkdir(parents=True)
    folder = home / ".claude" / "projects" / claude_slug(str(project)) / "memory"
    folder.mkdir(parents=True)
    return home, project, folder


def test_claudes_write_of_a_secret_into_its_auto_memory_is_refused_as_write_refuses_it(
    auto_memory: tuple[Path, Path, Path],
) -> None:
    home, project, folder = auto_memory
    content = f"---\nname: ci\ndescription: the CI bot\ntype: reference\n---\n\nThe bot uses {TOKEN}.\n"
    reason = denied(claude_tool(home, project, "PreToolUse", "Write", folder / "ci_bot.md", content=content))
    assert refused_as_write(reason, folder, "ci_bot.md", content)
    assert "ci_bot.md: line 7 looks like a GitHub token" in reason and TOKEN not in reason
    index = f"- [CI bot](ci_bot.md) — token {TOKEN}\n"
    assert "looks like a GitHub token" in denied(
        claude_tool(home, project, "PreToolUse", "Write", folder / "MEMORY.md", content=index)
    )
    clean = content.replace(TOKEN, "the token in 1Password")
    assert claude_tool(home, project, "PreToolUse", "Write", folder / "ci_bot.md", content=clean) == ""
    assert not list(folder.iterdir())  # the hook wrote nothing
    assert not list(home.rglob("conflicts/*.json"))  # and kept no conflict: it would hold the secret


def test_claudes_own_index_is_never_created_or_rewritten(auto_memory: tuple[Path, Path, Path]) -> None:
    """Claude Code keeps `MEMORY.md` in its folder: after its Write of a memory, sagemem makes
    no index there (Claude's next step, a Write of `MEMORY.md`, would fail on a file it has
    not read), nor rewrites the one Claude keeps; `check` and `index --rebuild` leave it too."""
    home, project, folder = auto_memory
    cat = folder / "user_cat.md"
    cat.write_text("---\nname: cat\ndescription: the user's cat\ntype: user\n---\n\nSesame.\n")
    assert claude_tool(home, project, "PostToolUse", "Write", cat, content=cat.read_text()) == ""
    assert sorted(p.name for p in folder.iterdir()) == ["user_cat.md"]
    own = "- [Cat](user_cat.md) - Claude's own words\n"
    (folder / "MEMORY.md").write_text(own)
    dog = folder / "user_dog.md"
    dog.write_text("---\nname: dog\ndescription: the user's dog\ntype: user\n---\n\nRex.\n")
    assert claude_tool(home, project, "PostToolUse", "Write", dog, content=dog.read_text()) == ""
    env = {**os.environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}

    def sagemem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sagemem", "--in", "claude", *args],
            capture_output=True,
            text=True,
            cwd=project,
            env=env,
        )

    assert sagemem("index", "--rebuild").returncode == 0
    checked = sagemem("check", "--fix")
    assert "index-" not in checked.stdout and "MEMORY.md: dangling" not in checked.stdout
    assert (folder / "MEMORY.md").read_text() == own
    assert "Rex" in sagemem("search", "the user's dog").stdout  # and it is still read


def test_an_edit_that_adds_a_secret_is_refused_and_one_that_keeps_an_old_one_is_not(project: Path) -> None:
    memory = project / ".sagemem" / "memory" / "project_studio_opening.md"
    assert tool(project, "PostToolUse", "Read", memory) == ""
    reason = denied(
        tool(
            project, "PreToolUse", "Edit", memory, old_string="five years", new_string=f"five years ({TOKEN})"
        )
    )
    assert refused_as_write(
        reason,
        memory.parent,
        memory.name,
        memory.read_text().replace("five years", f"five years ({TOKEN})", 1),
    )
    assert MemoryStore(memory.parent).conflicts() == []  # nothing kept: the record would hold it
    edits = [
        {"old_string": "five years", "new_string": "six years"},
        {"old_string": "six", "new_string": f"six {TOKEN}"},
    ]
    assert "looks like a GitHub token" in denied(
        tool(project, "PreToolUse", "MultiEdit", memory, edits=edits)
    )
    memory.write_text(memory.read_text() + f"\nold token: {TOKEN}\n")  # a person pasted it long ago
    tool(project, "PostToolUse", "Read", memory)
    assert tool(project, "PreToolUse", "Edit", memory, old_string="five years", new_string="six years") == ""


def test_creating_a_memory_with_a_secret_is_the_one_creation_refused(project: Path) -> None:
    folder = project / ".sagemem" / "memory"
    content = "---\ndescription: db\n---\n\nDATABASE_URL=postgres://app:Zq8!rT5vLm2@db.internal/app\n"
    reason = denied(tool(project, "PreToolUse", "Write", folder / "project_db.md", content=content))
    assert refused_as_write(reason, folder, "project_db.md", content)
    name = folder / f"reference_{TOKEN}.md"
    reason = denied(tool(project, "PreToolUse", "Write", name, content="---\ndescription: x\n---\n"))
    assert "looks like a GitHub token" in reason and TOKEN not in reason
    assert tool(project, "PreToolUse", "Write", project / "src" / "notes.md", content=f"token {TOKEN}") == ""
    assert (
        tool(project, "PreToolUse", "Write", folder / "project_new.md", content="---\n---\nno secret\n") == ""
    )


def test_hooks_without_any_memory_make_none(tmp_path: Path) -> None:
    """Before `init`, a session runs: no memory directory appears, in the project or the home."""
    project = tmp_path / "fresh"
    project.mkdir()
    home = Path(os.environ["HOME"])
    for event in (
        {"hook_event_name": "SessionStart", "session_id": "n1", "source": "startup"},
        {"hook_event_name": "UserPromptSubmit", "session_id": "n1", "prompt": "what is my cat called?"},
        {"hook_event_name": "PostToolUse", "session_id": "n1", "tool_name": "Read", "tool_input": {}},
    ):
        for harness in ("claude-code", "codex", "gemini"):
            done = hook([harness], {"cwd": str(project), **event}, project)
            assert done.returncode == 0 and done.stdout == "", done.stderr
    assert not (home / ".sagemem").exists() and list(project.iterdir()) == []
