"""Where a saved memory goes: a person's own facts never into a project's committed memory
unless the person says so, the first save makes the scope it needs, and the answer says
where it went; `remember TEXT` alone works."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from sagemem import MemoryStore
from sagemem.store.errors import InvalidMemory
from sagemem.store.sentence import fields_from

from .test_git import git
from .test_scopes import cli, home


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """A git project with its own memory and nothing else: no user memory yet."""
    root = tmp_path / "team"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    MemoryStore(root / ".sagemem" / "memory").init()
    assert not (home() / ".sagemem").exists()
    return root


def project_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / ".sagemem" / "memory").glob("*.md") if p.name != "MEMORY.md")


def test_a_user_memory_goes_to_the_users_own_memory_made_on_demand(team: Path) -> None:
    done = cli(team, "remember", "--type", "user", "--name", "cat", "--description", "My cat is Sesame")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("user:user_cat.md ")
    assert (home() / ".sagemem" / "memory" / "user_cat.md").is_file()
    assert project_files(team) == []
    assert "your user memory" in done.stderr and "not in any project" in done.stderr
    # The next project memory still goes to the project, and says so.
    done = cli(team, "new", "--type", "project", "--name", "ci", "--description", "CI runs on push")
    assert done.stdout.startswith("project:project_ci.md ") and "the project's memory" in done.stderr


def test_a_user_memory_goes_to_the_project_only_when_named(team: Path) -> None:
    done = cli(team, "new", "--in", "project", "--type", "user", "--name", "cat", "--description", "d")
    assert done.returncode == 0 and project_files(team) == ["user_cat.md"]
    assert not (home() / ".sagemem" / "memory").exists()
    # Named before the command, as every command takes it, it names the scope too.
    done = cli(team, "--in", "project", "remember", "--type", "user", "my dog is called Pepper")
    assert done.returncode == 0, done.stderr
    assert project_files(team) == ["user_cat.md", "user_my_dog_is_called_pepper.md"]
    assert not (home() / ".sagemem" / "memory").exists()


def test_where_the_users_memory_cannot_be_made_the_save_is_refused(team: Path) -> None:
    (home() / ".sagemem").write_text("not a folder\n")  # as a sandbox that cannot write there
    done = cli(team, "remember", "my cat is called Sesame")
    assert done.returncode != 0 and done.stdout == ""
    assert "could not be made" in done.stderr and "--in project" in done.stderr
    assert project_files(team) == []


def test_a_user_scope_the_settings_leave_out_is_not_replaced_by_the_project(team: Path) -> None:
    MemoryStore(home() / ".sagemem" / "memory").init()
    settings = team / ".sagemem" / "memory" / ".sagemem" / "settings.json"
    settings.write_text(json.dumps({"scopes": ["project"]}))
    done = cli(team, "remember", "--type", "user", "--name", "cat", "--description", "My cat")
    assert done.returncode != 0 and "settings leave out" in done.stderr and "--in project" in done.stderr
    assert project_files(team) == [] and not (home() / ".sagemem" / "memory" / "user_cat.md").exists()


def test_a_directory_chosen_by_hand_takes_a_user_memory(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    MemoryStore(folder).init()
    done = cli(tmp_path, "--dir", str(folder), "new", "--type", "user", "--name", "u", "--description", "d")
    assert done.returncode == 0 and (folder / "user_u.md").is_file()
    assert not (home() / ".sagemem").exists()


def test_the_first_save_makes_the_users_memory_with_no_directory_at_all(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    done = cli(bare, "remember", "--type", "project", "--name", "n", "--description", "notes")
    assert done.returncode == 0, done.stderr
    assert (home() / ".sagemem" / "memory" / "project_n.md").is_file()
    assert (home() / ".sagemem" / "memory" / "MEMORY.md").is_file()


def test_mcp_remember_of_a_user_memory_says_where_it_went(team: Path) -> None:
    pytest.importorskip("mcp")
    from .mcp_client import connect

    fields = {"type": "user", "name": "cat", "description": "The user's cat is Sesame", "body": "Sesame"}

    async def remember() -> dict[str, object]:
        async with connect(team) as client:
            result = await client.call_tool("memory_remember", fields)
            assert result.is_error is False, result.content
            return json.loads(result.content[0].text)

    answer = anyio.run(remember)
    assert answer["scope"] == "user" and "your user memory" in str(answer["saved_to"])
    assert (home() / ".sagemem" / "memory" / "user_cat.md").is_file() and project_files(team) == []


# --- remember TEXT ---------------------------------------------------------------------------


def test_remember_text_alone_saves_a_user_memory_and_says_what_it_chose(team: Path) -> None:
    done = cli(team, "remember", "记住：我的猫叫芝麻")
    assert done.returncode == 0, done.stderr
    file = done.stdout.split()[0]
    assert file == "user:user_我的猫叫芝麻.md"
    text = (home() / ".sagemem" / "memory" / "user_我的猫叫芝麻.md").read_text()
    assert "description: 我的猫叫芝麻" in text and text.endswith("\n我的猫叫芝麻\n") and "记住" not in text
    assert "chosen from the text: type 'user'" in done.stderr and f"sagemem update {file}" in done.stderr
    found = cli(team, "search", "我的猫叫什么").stdout
    assert "芝麻" in found


def test_remember_text_keeps_what_is_given_and_answers_in_json(team: Path) -> None:
    done = cli(team, "remember", "Remember that we deploy with make ship.", "--type", "project", "--json")
    data = json.loads(done.stdout)
    assert data["file"] == "project_we_deploy_with_make_ship.md" and data["scope"] == "project"  # one scope
    assert data["chosen"] == {"name": "we deploy with make ship", "description": "we deploy with make ship."}


def test_remember_without_text_still_needs_its_fields(team: Path) -> None:
    done = cli(team, "remember", "--type", "user", "--name", "x")
    assert done.returncode == 2 and "--description" in done.stderr and 'remember "..."' in done.stderr
    done = cli(team, "remember", "my cat", "--body", "b")
    assert done.returncode == 2 and "not both" in done.stderr
    done = cli(team, "remember", "记住：")
    assert done.returncode != 0 and "nothing to remember" in done.stderr
    assert project_files(team) == [] and not (home() / ".sagemem" / "memory").exists()


@pytest.mark.parametrize(
    ("text", "name", "description"),
    [
        ("记住：我的猫叫芝麻", "我的猫叫芝麻", "我的猫叫芝麻"),
        ("请记住，周五发布", "周五发布", "周五发布"),
        ("remember: prefers pnpm", "prefers pnpm", "prefers pnpm"),
        ("Please remember that the staging DB is read-only.", "the staging DB is read-only", None),
        ("note: tabs, not spaces\nin every Go file", "tabs, not spaces", "tabs, not spaces"),
        ("Remembering names is hard", "Remembering names is hard", None),  # not an ask
    ],
)
def test_fields_from_a_sentence(text: str, name: str, description: str | None) -> None:
    fields = fields_from(text)
    assert fields.name == name
    assert fields.description == (description or text.split("\n")[0].removeprefix("Please remember that "))
    assert fields.body.endswith("\n") and fields.body.strip() in text


def test_a_long_sentence_is_cut_at_a_word() -> None:
    fields = fields_from("remember " + "the release train leaves every second Tuesday " * 5)
    assert len(fields.description) <= 151 and fields.description.endswith("…")
    assert not fields.description[:-1].endswith(" ") and len(fields.name) <= 41
    with pytest.raises(InvalidMemory):
        fields_from("  remember:  ")


def test_the_mcp_server_starts_before_any_memory_and_its_first_save_makes_one(tmp_path: Path) -> None:
    """No `init`: the server answers, a search finds nothing, and the first save makes the
    user's memory (it refused to start: "memory directory does not exist")."""
    pytest.importorskip("mcp")
    import subprocess
    import sys

    bare = tmp_path / "bare"
    bare.mkdir()
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "cat"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "memory_remember",
                "arguments": {
                    "type": "user",
                    "name": "cat",
                    "description": "The user's cat is Sesame",
                    "body": "Sesame",
                },
            },
        },
    ]
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "mcp"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        capture_output=True,
        text=True,
        cwd=bare,
        timeout=120,
    )
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {1, 2, 3}, done.stderr
    assert answers[2]["result"]["isError"] is False and answers[2]["result"]["structuredContent"] == {
        "result": []
    }
    saved = json.loads(answers[3]["result"]["content"][0]["text"])
    assert saved["scope"] == "user" and (home() / ".sagemem" / "memory" / "user_cat.md").is_file()
