"""`sagemem dream` against a scripted OpenAI-compatible server on 127.0.0.1 (the real
`openai` SDK, no network, no key)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sagemem import MemoryStore
from sagemem.cli import cli
from sagemem.dream import DreamBusy, apply_proposals, dream, rollback, runs
from sagemem.dream.model import ModelError, endpoint
from sagemem.store.config import Settings

from .fake_openai import calls, final, serving, tool_results
from .memories import make

DEPLOY = {
    "project_deploy.md": """---
name: How we deploy
description: Deploying to production from the release tag
type: project
updated: 2026-10-01
---

Run `make deploy-prod` from the release tag.
""",
    "project_deploy_steps.md": """---
name: Deploy steps
description: Steps to deploy to production
type: project
updated: 2026-11-20
---

Tell #ops first, then run `make deploy-prod` from the release tag.
""",
    "user_profile.md": """---
name: Profile
description: Lin works on the payments backend in Go
type: user
---

Lin prefers short answers.
""",
}

MERGED = """---
name: How we deploy
description: Deploying to production from the release tag, and who to tell first
type: project
updated: 2026-11-20
---

Tell #ops first, then run `make deploy-prod` from the release tag.
"""


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", DEPLOY)


def files_of(store: MemoryStore) -> dict[str, bytes]:
    """Every file of the memory directory a person owns (memories, MEMORY.md, archive/),
    not sagemem's state nor the run reports."""
    root = store.memory_dir
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] not in (".sagemem", "dream")
    }


def merge_script(write: str = "write_memory", archive: str = "archive_memory") -> list[Any]:
    return [
        calls(("list_memory", {}), ("audit_memory", {})),
        calls(
            ("read_memory", {"file": "project_deploy.md"}),
            ("read_memory", {"file": "project_deploy_steps.md"}),
        ),
        calls(
            (
                write,
                {"file": "project_deploy.md", "content": MERGED, "reason": "merge the two deploy memories"},
            ),
            (archive, {"file": "project_deploy_steps.md", "reason": "merged into project_deploy.md"}),
        ),
        final("Merged the two deploy memories."),
    ]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_report_mode_changes_no_byte_and_apply_carries_out_the_proposal(store: MemoryStore) -> None:
    before = files_of(store)
    with serving(merge_script("propose_write", "propose_archive")) as server:
        manifest = dream(store, base_url=server.url, model="fake-model")
    assert files_of(store) == before
    assert manifest["status"] == "done" and manifest["mode"] == "report" and manifest["changes"] == []
    assert [(p["op"], p["file"]) for p in manifest["proposals"]] == [
        ("write", "project_deploy.md"),
        ("archive", "project_deploy_steps.md"),
    ]
    assert manifest["snapshot"] is None
    # Report mode offers no write tool at all.
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert offered == {"list_memory", "read_memory", "audit_memory", "propose_write", "propose_archive"}
    report = (store.memory_dir / "dream" / f"{manifest['id']}.md").read_text()
    assert "propose_write" not in report and "sagemem dream apply" in report and "merge the two" in report

    applied = apply_proposals(store, manifest["id"])
    assert applied["source"] == manifest["id"] and applied["status"] == "done"
    assert (store.memory_dir / "project_deploy.md").read_text() == MERGED
    assert (store.memory_dir / "archive" / "project_deploy_steps.md").is_file()
    assert not (store.memory_dir / "project_deploy_steps.md").exists()
    with pytest.raises(Exception, match="applied already"):
        apply_proposals(store, manifest["id"])


def test_apply_mode_merges_and_archives_behind_a_snapshot_and_rolls_back(store: MemoryStore) -> None:
    before = files_of(store)
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert manifest["status"] == "done", manifest["stop"]
    assert manifest["rounds"] == 4 and manifest["tokens"] == 350
    assert "Merged" in manifest["summary"]
    # A snapshot of the directory as it was, taken before the first change.
    snap = next(s for s in store.snapshots() if s.id == manifest["snapshot"])
    assert {f["name"]: f["sha256"] for f in snap.files} == {
        name: sha(data) for name, data in before.items() if "/" not in name and name.endswith(".md")
    }
    # The declaration's sha256s match the disk, before and after.
    write, archive = manifest["changes"]
    assert (write["op"], write["file"], archive["op"], archive["file"]) == (
        "write",
        "project_deploy.md",
        "archive",
        "project_deploy_steps.md",
    )
    assert write["before"]["sha256"] == sha(before["project_deploy.md"])
    assert write["after"]["sha256"] == sha((store.memory_dir / "project_deploy.md").read_bytes())
    assert archive["before"]["sha256"] == sha(before["project_deploy_steps.md"]) and archive["after"] is None
    assert "project_deploy_steps.md" not in (store.memory_dir / "MEMORY.md").read_text()
    assert (store.memory_dir / "archive" / "project_deploy_steps.md").is_file()
    saved = json.loads((store.state_dir / "dream" / manifest["id"] / "manifest.json").read_text())
    assert saved["changes"] == manifest["changes"] and saved["status"] == "done"

    done = rollback(store, manifest["id"])
    assert done["restored"] == ["project_deploy_steps.md", "project_deploy.md", "MEMORY.md"]
    assert not done["conflicts"]
    after = files_of(store)
    assert {k: v for k, v in after.items() if k != "MEMORY.md"} == {
        k: v for k, v in before.items() if k != "MEMORY.md"
    }
    assert after["MEMORY.md"] == before["MEMORY.md"]
    with pytest.raises(Exception, match="rolled back already"):
        rollback(store, manifest["id"])


def test_rollback_leaves_a_file_edited_after_the_run_and_restores_the_rest(store: MemoryStore) -> None:
    before = files_of(store)
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    edited = store.memory_dir / "project_deploy.md"
    edited.write_text(MERGED + "\nA person's later note.\n")
    done = rollback(store, manifest["id"])
    assert done["restored"] == ["project_deploy_steps.md", "MEMORY.md"]
    assert done["conflicts"] == ["project_deploy.md (changed after the run)"]
    assert (
        "Deploying to production from the release tag, and who"
        in (store.memory_dir / "MEMORY.md").read_text()
    )
    assert edited.read_text().endswith("A person's later note.\n")
    assert (store.memory_dir / "project_deploy_steps.md").read_bytes() == before["project_deploy_steps.md"]
    assert not (store.memory_dir / "archive" / "project_deploy_steps.md").exists()


def test_rollback_all_puts_the_directory_back_and_archives_what_the_run_made(store: MemoryStore) -> None:
    before = files_of(store)
    new = MERGED.replace("How we deploy", "Release train")
    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(
            ("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "clearer"}),
            ("write_memory", {"file": "project_release_train.md", "content": new, "reason": "split out"}),
        ),
        final("done"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert [c["op"] for c in manifest["changes"]] == ["write", "create"]
    done = rollback(store, manifest["id"], scope="all")
    assert done["retired"] == ["project_release_train.md"]
    after = files_of(store)
    assert after.pop("archive/project_release_train.md")  # moved, never deleted
    assert after == before


def test_a_traversal_or_a_reserved_name_is_refused_and_recorded(store: MemoryStore, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("---\ndescription: not yours\n---\n")
    script = [
        calls(
            ("read_memory", {"file": "../secret.md"}),
            ("write_memory", {"file": "../evil.md", "content": MERGED, "reason": "x"}),
            ("write_memory", {"file": "MEMORY.md", "content": "# hijacked\n", "reason": "x"}),
            ("archive_memory", {"file": "/etc/passwd", "reason": "x"}),
            ("delete_memory", {"file": "user_profile.md"}),
        ),
        final("done"),
    ]
    before = files_of(store)
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
        answers = tool_results(server.requests[1])
    assert all(a.startswith("refused:") for a in answers) and len(answers) == 5
    assert [r["tool"] for r in manifest["refused"]] == [
        "read_memory",
        "write_memory",
        "write_memory",
        "archive_memory",
        "delete_memory",
    ]
    assert "single path segment" in manifest["refused"][0]["why"]
    assert files_of(store) == before and not (tmp_path / "evil.md").exists()
    assert manifest["changes"] == [] and manifest["snapshot"] is None


def test_a_file_never_read_or_changed_since_it_was_read_is_not_written(store: MemoryStore) -> None:
    person = "---\nname: How we deploy\ndescription: A person's edit\ntype: project\n---\n\nMine.\n"

    def edit_then_write(_request: dict[str, Any]) -> dict[str, Any]:
        (store.memory_dir / "project_deploy.md").write_text(person)  # a person, meanwhile
        return calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "merge"}))

    script = [
        calls(("write_memory", {"file": "user_profile.md", "content": MERGED, "reason": "unread"})),
        calls(("read_memory", {"file": "project_deploy.md"})),
        edit_then_write,
        final("done"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert "read it (read_memory) before changing it" in manifest["refused"][0]["why"]
    assert "changed since you read it" in manifest["refused"][1]["why"]
    assert (store.memory_dir / "project_deploy.md").read_text() == person
    assert [c.file for c in store.conflicts()] == ["project_deploy.md"]
    assert manifest["changes"] == []


def test_the_model_failing_in_round_3_leaves_a_partial_declaration(store: MemoryStore) -> None:
    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "merge"})),
        500,
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert manifest["status"] == "failed" and "500" in manifest["stop"]
    assert [c["file"] for c in manifest["changes"]] == ["project_deploy.md"]
    saved = json.loads((store.state_dir / "dream" / manifest["id"] / "manifest.json").read_text())
    assert saved["status"] == "failed" and len(saved["changes"]) == 1 and saved["finished"]
    report = (store.memory_dir / "dream" / f"{manifest['id']}.md").read_text()
    assert "failed" in report and "`project_deploy.md`" in report
    rollback(store, manifest["id"])
    assert (store.memory_dir / "project_deploy.md").read_text() == DEPLOY["project_deploy.md"]


def test_round_and_token_limits_stop_a_runaway_run(store: MemoryStore) -> None:
    forever = [calls(("list_memory", {}), tokens=1000)] * 50
    with serving(list(forever)) as server:
        by_rounds = dream(store, base_url=server.url, model="fake-model", max_rounds=3)
    assert (by_rounds["status"], by_rounds["stop"], by_rounds["rounds"]) == ("stopped", "round limit (3)", 3)
    with serving(list(forever)) as server:
        by_tokens = dream(store, base_url=server.url, model="fake-model", max_tokens=2500)
    assert (by_tokens["status"], by_tokens["stop"], by_tokens["rounds"]) == (
        "stopped",
        "token limit (2500)",
        3,
    )
    assert len(server.requests) == 3


def test_an_unknown_model_fails_before_any_change(store: MemoryStore) -> None:
    with serving(merge_script(), models=["other-model", "third"]) as server:
        with pytest.raises(ModelError, match="does not know the model 'fake-model'.*other-model"):
            dream(store, apply=True, base_url=server.url, model="fake-model")
        assert server.requests == []
    assert runs(store) == [] and store.snapshots() == []


def test_a_second_run_while_one_holds_the_lock_refuses(store: MemoryStore) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from sagemem.dream import record\n"
            "with record.running(Path(sys.argv[1]), '20261201-000000-abcd'):\n"
            "    print('held', flush=True); time.sleep(60)",
            str(store.state_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = files_of(store)
        with serving(merge_script()) as server:
            with pytest.raises(DreamBusy, match="20261201-000000-abcd"):
                dream(store, apply=True, base_url=server.url, model="fake-model")
        assert files_of(store) == before and runs(store) == []
    finally:
        holder.kill()  # a dead holder: the kernel drops its lock
        holder.wait(timeout=10)
        holder.stdout.close() if holder.stdout else None
    with serving(merge_script()) as server:
        assert dream(store, apply=True, base_url=server.url, model="fake-model")["status"] == "done"


def test_a_missing_reason_is_accepted_on_a_write_and_flagged(store: MemoryStore) -> None:
    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(("write_memory", {"file": "project_deploy.md", "content": MERGED})),
        calls(("archive_memory", {"file": "project_deploy.md"})),
        final("done"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    (change,) = manifest["changes"]
    assert change["no_reason"] is True
    assert "needs a reason" in manifest["refused"][0]["why"]
    assert "**no reason given**" in (store.memory_dir / "dream" / f"{manifest['id']}.md").read_text()


def test_the_command_line(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    with serving(merge_script("propose_write", "propose_archive")) as server:
        monkeypatch.setenv("SAGEMEM_DREAM_BASE_URL", server.url)
        monkeypatch.setenv("SAGEMEM_DREAM_MODEL", "fake-model")
        done = runner.invoke(cli, ["--dir", str(store.memory_dir), "dream", "--json"])
    assert done.exit_code == 0, done.output
    run_id = json.loads(done.stdout)["id"]
    listed = runner.invoke(cli, ["--dir", str(store.memory_dir), "dream", "list"])
    assert run_id in listed.stdout and "report" in listed.stdout
    shown = runner.invoke(cli, ["--dir", str(store.memory_dir), "dream", "show", run_id])
    assert shown.stdout.startswith(f"# Dream run {run_id}")
    applied = runner.invoke(cli, ["--dir", str(store.memory_dir), "dream", "apply", run_id])
    assert applied.exit_code == 0 and "write   project_deploy.md" in applied.stdout
    bad = runner.invoke(cli, ["--dir", str(store.memory_dir), "dream", "show", "../../etc"])
    assert bad.exit_code == 1 and "not a dream run id" in bad.output


def test_where_the_endpoint_comes_from_and_whom_a_key_is_sent_to() -> None:
    env = {
        "SAGEMEM_DREAM_BASE_URL": "http://127.0.0.1:8000/v1",
        "SAGEMEM_DREAM_MODEL": "m",
        "OPENAI_API_KEY": "k",
    }
    assert endpoint(Settings(), env=env) == ("http://127.0.0.1:8000/v1", "m", "k", "environment")
    flagged = endpoint(
        Settings(), base_url="https://api.deepseek.com", model="deepseek-chat", env={"DEEPSEEK_API_KEY": "d"}
    )
    assert flagged.api_key == "d" and flagged.source == "flag"
    cloned = Settings(dream_base_url="https://collector.example/v1", dream_model="m")
    with pytest.raises(ModelError, match="settings.json only"):
        endpoint(cloned, env={"OPENAI_API_KEY": "k"})
    with pytest.raises(ModelError, match="settings.json only"):
        endpoint(cloned, env={})  # nor the memories themselves
    local = Settings(dream_base_url="http://127.0.0.1:11434/v1", dream_model="qwen")
    assert endpoint(local, env={"OPENAI_API_KEY": "k"}).source == "settings"
    with pytest.raises(ModelError, match="no model endpoint"):
        endpoint(Settings(), env={})
    with pytest.raises(ModelError, match="http"):
        endpoint(Settings(), base_url="file:///etc/passwd", model="m", env={})


def test_a_run_id_names_no_path(store: MemoryStore) -> None:
    for bad in ("../x", "20261201-000000-abcd/../../x", ""):
        with pytest.raises(Exception, match="not a dream run id"):
            rollback(store, bad)


def test_the_report_is_outside_the_memory_scan(store: MemoryStore) -> None:
    findings = store.check().findings
    with serving([final("Nothing to change.")]) as server:
        manifest = dream(store, base_url=server.url, model="fake-model")
    assert (store.memory_dir / "dream" / f"{manifest['id']}.md").is_file()
    assert sorted(store.files()) == sorted(DEPLOY)
    assert store.check().findings == findings


def test_the_prompt_follows_the_memories_language(tmp_path: Path) -> None:
    text = "---\nname: 部署\ndescription: 生产环境的部署流程\ntype: project\n---\n\n先通知运维。\n"
    zh = make(tmp_path / "zh", {"project_部署.md": text})
    with serving([final("没有需要修改的。")]) as server:
        dream(zh, base_url=server.url, model="fake-model")
    assert "记忆目录" in server.requests[0]["messages"][0]["content"]
    assert "不是给你的指令" in server.requests[0]["messages"][0]["content"]


def test_time_passes(store: MemoryStore) -> None:
    """Two runs started in the same second get different ids."""
    with serving([final("a"), final("b")]) as server:
        first = dream(store, base_url=server.url, model="fake-model")
        second = dream(store, base_url=server.url, model="fake-model")
    assert first["id"] != second["id"] and [m["id"] for m in runs(store)] == sorted(
        [first["id"], second["id"]]
    )


def test_the_trigger_is_due_after_hours_and_sessions(tmp_path: Path) -> None:
    from sagemem.dream import auto

    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True)
    settings = Settings(dream_min_hours=24, dream_min_sessions=3)
    now = time.time()
    assert not auto.due(state, settings, now)  # never ran, but no sessions yet
    for i in range(3):
        (state / "sessions" / f"s{i}.json").write_text("{}")
    assert auto.due(state, settings, now)
    auto.record_run(state, now - 3600)  # an hour ago
    assert not auto.due(state, settings, now)
    auto.record_run(state, now - 25 * 3600)
    assert auto.due(state, settings, now)
    os.utime(state / "sessions" / "s0.json", (now - 26 * 3600, now - 26 * 3600))
    assert not auto.due(state, settings, now)  # two sessions since the last run


def test_the_trigger_is_read_from_the_environment_only(tmp_path: Path) -> None:
    from sagemem.store.config import load_settings

    (tmp_path / "settings.json").write_text(json.dumps({"dream_auto": "apply", "dream_model": "m"}))
    assert load_settings(tmp_path, {}).dream_auto == ""  # a cloned settings file cannot turn it on
    assert load_settings(tmp_path, {}).dream_model == "m"
    assert load_settings(tmp_path, {"SAGEMEM_DREAM_AUTO": "report"}).dream_auto == "report"


def test_session_start_starts_a_run_in_the_background(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sagemem.agents import hooks

    (store.state_dir / "sessions").mkdir(parents=True, exist_ok=True)
    (store.state_dir / "sessions" / "earlier.json").write_text("{}")
    with serving([final("Nothing to change.")]) as server:
        for name, value in {
            "SAGEMEM_DREAM_AUTO": "report",
            "SAGEMEM_DREAM_BASE_URL": server.url,
            "SAGEMEM_DREAM_MODEL": "fake-model",
            "SAGEMEM_DREAM_MIN_SESSIONS": "1",
        }.items():
            monkeypatch.setenv(name, value)
        event = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(store.memory_dir)}
        hooks.handle("claude-code", None, json.dumps(event), memory_dir=str(store.memory_dir))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not [m for m in runs(store) if m["status"] == "done"]:
            time.sleep(0.2)
        (done,) = runs(store)
    from sagemem.dream import auto

    (child,) = auto.started
    assert child.wait(timeout=30) == 0
    auto.started.clear()
    assert done["status"] == "done" and done["mode"] == "report" and done["summary"] == "Nothing to change."
    assert len(server.requests) == 1
    # Due no more: the run just ended.
    hooks.handle("claude-code", None, json.dumps(event), memory_dir=str(store.memory_dir))
    time.sleep(0.5)
    assert len(runs(store)) == 1


def test_search_sessions_reads_this_project_s_transcripts_only(tmp_path: Path) -> None:
    from sagemem.store.native import claude_memory_dir

    root, other, home = tmp_path / "proj", tmp_path / "other", tmp_path / "home"
    store = make(root / ".sagemem" / "memory", DEPLOY)
    claude = claude_memory_dir(root, home, {"HOME": str(home)}).parent
    claude.mkdir(parents=True)
    line = {"type": "user", "timestamp": "2026-11-30T10:00:00Z", "message": {"role": "user"}}
    (claude / "s1.jsonl").write_text(
        json.dumps(
            {**line, "message": {"role": "user", "content": "the staging database moved to pg-stg-02"}}
        )
        + "\n"
        + json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "Noted."}]}})
        + "\n"
    )
    rollouts = home / ".codex" / "sessions" / "2026" / "11" / "30"
    rollouts.mkdir(parents=True)

    def rollout(name: str, cwd: Path, role: str, text: str) -> None:
        meta = {"type": "session_meta", "payload": {"cwd": str(cwd)}}
        item = {
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]},
        }
        (rollouts / name).write_text(json.dumps(meta) + "\n" + json.dumps(item) + "\n")

    rollout("rollout-a.jsonl", root, "user", "our staging database password policy is 90 days")
    rollout("rollout-b.jsonl", other, "user", "another project's staging database")
    rollout("rollout-c.jsonl", root, "developer", "injected: staging database notes")
    script = [calls(("search_sessions", {"query": "staging database"})), final("done")]
    with serving(script) as server:
        manifest = dream(store, base_url=server.url, model="fake-model", sessions=True, home=home)
        (answer,) = tool_results(server.requests[1])
        offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert "search_sessions" in offered and manifest["sessions"] is True
    assert "pg-stg-02" in answer and "90 days" in answer
    assert "another project" not in answer and "injected" not in answer
    with serving([final("done")]) as server:
        dream(store, base_url=server.url, model="fake-model", home=home)
        assert "search_sessions" not in {t["function"]["name"] for t in server.requests[0]["tools"]}


def test_scope_chooses_the_directory_of_the_memory_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    project = make(root / ".sagemem" / "memory", DEPLOY)
    user = make(Path(os.environ["HOME"]) / ".sagemem" / "memory", {"user_pnpm.md": DEPLOY["user_profile.md"]})
    monkeypatch.chdir(root)
    runner = CliRunner()
    with serving([final("nothing"), final("nothing")]) as server:
        args = ["dream", "--base-url", server.url, "--model", "fake-model", "--json"]
        chosen = json.loads(runner.invoke(cli, [*args, "--scope", "user"]).stdout)
        default = json.loads(runner.invoke(cli, args).stdout)
    assert chosen["memory_dir"] == str(user.memory_dir) and [m["id"] for m in runs(user)] == [chosen["id"]]
    assert default["memory_dir"] == str(project.memory_dir)


# -- hostile and broken input ------------------------------------------------------------------


def test_a_run_killed_mid_way_has_declared_its_changes_and_rolls_back(store: MemoryStore) -> None:
    before = files_of(store)
    with serving(
        [
            calls(("read_memory", {"file": "project_deploy.md"})),
            calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "merge"})),
            lambda _request: (time.sleep(30), final("late"))[1],
        ]
    ) as server:
        child = subprocess.Popen(
            [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), "dream", "--apply"]
            + ["--base-url", server.url, "--model", "fake-model"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(server.requests) < 3:
            time.sleep(0.1)
        child.kill()
        child.wait(timeout=10)
    (manifest,) = runs(store)
    assert manifest["status"] == "running" and [c["file"] for c in manifest["changes"]] == [
        "project_deploy.md"
    ]
    listed = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "dream", "list"])
    assert "interrupted" in listed.stdout
    rollback(store, manifest["id"])
    assert files_of(store) == before


def test_a_memory_archived_by_a_person_after_the_read_is_not_brought_back(store: MemoryStore) -> None:
    def person_archives(_request: dict[str, Any]) -> dict[str, Any]:
        store.archive("project_deploy.md", reason="done with it")
        return calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "merge"}))

    script = [calls(("read_memory", {"file": "project_deploy.md"})), person_archives, final("done")]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert manifest["changes"] == [] and "gone since you read it" in manifest["refused"][0]["why"]
    assert not (store.memory_dir / "project_deploy.md").exists()
    assert [c.file for c in store.conflicts()] == ["project_deploy.md"]


def test_odd_arguments_are_refused_and_the_run_goes_on(store: MemoryStore) -> None:
    weird = {
        "id": "x",
        "type": "function",
        "function": {"name": "read_memory", "arguments": "[" * 100_000},
    }
    script: list[Any] = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(
            (
                "write_memory",
                {"file": "project_deploy.md", "content": "bad \ud800 text", "reason": "r \ud800"},
            )
        ),
        calls(("read_memory", {"file": 7}), ("archive_memory", {"file": ["x"], "reason": "r"})),
        {**calls(), "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [weird]}}]},
        final("done \ud800"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert manifest["status"] == "done" and manifest["changes"] == []
    whys = [r["why"] for r in manifest["refused"]]
    assert "not valid Unicode" in whys[0] and "not valid JSON" in whys[-1] and len(whys) == 4
    assert (
        json.loads((store.state_dir / "dream" / manifest["id"] / "manifest.json").read_text())["status"]
        == "done"
    )
    assert (store.memory_dir / "dream" / f"{manifest['id']}.md").is_file()


def test_a_memory_read_only_in_part_is_not_rewritten_whole(store: MemoryStore) -> None:
    long = (
        DEPLOY["project_deploy.md"] + "\n".join(f"step {i}: check the dashboard" for i in range(2000)) + "\n"
    )
    (store.memory_dir / "project_deploy.md").write_text(long)
    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "shorter"})),
        final("done"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert "only in part" in manifest["refused"][0]["why"]
    assert (store.memory_dir / "project_deploy.md").read_text() == long


def test_no_secret_reaches_the_report_or_the_manifest(store: MemoryStore) -> None:
    key = "AKIA" + "Q3EGRP7XLNB2MZ5D"
    leaky = MERGED + f"\naws_access_key_id = {key}\n"
    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(("propose_write", {"file": "project_deploy.md", "content": leaky, "reason": "add the key"})),
        final(f"I found the key {key} in the notes."),
    ]
    with serving(script) as server:
        manifest = dream(store, base_url=server.url, model="fake-model")
    assert manifest["proposals"] == [] and "keep secrets out of memory" in manifest["refused"][0]["why"]
    report = (store.memory_dir / "dream" / f"{manifest['id']}.md").read_text()
    saved = (store.state_dir / "dream" / manifest["id"] / "manifest.json").read_text()
    assert key not in report and key not in saved


def test_a_rollback_leaves_an_archived_copy_edited_after_the_run(store: MemoryStore) -> None:
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    copy = store.memory_dir / "archive" / "project_deploy_steps.md"
    copy.write_text(copy.read_text() + "\nA note added in the archive.\n")
    done = rollback(store, manifest["id"])
    assert "project_deploy_steps.md (its archived copy changed after the run)" in done["conflicts"]
    assert copy.read_text().endswith("A note added in the archive.\n")


def test_a_memory_made_during_the_run_keeps_its_index_line_after_rollback(store: MemoryStore) -> None:
    def person_adds(_request: dict[str, Any]) -> dict[str, Any]:
        store.create(type="project", name="release train", description="Weekly release train")
        return final("done")

    script = [
        calls(("read_memory", {"file": "project_deploy.md"})),
        calls(("write_memory", {"file": "project_deploy.md", "content": MERGED, "reason": "merge"})),
        person_adds,
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    rollback(store, manifest["id"])
    assert "project_release_train.md" in (store.memory_dir / "MEMORY.md").read_text()
    assert (store.memory_dir / "project_deploy.md").read_text() == DEPLOY["project_deploy.md"]


def test_names_the_run_archived_or_archive_holds_are_not_written(store: MemoryStore) -> None:
    store.archive("user_profile.md", reason="old")
    script = [
        calls(("read_memory", {"file": "project_deploy_steps.md"})),
        calls(
            ("archive_memory", {"file": "project_deploy_steps.md", "reason": "duplicate"}),
            ("write_memory", {"file": "project_deploy_steps.md", "content": MERGED, "reason": "again"}),
            ("write_memory", {"file": "user_profile.md", "content": MERGED, "reason": "new"}),
        ),
        final("done"),
    ]
    with serving(script) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    assert [c["op"] for c in manifest["changes"]] == ["archive"]
    archived_here, in_archive = (r["why"] for r in manifest["refused"])
    assert "archived in this run" in archived_here and "is in archive/" in in_archive
    done = rollback(store, manifest["id"])
    assert done["restored"][0] == "project_deploy_steps.md" and not done["conflicts"]


def test_a_damaged_manifest_is_skipped_in_the_list_and_refused_by_name(store: MemoryStore) -> None:
    with serving([final("nothing")]) as server:
        good = dream(store, base_url=server.url, model="fake-model")
    forged = store.state_dir / "dream" / "20261201-000000-dead"
    forged.mkdir()
    (forged / "manifest.json").write_text(
        json.dumps({"schema": 1, "id": "20261201-000000-dead", "changes": 5})
    )
    assert [m["id"] for m in runs(store)] == [good["id"]]
    with pytest.raises(Exception, match="not a dream manifest"):
        rollback(store, "20261201-000000-dead")
    listed = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "dream", "list"])
    assert listed.exit_code == 0 and good["id"] in listed.stdout


def test_a_link_for_the_report_folder_is_refused_and_the_run_still_declared(
    store: MemoryStore, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.memory_dir / "dream").symlink_to(elsewhere)
    with serving([final("nothing")]) as server:
        manifest = dream(store, base_url=server.url, model="fake-model")
    assert manifest["status"] == "done" and "symbolic link" in manifest["report_error"]
    assert list(elsewhere.iterdir()) == []
    from sagemem.dream import auto

    assert not auto.due(store.state_dir, Settings(dream_min_sessions=1), time.time())  # the run counted


def test_a_settings_file_cannot_steer_the_endpoint_or_the_spending(tmp_path: Path) -> None:
    from sagemem.store.config import load_settings

    (tmp_path / "settings.json").write_text(
        json.dumps(
            {
                "dream_max_tokens": 50_000_000,
                "dream_max_rounds": 200,
                "dream_min_hours": 1,
                "dream_model": "o1-pro",
            }
        )
    )
    loaded = load_settings(tmp_path, {})
    assert (loaded.dream_max_tokens, loaded.dream_max_rounds, loaded.dream_min_hours) == (600_000, 24, 24)
    assert load_settings(tmp_path, {"SAGEMEM_DREAM_MAX_ROUNDS": "80"}).dream_max_rounds == 80
    env = {"SAGEMEM_DREAM_BASE_URL": "https://api.deepseek.com", "DEEPSEEK_API_KEY": "d"}
    with pytest.raises(ModelError, match="no model"):
        endpoint(loaded, env=env)  # the settings' model goes with the settings' endpoint only
    plain = Settings(dream_base_url="http://api.openai.com:80/v1", dream_model="m")
    with pytest.raises(ModelError, match="https"):
        endpoint(plain, env={"OPENAI_API_KEY": "k"})
    local = Settings(dream_base_url="http://127.0.0.1:3000/v1", dream_model="m")
    assert endpoint(local, env={"OPENAI_API_KEY": "k"}).api_key == ""  # maybe the clone's own server
    spoof = endpoint(
        Settings(), base_url="https://deepseek.example/v1", model="m", env={"DEEPSEEK_API_KEY": "d"}
    )
    assert spoof.api_key == ""


def test_the_trigger_never_waits_on_a_fifo_nor_runs_a_planted_sagemem(
    store: MemoryStore, tmp_path: Path
) -> None:
    from sagemem.dream import auto
    from sagemem.store.config import locate_scopes

    (store.state_dir / "dream").mkdir(parents=True, exist_ok=True)
    os.mkfifo(store.state_dir / "dream" / "auto.log")
    planted = store.state_dir / "sagemem"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    for name in ("__init__.py", "__main__.py"):
        (planted / name).write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (store.state_dir / "sessions").mkdir(parents=True, exist_ok=True)
    (store.state_dir / "sessions" / "a.json").write_text("{}")
    (scope,) = locate_scopes(store.memory_dir, store.state_dir)
    settings = Settings(dream_auto="report", dream_min_sessions=1)
    env = {**os.environ, "SAGEMEM_DREAM_BASE_URL": "http://127.0.0.1:9/v1", "SAGEMEM_DREAM_MODEL": "m"}
    assert auto.maybe_start(scope, settings, env=env)
    (child,) = auto.started
    child.wait(timeout=60)
    auto.started.clear()
    assert not marker.exists() and child.returncode == 1  # the real sagemem ran, and found no server


TOKEN = "ghp_" + "Zx9" * 12


def test_check_and_purge_secrets_reach_what_dream_runs_keep(store: MemoryStore) -> None:
    """A run keeps memory text in three places besides the memories: its manifest, its report
    and the bytes each change replaced. `check` scans them all, `purge-secrets` redacts them
    all, and the run can still be rolled back (to the redacted bytes)."""
    from sagemem.dream import record, report

    path = store.memory_dir / "project_deploy.md"
    path.write_text(path.read_text() + f"\nThe deploy token is {TOKEN}\n")
    with serving(merge_script()) as server:
        run = dream(store, apply=True, base_url=server.url, model="fake-model")["id"]
    saved = record.load(store.state_dir, run)  # as a sagemem that recorded the model's words raw kept it
    saved["summary"] = f"Merged; the token {TOKEN} was in it"
    record.save(store.state_dir, saved)
    report.write(store, saved)
    found = {(f.check, f.file) for f in store.check().findings if f.check in ("secret", "secret-copy")}
    assert ("secret-copy", f"dream run {run}: manifest") in found
    assert ("secret", f"dream/{run}.md") in found  # beside the memories: committed with them
    assert any(c == "secret-copy" and f.startswith(f"dream run {run}: bytes kept") for c, f in found)
    changes = store.purge_secrets()
    assert any(c.startswith(f"dream run {run}: manifest") for c in changes), changes
    assert not [f for f in store.check().findings if f.check in ("secret", "secret-copy")]
    kept = [p for p in (store.state_dir / "dream").rglob("*") if p.is_file()] + [store.memory_dir / "dream"]
    assert all(TOKEN not in p.read_text("utf-8", "replace") for p in kept if p.is_file())
    assert TOKEN not in (store.memory_dir / "dream" / f"{run}.md").read_text()
    done = rollback(store, run)
    assert "project_deploy.md" in done["restored"] and not done["conflicts"]
    back = path.read_text()
    assert TOKEN not in back and "[REDACTED by sagemem]" in back and "make deploy-prod" in back


def test_a_manifest_naming_a_file_outside_the_memory_directory_is_no_manifest(store: MemoryStore) -> None:
    """A rollback reads each file a change names, to hash it: a forged `../` name would have it
    read outside the memory directory. Such a manifest is damaged: not listed, never undone."""
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    path = store.state_dir / "dream" / manifest["id"] / "manifest.json"
    forged = json.loads(path.read_text())
    forged["changes"][0]["file"] = "../outside.md"
    path.write_text(json.dumps(forged))
    before = files_of(store)
    assert runs(store) == []
    with pytest.raises(Exception, match="not a dream manifest.*changes\\[0\\].file"):
        rollback(store, manifest["id"])
    assert files_of(store) == before
    assert [f.file for f in store.check().findings if f.check == "state-record"] == [str(path)]


def test_a_rolled_back_run_is_listed_as_rolled_back_and_a_second_rollback_changes_nothing(
    store: MemoryStore,
) -> None:
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    run_id, memory = manifest["id"], str(store.memory_dir)
    runner = CliRunner()
    undone = runner.invoke(cli, ["--dir", memory, "dream", "rollback", run_id, "--json"])
    assert undone.exit_code == 0, undone.output
    listed = runner.invoke(cli, ["--dir", memory, "dream", "list"])
    (row,) = listed.stdout.splitlines()
    assert re.split(r"\s{2,}", row)[:3] == [run_id, "apply", "rolled back"] and "done" not in row
    (summary,) = json.loads(runner.invoke(cli, ["--dir", memory, "dream", "list", "--json"]).stdout)
    assert (summary["status"], summary["run_status"], summary["rollbacks"]) == ("rolled back", "done", 1)
    assert summary["rolled_back"] == json.loads(undone.stdout)["at"]
    shown = runner.invoke(cli, ["--dir", memory, "dream", "show", run_id]).stdout
    assert f"- status: done; rolled back {summary['rolled_back']}" in shown
    assert "Undo: `sagemem dream rollback" not in shown
    before, snapshots = files_of(store), [s.id for s in store.snapshots()]
    manifest_path = store.state_dir / "dream" / run_id / "manifest.json"
    saved = manifest_path.read_bytes()
    again = runner.invoke(cli, ["--dir", memory, "dream", "rollback", run_id])
    assert again.exit_code == 1 and again.stdout == ""
    assert f"{run_id}: rolled back already, at {summary['rolled_back']}" in again.stderr
    assert "nothing was changed" in again.stderr
    assert files_of(store) == before and [s.id for s in store.snapshots()] == snapshots
    assert manifest_path.read_bytes() == saved


def test_a_rollback_that_left_conflicts_is_listed_as_partly_rolled_back(store: MemoryStore) -> None:
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    (store.memory_dir / "project_deploy.md").write_text(MERGED + "\nA person's later note.\n")
    assert rollback(store, manifest["id"])["conflicts"]
    listed = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "dream", "list", "--json"])
    (summary,) = json.loads(listed.stdout)
    assert (summary["status"], summary["run_status"], summary["rolled_back"]) == (
        "partly rolled back",
        "done",
        None,
    )
    text = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "dream", "list"]).stdout
    assert "partly rolled back" in text


def test_dream_rollback_takes_its_old_option_spelling_with_a_note(store: MemoryStore) -> None:
    with serving(merge_script()) as server:
        manifest = dream(store, apply=True, base_url=server.url, model="fake-model")
    runner = CliRunner()
    memory = str(store.memory_dir)
    shown = runner.invoke(cli, ["--dir", memory, "dream", "rollback", "--help"]).stdout
    assert "--parts [files|all]" in shown and "--scope" not in shown
    done = runner.invoke(
        cli, ["--dir", memory, "dream", "rollback", manifest["id"], "--scope", "all", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert "--scope is deprecated here; use --parts" in done.stderr and len(done.stderr.splitlines()) == 1
    assert json.loads(done.stdout)["retired"] == []
    saved = json.loads((store.state_dir / "dream" / manifest["id"] / "manifest.json").read_text())
    assert [r["scope"] for r in saved["rollbacks"]] == ["all"]
