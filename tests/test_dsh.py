"""DeepSeek Harness: the hook as dsh's Claude Code bridge runs it, and `sagemem install dsh`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sagemem.agents import dsh
from sagemem.search import cache
from sagemem.store.errors import SagememError

from .memories import DANCE, QUESTION, make, make_project

# What dsh's bridge (@deepseek-ai/dsh-hooks-claude-code 0.0.1-rc.5) writes on a hook's stdin:
# Claude Code's event shape, recorded from a real dsh 0.1.0-rc.8 run.
SESSION = {
    "session_id": "session-ca094b2c-537a-4712-a74d-31f2d61a3942",
    "transcript_path": "/home/u/.dsh/sessions/--proj--/session-ca094b2c/session.jsonl.zstd",
}
SESSION_START = {**SESSION, "hook_event_name": "SessionStart", "source": "startup"}
PROMPT = {**SESSION, "hook_event_name": "UserPromptSubmit"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "proj")


def hook(event: dict[str, object], cwd: Path, env: dict[str, str] | None = None) -> dict[str, object] | None:
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "dsh"],
        input=json.dumps({**event, "cwd": str(cwd)}),
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout) if done.stdout else None


def context(output: dict[str, object] | None, event: str) -> str:
    assert output is not None and set(output) == {"hookSpecificOutput"}
    inner = output["hookSpecificOutput"]
    assert isinstance(inner, dict) and inner["hookEventName"] == event  # dsh ignores any other
    return str(inner["additionalContext"])


def test_the_detached_session_start_sequence(project: Path) -> None:
    """dsh runs SessionStart detached, then fires UserPromptSubmit again with the SessionStart
    context as the prompt: that one must not be taken for a question."""
    baseline = context(hook(SESSION_START, project), "SessionStart")
    assert "I teach evening classes" in baseline
    assert hook({**PROMPT, "prompt": baseline}, project) is None
    answer = context(hook({**PROMPT, "prompt": QUESTION}, project), "UserPromptSubmit")
    assert "Fifth Street" in answer


def test_tool_events_from_dsh_are_left_alone(project: Path) -> None:
    memory = project / ".sagemem" / "memory" / "project_studio_opening.md"
    event = {**SESSION, "hook_event_name": "PreToolUse", "tool_name": "Write"}
    assert hook({**event, "tool_input": {"file_path": str(memory), "content": "x"}}, project) is None


def test_in_a_sandbox_that_allows_only_the_temp_dir_it_still_injects(project: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file: nothing can be created under it")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {
        "SAGEMEM_STATE_DIR": str(blocked / "state"),
        "XDG_CACHE_HOME": str(blocked / "cache"),
        "TMPDIR": str(temp),
    }
    answer = context(hook({**PROMPT, "prompt": QUESTION}, project, env), "UserPromptSubmit")
    assert "Fifth Street" in answer
    private = temp / f"sagemem-{os.getuid()}"
    assert list(private.glob(f"index-v{cache.FORMAT}-*.sqlite"))  # the index went to the temp dir
    assert list(private.glob("state-*/sessions/*.json"))  # and the session's ledger
    assert any(private.glob("*.log"))  # what could not be written where it belongs is logged
    again = hook({**PROMPT, "prompt": "remind me where the studio lease is and the rent"}, project, env)
    assert again is None or "Fifth Street" not in context(again, "UserPromptSubmit")  # no repeats


def bridge_package(tmp_path: Path) -> Path:
    package = tmp_path / "npm" / "node_modules" / "@deepseek-ai" / "dsh-hooks-claude-code"
    (package / "lib").mkdir(parents=True)
    (package / "lib" / "index.js").write_text("export const name = 'hooks-claude-code'\n")
    manifest = {"name": dsh.BRIDGE, "exports": {".": {"default": "./lib/index.js"}}}
    (package / "package.json").write_text(json.dumps(manifest))
    return package


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "dsh-home"
    monkeypatch.setenv("DSH_HOME", str(folder))
    return folder


def test_install_writes_the_rows_and_the_hook_settings_and_is_idempotent(home: Path, tmp_path: Path) -> None:
    package = bridge_package(tmp_path)
    done = dsh.apply(add=True, bridge=str(package))
    patch = home / "cordis.patch.yml"
    entries = yaml.safe_load(patch.read_text())
    rows = {row["id"]: row for row in entries[0]["insert"]}
    assert rows["sagemem-hooks"]["name"] == str(package / "lib" / "index.js")
    assert rows["sagemem-hooks"]["config"]["configPath"] == str(home / "sagemem" / "hooks.json")
    assert rows["sagemem-mcp"]["name"] == "@deepseek-ai/dsh-mcp-client"
    assert rows["sagemem-mcp"]["config"]["args"][-1] == "mcp"
    settings = json.loads((home / "sagemem" / "hooks.json").read_text())
    assert set(settings["hooks"]) == {"SessionStart", "UserPromptSubmit"}
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert command.endswith(" hook dsh UserPromptSubmit")
    assert done["todo"] is None
    before = patch.read_bytes()
    again = dsh.apply(add=True, bridge=str(package))
    assert again["changes"] == [] and patch.read_bytes() == before
    dsh.apply(add=False)
    assert yaml.safe_load(patch.read_text()) == [] and not (home / "sagemem").exists()


USERS_PATCH = """\
# my own layer
- insert:
    - id: my-logger
      name: '@me/logger'
      config:
        path: !!js process.cwd() + '/log.txt'
- id: llm-deepseek
  config: {model: deepseek-chat}
"""


@pytest.mark.parametrize(
    "original",
    [
        USERS_PATCH,
        "# The user's own patch layer for this profile.\n# Rows here win over bundles.\n[]\n",
    ],
)
def test_the_persons_patch_file_is_kept_byte_for_byte(home: Path, tmp_path: Path, original: str) -> None:
    patch = home / "profiles" / "web" / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    patch.write_text(original)
    done = dsh.apply(add=True, profile="web", bridge=str(bridge_package(tmp_path)))
    text = patch.read_text()
    assert text.startswith(original.removesuffix("[]\n")) and dsh.BEGIN in text
    assert Path(done["backup"]).read_text() == original
    dsh.apply(add=False, profile="web")
    assert patch.read_text() == original


def test_without_the_bridge_it_says_the_one_command_left(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(home))  # no dsh, no npm to ask
    done = dsh.apply(add=True)
    assert done["todo"].splitlines() == [dsh.BRIDGE_INSTALL, "sagemem install dsh"]
    rows = yaml.safe_load((home / "cordis.patch.yml").read_text())[0]["insert"]
    assert [row["id"] for row in rows] == ["sagemem-mcp"]  # the MCP tools work meanwhile


def test_dry_run_writes_nothing(home: Path, tmp_path: Path) -> None:
    done = dsh.apply(add=True, bridge=str(bridge_package(tmp_path)), dry_run=True)
    assert done["changes"] and not home.exists()


@pytest.mark.parametrize(
    "text, rule",
    [("- insert: [\n", "not valid YAML"), ("plugins: {}\n", "must be a YAML list")],
)
def test_a_broken_patch_file_is_refused_and_left_alone(
    home: Path, tmp_path: Path, text: str, rule: str
) -> None:
    patch = home / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    patch.write_text(text)
    with pytest.raises(SagememError, match=rule) as caught:
        dsh.apply(add=True, bridge=str(bridge_package(tmp_path)))
    assert str(patch) in str(caught.value)
    assert patch.read_text() == text and not (home / "sagemem").exists()


def test_the_command_refuses_a_project_scope_and_a_bad_profile(home: Path) -> None:
    for args, rule in [
        (["--scope", "project"], "no project settings"),
        (["--profile", "../x"], "profile"),
        (["--profile", "never-used"], "no such dsh profile"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "sagemem", "install", "dsh", *args], capture_output=True, text=True
        )
        assert done.returncode == 1 and rule in done.stderr
    assert not home.exists()


def test_a_sage_mem_directory_is_used_as_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make(home / ".sage-mem" / "memory", DANCE)
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "path", "--json"], capture_output=True, text=True, cwd=tmp_path
    )
    assert json.loads(done.stdout)["memory_dir"] == str(home / ".sage-mem" / "memory")
    found = subprocess.run(
        [sys.executable, "-m", "sagemem", "search", "studio lease rent"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert "project_studio_opening.md" in found.stdout


def test_a_linked_patch_file_stays_a_link_and_keeps_its_permissions(home: Path, tmp_path: Path) -> None:
    dotfile = tmp_path / "dotfiles" / "dsh.yml"
    dotfile.parent.mkdir()
    dotfile.write_text(USERS_PATCH)
    dotfile.chmod(0o600)
    home.mkdir()
    (home / "cordis.patch.yml").symlink_to(dotfile)
    done = dsh.apply(add=True, bridge=str(bridge_package(tmp_path)))
    assert (home / "cordis.patch.yml").is_symlink() and dsh.BEGIN in dotfile.read_text()
    assert dotfile.stat().st_mode & 0o777 == 0o600
    assert Path(done["backup"]).stat().st_mode & 0o777 == 0o600  # the backup is no easier to read
    dsh.apply(add=False)
    assert dotfile.read_text() == USERS_PATCH


def test_crlf_files_come_back_byte_for_byte(home: Path, tmp_path: Path) -> None:
    patch = home / "cordis.patch.yml"
    patch.parent.mkdir(parents=True)
    original = USERS_PATCH.replace("\n", "\r\n").encode()
    patch.write_bytes(original)
    done = dsh.apply(add=True, bridge=str(bridge_package(tmp_path)))
    assert Path(done["backup"]).read_bytes() == original
    assert b"\n" not in patch.read_bytes().replace(b"\r\n", b"")  # one line ending throughout
    dsh.apply(add=False)
    assert patch.read_bytes() == original


def test_one_layer_only_and_the_shared_hook_settings_stay_while_used(home: Path, tmp_path: Path) -> None:
    (home / "profiles" / "web").mkdir(parents=True)
    dsh.apply(add=True, bridge=str(bridge_package(tmp_path)))
    with pytest.raises(SagememError, match="already loaded by"):
        dsh.apply(add=True, profile="web", bridge=str(bridge_package(tmp_path / "b")))
    assert not (home / "profiles" / "web" / "cordis.patch.yml").exists()
    done = dsh.apply(add=False, profile="web")
    assert done["changes"] == [] and (home / "sagemem" / "hooks.json").is_file()


def test_a_refused_change_writes_nothing_at_all(home: Path, tmp_path: Path) -> None:
    package = bridge_package(tmp_path)
    dsh.apply(add=True, bridge=str(package))
    patch = home / "cordis.patch.yml"
    edited = patch.read_text().replace("- insert:\n", "- insert:\n    - {id: my-own-row, name: x}\n")
    patch.write_text(edited)  # the person added a row of their own inside sagemem's block
    with pytest.raises(SagememError, match="nothing was changed"):
        dsh.apply(add=False)
    assert patch.read_text() == edited and (home / "sagemem" / "hooks.json").is_file()


def test_installing_again_where_dsh_is_not_on_path_keeps_the_bridge(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = bridge_package(tmp_path)
    dsh.apply(add=True, bridge=str(package))
    before = (home / "cordis.patch.yml").read_text()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    done = dsh.apply(add=True)
    assert done["todo"] is None and (home / "cordis.patch.yml").read_text() == before


def test_init_makes_sagemems_own_directory_beside_a_sage_mem_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make(home / ".sage-mem" / "memory", DANCE)
    before = sorted(p.name for p in (home / ".sage-mem" / "memory").iterdir())
    subprocess.run([sys.executable, "-m", "sagemem", "init"], capture_output=True, check=True, cwd=tmp_path)
    assert (home / ".sagemem" / "memory" / "MEMORY.md").is_file()
    assert sorted(p.name for p in (home / ".sage-mem" / "memory").iterdir()) == before


@pytest.mark.parametrize("entry", ["npm/node_modules/.bin", ""])  # an empty entry: the current folder
@pytest.mark.parametrize("shipped", ["dsh", "npm"])
def test_install_finds_no_program_through_a_relative_path_entry(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str, shipped: str
) -> None:
    """`install dsh` run in a clone, with a relative PATH entry (`node_modules/.bin`): the
    clone's `dsh` (whose bridge would then be mounted into every dsh session) and `npm` are
    not used. npm is asked from the home folder, with PATH's absolute entries only."""
    clone = tmp_path / "clone"
    marker = tmp_path / "ran"
    package = bridge_package(clone)  # clone/npm/node_modules/@deepseek-ai/...
    evil = clone / "npm" / "node_modules" / ".bin" / shipped
    evil.parent.mkdir(parents=True)
    evil.write_text(f"#!/bin/sh\n: > {marker}\necho {package.parent.parent}\n")
    evil.chmod(0o755)
    asked = tmp_path / "asked"
    npm = tmp_path / "npm-bin" / "npm"
    npm.parent.mkdir()
    npm.write_text(f'#!/bin/sh\nprintf "%s\\n%s\\n" "$PWD" "$PATH" > {asked}\necho {tmp_path / "none"}\n')
    npm.chmod(0o755)
    monkeypatch.chdir(evil.parent if entry == "" else clone)
    fixed = [str(npm.parent), "/usr/bin", "/bin"]
    monkeypatch.setenv("PATH", os.pathsep.join([entry, *fixed]))
    done = dsh.apply(add=True, dry_run=True)
    assert not marker.exists()
    assert done["todo"].splitlines()[0] == dsh.BRIDGE_INSTALL  # the clone's bridge was not taken
    assert asked.read_text().splitlines() == [str(Path.home()), os.pathsep.join(fixed)]
