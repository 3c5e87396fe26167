"""The memory loop in the real CLIs: what one session saves, the next is given; and a harness
with no memory instructions of its own is told how to save. Opt-in, since the CLIs come from
npm: `SAGEMEM_E2E=1 .venv/bin/python -m pytest -n 0 tests/test_loop_e2e.py` (docs/e2e.md).

The rig (tests/e2e) runs each CLI headless against a fake model API on 127.0.0.1 that records
every request, in an isolated HOME; Claude Code's main loop is answered with a script of tool
calls, which it really executes (its hooks, its MCP servers, its permission system).

Each project is set up as a person would: `git init`, `sagemem init --project`, `sagemem
install <harness>`, whose portable hook line finds this interpreter's sagemem first on the
CLI's PATH. Where the rig's isolation makes the setup differ from a person's, the test says
how and why.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemem.store.command import command_line
from sagemem.store.native import claude_memory_dir
from tests.e2e.rigs import Rig, Run, dsh_install, e2e

SAGEMEM = [sys.executable, "-m", "sagemem"]
RULES = "How to save a memory"
FRIDAYS = "What is our rule about deploying to production on Fridays?"
# Claude Code's words for its auto-memory folder, in the system prompt it sends.
CLAUDE_MEMORY_AT = re.compile(r"persistent file-based memory at `([^`]+)`")
CLAUDE_HOOK_CONTEXT = "UserPromptSubmit hook additional context:"
# A shell step of the script: copies the folder named in the system prompt of the first
# request recorded (argv 1) into a file (argv 2), which the scripted Read shows the model.
FOLDER_FROM_PROMPT = f"""
import json, re, sys
for line in open(sys.argv[1], encoding="utf-8"):
    body = json.loads(line).get("body")
    if isinstance(body, dict) and body.get("tools"):
        found = re.search({CLAUDE_MEMORY_AT.pattern!r}, json.dumps(body.get("system")))
        open(sys.argv[2], "w", encoding="utf-8").write("MEMDIR=" + found.group(1) + "=END")
        break
"""


def sagemem(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SAGEMEM, *args], cwd=cwd, env={**os.environ, **env}, check=True, capture_output=True, text=True
    )


def make_project(folder: Path, harness: str | None = None) -> Path:
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    sagemem("init", "--project", cwd=folder)
    if harness is not None:
        done = sagemem("install", harness, cwd=folder)
        assert "to commit with the project:" in done.stdout  # the portable line, for every clone
    return folder


def user_home(folder: Path) -> Path:
    """A home with a user memory, `sagemem init` run in it."""
    folder.mkdir(parents=True)
    sagemem("init", cwd=folder, HOME=str(folder))
    return folder


def remember(
    folder: Path, kind: str, name: str, description: str, body: str, *, baseline: bool = False, **env: str
) -> None:
    fields = ["--type", kind, "--name", name, "--description", description, "--body", body]
    sagemem("remember", *fields, *(["--baseline"] if baseline else []), cwd=folder, **env)


def strings(value: object) -> Iterator[str]:
    """Every string in a request body."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def holding(body: object, text: str) -> list[str]:
    return [s for s in strings(body) if text in s]


def model_requests(log: Path, path: str) -> list[dict]:
    """The bodies of the POST requests whose URL path matches `path`, in the order sent."""
    bodies = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("method") == "POST" and re.search(path, record.get("path", "").split("?", 1)[0]):
            bodies.append(record["body"])
    return bodies


# -- Claude Code ------------------------------------------------------------------------------


def claude(rig: Rig, project: Path, script: list[dict], prompt: str, **options: object) -> list[dict]:
    """One `claude -p` session; the main-loop requests it sent (those with tools)."""
    done = rig.claude(project, prompt, script, **options).check()  # type: ignore[arg-type]
    return [b for b in done.requests(r"/v1/messages$") if isinstance(b, dict) and b.get("tools")]


def tool_results(body: dict) -> list[str]:
    """The text of each tool_result in a request's conversation, none of them an error."""
    found = []
    for message in body.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                assert not block.get("is_error"), block
                found.append("\n".join(strings(block.get("content"))))
    return found


def injected(body: dict, answer: str) -> str:
    """sagemem's UserPromptSubmit context in a Claude Code request, which holds `answer`, and
    no other part of the request does."""
    [text] = holding(body, answer)
    start = text.index(CLAUDE_HOOK_CONTEXT)
    assert text.index(answer) > start, f"{answer!r} is in the request, but not from the hook"
    context = text[start:]
    assert "(sagemem, from " in context or "（sagemem，来自 " in context  # the English or Chinese intro
    return context


# The upstream plugin's quick start, in both languages: the person asks to remember, a new
# session asks; (what is said, the description, the body, the question, the answer).
CAT = {
    "en": (
        "Remember that my cat is called Sesame.",
        "the user's pet",
        "The cat is called Sesame.",
        "What is my cat called?",
        "Sesame",
    ),
    "zh": ("记住：我的猫叫芝麻", "用户的宠物", "用户的猫叫芝麻。", "我的猫叫什么？", "芝麻"),
}


@e2e
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_claude_code_memory_in_its_own_folder_reaches_the_next_session(tmp_path: Path, lang: str) -> None:
    said, description, fact, question, answer = CAT[lang]
    project = make_project(tmp_path / "proj", "claude-code")
    rig = Rig(tmp_path / "cc")
    helper, shown = tmp_path / "folder_from_prompt.py", tmp_path / "memdir.txt"
    helper.write_text(FOLDER_FROM_PROMPT, encoding="utf-8")
    # Session 1 saves a memory as Claude's own system prompt tells its model to: with the
    # Write tool, in the folder that prompt names, in the format it gives (type under
    # `metadata:`). A model reads the folder in its prompt; here a shell step copies it out
    # of the first request as recorded, the scripted Read shows it to the model, and the Write
    # takes it from that tool result. The description does not hold the answer; the body does.
    memory = f"---\nname: user-cat\ndescription: {description}\nmetadata:\n  type: user\n---\n\n{fact}\n"
    write = {"file_path": "{{re:MEMDIR=(.+?)=END}}user_cat.md", "content": memory}
    script = [
        {"shell": shlex.join([sys.executable, str(helper), str(rig.next_log), str(shown)])},
        {"tool_use": {"name": "Read", "input": {"file_path": str(shown)}}},
        {"tool_use": {"name": "Write", "input": write}},
        {"text": "Saved."},
    ]
    first = claude(rig, project, script, said)
    [named] = CLAUDE_MEMORY_AT.findall("\n".join(strings(first[0]["system"])))
    home = rig.home  # the rig's HOME, and CLAUDE_CONFIG_DIR=home/.claude
    assert Path(named) == claude_memory_dir(project, home, {"CLAUDE_CONFIG_DIR": str(home / ".claude")})
    assert answer in (Path(named) / "user_cat.md").read_text(encoding="utf-8")
    assert not any(holding(b, RULES) for b in first)  # auto memory on: Claude's rules, not sagemem's

    # Session 2, in the same home: the first request for the question holds the memory's
    # body, from sagemem's prompt hook, named with its scope.
    second = claude(rig, project, [{"text": answer}], question, keep_home=True)
    context = injected(second[0], fact)
    assert "### claude:user_cat.md:" in context


@e2e
def test_claude_code_mcp_remember_reaches_the_next_session(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    rig = Rig(tmp_path / "cc")
    # The person has a user memory, made by `sagemem init` in their home. The rig makes a
    # fresh HOME (rig.home) for each run unless told to keep it: this one is made first, with
    # its user memory, and both runs keep it, as a person's home stays.
    home = user_home(rig.home)
    fields = {
        "type": "user",
        "name": "editor",
        "description": "the user's preferred code editor",
        "body": "The user edits code in Kakoune.",
    }
    script = [{"tool_use": {"name": "mcp__sagemem__memory_remember", "input": fields}}, {"text": "Saved."}]
    first = claude(rig, project, script, "Remember that I use Kakoune.", keep_home=True)
    [result] = tool_results(first[-1])
    assert json.loads(result)["file"] == "user:user_editor.md"  # type user: to the user scope
    user = home / ".sagemem" / "memory"
    assert "The user edits code in Kakoune." in (user / "user_editor.md").read_text(encoding="utf-8")
    index = (user / "MEMORY.md").read_text(encoding="utf-8")
    assert "(user_editor.md) — the user's preferred code editor" in index
    assert not (project / ".sagemem" / "memory" / "user_editor.md").exists()
    checked = sagemem("check", "--json", cwd=project, HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"))
    assert json.loads(checked.stdout)["ok"], checked.stdout

    second = claude(rig, project, [{"text": "Kakoune."}], "Which code editor do I use?", keep_home=True)
    assert "### user:user_editor.md:" in injected(second[0], "Kakoune")


@e2e
def test_claude_code_with_auto_memory_off_is_told_how_to_save(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    off = {"autoMemoryEnabled": False}  # the person's ~/.claude/settings.json
    [first] = claude(Rig(tmp_path / "cc"), project, [{"text": "Hello."}], "Hello.", user_settings=off)
    assert not holding(first, "persistent file-based memory")  # Claude's own memory section is gone
    [rules] = holding(first, RULES)
    assert "memory_remember(type, name, description" in rules  # the MCP server of .mcp.json


@e2e
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_claude_code_with_sagemem_memory_saves_with_mcp_and_the_next_session_is_given_it(
    tmp_path: Path, lang: str
) -> None:
    said, description, fact, question, answer = CAT[lang]
    project = make_project(tmp_path / "proj", "claude-code")
    rig = Rig(tmp_path / "cc")
    home = user_home(rig.home)  # the person's home, with a user memory, kept across sessions
    sagemem("install", "claude-code", "--memory", "sagemem", cwd=project, HOME=str(home))
    fields = {"type": "user", "name": "cat", "description": description, "body": fact}
    script = [{"tool_use": {"name": "mcp__sagemem__memory_remember", "input": fields}}, {"text": "Saved."}]
    first = claude(rig, project, script, said, keep_home=True)
    assert not holding(first[0], "persistent file-based memory")  # Claude's own memory is off
    [rules] = holding(first[0], RULES)  # sagemem's rules instead, with its MCP tools
    assert "memory_remember(type, name, description" in rules
    [result] = tool_results(first[-1])
    assert json.loads(result)["file"] == "user:user_cat.md"
    assert fact in (home / ".sagemem" / "memory" / "user_cat.md").read_text(encoding="utf-8")

    second = claude(rig, project, [{"text": answer}], question, keep_home=True)
    assert "### user:user_cat.md:" in injected(second[0], fact)


def freeze_project(folder: Path) -> tuple[Path, Path]:
    project = make_project(folder, "claude-code")
    remember(project, "project", "deploy freeze", "Deploy freeze rule for production", "No Friday deploys.")
    return project, project / ".sagemem" / "memory" / "project_deploy_freeze.md"


@e2e
@pytest.mark.parametrize("how", ["Edit", "mcp__sagemem__memory_update"])
def test_claude_code_updates_a_memory_and_the_next_session_gets_the_new_fact(
    tmp_path: Path, how: str
) -> None:
    project, path = freeze_project(tmp_path / "proj")
    rig = Rig(tmp_path / "cc")
    if how == "Edit":
        edit = {
            "file_path": str(path),
            "old_string": "No Friday deploys.",
            "new_string": "No deploys after 3pm.",
        }
        steps = [{"name": "Read", "input": {"file_path": str(path)}}, {"name": "Edit", "input": edit}]
    else:
        update = {
            "file": "project_deploy_freeze.md",
            "expected_version": "{{re:([0-9a-f]{64})}}",  # from memory_read's result
            "body": "No deploys after 3pm.",
        }
        read = {"name": "mcp__sagemem__memory_read", "input": {"file": "project_deploy_freeze.md"}}
        steps = [read, {"name": how, "input": update}]
    script = [{"tool_use": step} for step in steps] + [{"text": "Done."}]
    first = claude(rig, project, script, "Change the deploy freeze to after 3pm.")
    assert len(tool_results(first[-1])) == 2  # none an error
    text = path.read_text(encoding="utf-8")
    assert "No deploys after 3pm." in text and "No Friday deploys." not in text
    checked = sagemem("check", "--json", cwd=project)
    assert json.loads(checked.stdout)["ok"], checked.stdout

    second = claude(rig, project, [{"text": "After 3pm."}], FRIDAYS, keep_home=True)
    assert "### project:project_deploy_freeze.md:" in injected(second[0], "No deploys after 3pm.")
    assert not holding(second, "No Friday deploys.")  # the old fact is gone from the next session


@e2e
def test_claude_code_gets_nothing_injected_for_an_unrelated_question(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    remember(project, "project", "office cat", "the office cat", "The office cat is called Sesame.")
    requests = claude(Rig(tmp_path / "cc"), project, [{"text": "4"}], "What is 2+2?")
    assert holding(requests[0], "What is 2+2?")
    assert not holding(requests, "(sagemem, from ") and not holding(requests, "（sagemem，来自 ")
    assert not holding(requests, "The office cat is called Sesame.")


# -- Codex, Gemini CLI, DeepSeek Harness ------------------------------------------------------


@e2e
def test_codex_is_told_how_to_save_and_gets_the_user_memory_beside_the_projects(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "codex")
    remember(project, "project", "deploy freeze", "Deploy freeze rule for production", "No Friday deploys.")
    # The user memory is in $HOME/.sagemem/memory: HOME is a home made beforehand, CODEX_HOME
    # the rig's, with the config.toml for the fake model.
    home = user_home(tmp_path / "user-home")
    remember(home, "user", "cat", "the user's pet", "The cat is called Sesame.", HOME=str(home))
    run = Rig(tmp_path / "codex").codex(project, "What is my cat called?", home=home).check()
    first = run.requests(r"/responses$")[0]
    [rules] = holding(first, RULES)  # no MCP server in Codex's config.toml: the command lines
    assert f"`{command_line('remember')} --type T --name N" in rules  # this sagemem, found on PATH
    [context] = holding(first, "The cat is called Sesame.")
    scopes = f'"{project / ".sagemem" / "memory"}", "{home / ".sagemem" / "memory"}"'
    assert f"(sagemem, from {scopes})" in context and "### user:user_cat.md:" in context


@e2e
def test_gemini_is_told_how_to_save_and_a_baseline_leaves_the_answer_in(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "gemini")
    remember(
        project, "feedback", "answer style", "how to answer", "Answer in British English.", baseline=True
    )
    remember(project, "project", "deploy freeze", "Deploy freeze rule for production", "Codename PELICAN-42.")
    rig = Rig(tmp_path / "gemini")
    # The person's home has a user memory: made first, and kept for the run.
    home = user_home(rig.home)
    remember(home, "user", "cat", "the user's pet", "The cat is called Sesame.", HOME=str(home))
    done = rig.gemini(project, FRIDAYS, keep_home=True).check()
    requests = done.requests(r":(stream)?[gG]enerateContent$")
    requests = [b for b in requests if holding(b, FRIDAYS)]  # the agent's, not the CLI's router's
    [rules] = holding(requests[0], RULES)  # the MCP server is in the settings: its tools named
    assert "memory_remember(type, name, description" in rules
    scopes = f'"{project / ".sagemem" / "memory"}", "{home / ".sagemem" / "memory"}"'
    assert holding(requests[0], scopes), "both scopes named in the first request"
    # `gemini -p` puts what the SessionStart hook said, the baseline and the rules, before the
    # question in a <hook_context> block, and that is the prompt the prompt hook gets: it must
    # still answer the question.
    asked = requests[-1]
    [start] = holding(asked, FRIDAYS)
    assert start.startswith("<hook_context>") and "Answer in British English." in start
    [answer] = holding(asked, "Codename PELICAN-42.")
    assert answer.startswith("<hook_context>") and "### project:project_deploy_freeze.md:" in answer


def dsh_project(tmp_path: Path, event: str, before: str, after: str | None = None) -> tuple[Path, Path]:
    """A project with a memory, and `sagemem install dsh` in a home of dsh's own; in the
    bridge's hook settings that install wrote, `before` runs ahead of sagemem's `event` hook
    (and `after` after it). The project and that home."""
    project = make_project(tmp_path / "proj")
    remember(project, "project", "deploy freeze", "Deploy freeze rule for production", "Codename PELICAN-42.")
    _, _, bridge = dsh_install()
    home = tmp_path / "dsh-home"  # dsh reads no configuration from a project: the install is per user
    sagemem("install", "dsh", "--bridge", str(bridge), cwd=project, DSH_HOME=str(home))
    settings = home / "sagemem" / "hooks.json"
    hooks = json.loads(settings.read_text(encoding="utf-8"))
    [group] = hooks["hooks"][event]
    group["hooks"][:0] = [{"type": "command", "command": before, "timeout": 30}]
    group["hooks"] += [{"type": "command", "command": after, "timeout": 30}] if after else []
    settings.write_text(json.dumps(hooks), encoding="utf-8")
    return project, home


def dsh_requests(run: Run) -> list[dict]:
    """The conversation's requests (the session-title request has no tools)."""
    return [b for b in run.requests(r"/chat/completions$") if b.get("tools")]


# A hook of a person's own: context for the event that fired, in the shape every harness reads.
MARKER_HOOK = """
import json, sys
event = json.load(sys.stdin).get("hook_event_name")
print(json.dumps({{"hookSpecificOutput": {{"hookEventName": event, "additionalContext": "{marker}"}}}}))
"""

# dsh fires SessionStart detached, at the same time as the first step, whose UserPromptSubmit
# hook runs before the first request; which of sagemem's two hooks gets to the session first
# is a race, won by either in plain runs. Each test below decides it with a `sleep` ahead of
# one of sagemem's hooks (the bridge runs the hooks of an event one after the other).


@e2e
def test_dsh_is_told_how_to_save_and_gets_both_scopes_in_its_first_request(tmp_path: Path) -> None:
    project, dsh_home = dsh_project(tmp_path, "UserPromptSubmit", "true")
    home = user_home(tmp_path / "user-home")
    remember(home, "user", "cat", "the user's pet", "The cat is called Sesame.", HOME=str(home))
    run = Rig(tmp_path / "dsh").dsh(project, "What is my cat called?", dsh_home=dsh_home, home=home).check()
    first = dsh_requests(run)[0]
    [rules] = holding(first, RULES)  # with the prompt hook, whichever hook ran first
    assert "memory_remember(type, name, description" in rules
    [context] = holding(first, "The cat is called Sesame.")
    scopes = f'"{project / ".sagemem" / "memory"}", "{home / ".sagemem" / "memory"}"'
    assert f"(sagemem, from {scopes})" in context and "### user:user_cat.md:" in context


@e2e
def test_dsh_is_told_how_to_save_with_the_mcp_tools_it_offers(tmp_path: Path) -> None:
    project, home = dsh_project(tmp_path, "UserPromptSubmit", "sleep 2")  # SessionStart's hook first
    run = Rig(tmp_path / "dsh").dsh(project, FRIDAYS, dsh_home=home).check()
    # The SessionStart context arrives after the first request, and dsh takes one more step.
    told = next(b for b in dsh_requests(run) if holding(b, RULES))
    [rules] = holding(told, RULES)
    assert "memory_remember(type, name, description" in rules
    assert "mcp__sagemem__memory_remember" in {t.get("function", {}).get("name") for t in told["tools"]}


@e2e
def test_dsh_is_told_how_to_save_when_the_prompt_hook_comes_first(tmp_path: Path) -> None:
    marker = "MARKER-START-4471"
    script = tmp_path / "marker_hook.py"
    script.write_text(MARKER_HOOK.format(marker=marker), encoding="utf-8")
    project, home = dsh_project(
        tmp_path, "SessionStart", "sleep 2", shlex.join([sys.executable, str(script)])
    )
    # A Stop hook holds each turn open for 3 s, so the late SessionStart context still lands in
    # the session; the marker handler, run right after sagemem's, shows it did.
    settings = home / "sagemem" / "hooks.json"
    hooks = json.loads(settings.read_text(encoding="utf-8"))
    hooks["hooks"].setdefault("Stop", []).append(
        {"hooks": [{"type": "command", "command": "sleep 3", "timeout": 30}]}
    )
    settings.write_text(json.dumps(hooks), encoding="utf-8")
    run = Rig(tmp_path / "dsh").dsh(project, FRIDAYS, dsh_home=home).check()
    told = next(b for b in dsh_requests(run) if holding(b, marker))
    assert holding(told, RULES), "sagemem's SessionStart hook gave no saving rules"


@e2e
def test_claude_codes_edit_of_a_memory_a_person_changed_meanwhile_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    remember(project, "project", "deploy freeze", "Deploy freeze rule for production", "No Friday deploys.")
    path = project / ".sagemem" / "memory" / "project_deploy_freeze.md"
    edit = {"file_path": str(path), "old_string": "No Friday deploys.", "new_string": "No deploys after 3pm."}
    script = [
        {"tool_use": {"name": "Read", "input": {"file_path": str(path)}}},
        # A person edits the file while the agent works.
        {
            "shell": shlex.join(
                ["sh", "-c", f"echo 'Hotfixes need two approvals.' >> {shlex.quote(str(path))}"]
            )
        },
        {"tool_use": {"name": "Edit", "input": edit}},
        {"tool_use": {"name": "Read", "input": {"file_path": str(path)}}},
        {"tool_use": {"name": "Edit", "input": edit}},
        {"text": "Done."},
    ]
    requests = claude(Rig(tmp_path / "cc"), project, script, "Change the deploy freeze to after 3pm.")
    results = []
    for message in requests[-1]["messages"]:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append((bool(block.get("is_error")), "\n".join(strings(block.get("content")))))
    refused, second_edit = results[1], results[3]
    # Claude Code 2.1 refuses this Edit itself (its own check of the file's time since the
    # Read, made before the PreToolUse hooks run); sagemem's guard refuses it too where that
    # check does not, and then keeps the refused change (tests/test_hooks.py).
    assert refused[0] and ("modified since read" in refused[1] or "changed since" in refused[1]), refused
    assert not second_edit[0], second_edit  # after a fresh Read the same Edit goes through
    text = path.read_text(encoding="utf-8")
    assert "No deploys after 3pm." in text and "Hotfixes need two approvals." in text  # nothing lost
    checked = sagemem("check", "--json", cwd=project)
    assert json.loads(checked.stdout)["ok"], checked.stdout
