"""Project memory tracked in git, with real `git`: two clones, edits, merges."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sagemem import MemoryStore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@e",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@e",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True)
    assert done.returncode == 0 or not check, done.stdout + done.stderr
    return done


def clone(origin: Path, where: Path) -> MemoryStore:
    git(where.parent, "clone", "-q", str(origin), where.name)
    return MemoryStore(where / ".sagemem" / "memory")


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    store = MemoryStore(repo / ".sagemem" / "memory")
    store.init(git=True)
    store.create(type="project", name="deploy", description="how we deploy", body="Run make deploy.")
    store.create(type="project", name="old", description="an old plan")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "memory")
    git(repo, "config", "receive.denyCurrentBranch", "ignore")
    return repo


def test_init_git_keeps_state_out_of_the_repository(origin: Path) -> None:
    tracked = git(origin, "ls-files").stdout.split()
    assert ".sagemem/memory/.gitignore" in tracked and ".sagemem/memory/.gitattributes" in tracked
    assert not any("/.sagemem/memory/.sagemem/" in f"/{t}" for t in tracked)


def test_two_clones_add_edit_delete_and_merge_clean(origin: Path, tmp_path: Path) -> None:
    alice = clone(origin, tmp_path / "alice")
    bob = clone(origin, tmp_path / "bob")
    alice.create(type="user", name="alice", description="alice's preferences")
    deploy = alice.get("project_deploy.md")
    alice.update(deploy.file, expected_version=deploy.version, description="how we deploy, by alice")
    git(alice.memory_dir, "add", "-A")
    git(alice.memory_dir, "commit", "-qm", "alice")
    git(alice.memory_dir, "push", "-q", "origin", "main")

    bob.create(type="reference", name="bob", description="bob's links")
    (bob.memory_dir / "project_old.md").unlink()  # bob deletes a memory by hand
    git(bob.memory_dir, "add", "-A")
    git(bob.memory_dir, "commit", "-qm", "bob")
    git(bob.memory_dir, "pull", "-q", "--no-rebase", "origin", "main")

    index = (bob.memory_dir / "MEMORY.md").read_text()
    assert "<<<<<<<" not in index
    bob.rebuild_index()
    assert bob.check().ok
    names = sorted(bob.files())
    assert names == ["project_deploy.md", "reference_bob.md", "user_alice.md"]
    assert bob.get("project_deploy.md").description == "how we deploy, by alice"


def test_a_memory_edited_on_both_sides_is_a_git_conflict_not_a_silent_loss(
    origin: Path, tmp_path: Path
) -> None:
    alice = clone(origin, tmp_path / "alice")
    bob = clone(origin, tmp_path / "bob")
    for store, words in ((alice, "alice's way"), (bob, "bob's way")):
        memory = store.get("project_deploy.md")
        store.update(memory.file, expected_version=memory.version, body=f"Deploy {words}.\n")
        git(store.memory_dir, "commit", "-qam", words)
    git(alice.memory_dir, "push", "-q", "origin", "main")
    pulled = git(bob.memory_dir, "pull", "--no-rebase", "origin", "main", check=False)
    assert pulled.returncode != 0 and "CONFLICT" in pulled.stdout
    text = (bob.memory_dir / "project_deploy.md").read_text()
    assert "alice's way" in text and "bob's way" in text  # both sides kept, for a person to decide
    report = bob.check()
    assert [(f.check, f.file) for f in report.findings] == [("merge-conflict", "project_deploy.md")]

    # Half of each side, markers and all, is no memory to act on: left out, and said so.
    bob.create(type="project", name="deploy window", description="when we deploy: Tuesdays only")
    injection = bob.inject("how and when do we deploy?", session="s1")
    assert "<<<<<<<" not in injection.text and "alice's way" not in injection.text
    assert [s.file for s in injection.snippets] == ["project_deploy_window.md"]
    status = injection.text.rstrip().splitlines()[-1]
    assert 'left out until its git merge conflict is resolved: "project_deploy.md"' in status
    fence = injection.text.split("```text\n", 1)[1]
    assert "Memory notice: project_deploy.md left out of memory" in fence  # once, at the start
    again = bob.inject("when do we deploy on Tuesdays?", session="s1")
    assert "Memory notice" not in again.text
    assert bob.search("alice's way bob's way deploy").hits == () or all(
        h.file != "project_deploy.md" for h in bob.search("alice's way bob's way deploy").hits
    )

    # Resolved (one side kept): found again at once.
    (bob.memory_dir / "project_deploy.md").write_text(
        "---\nname: deploy\ndescription: how we deploy\ntype: project\n---\n\nDeploy bob's way.\n"
    )
    assert "bob's way" in bob.inject("how do we deploy?").text


RELEASE_STEPS = "".join(
    f"{n}. Step {n} of the release: check the dashboard, then go on.\n" for n in range(1, 9)
)


def test_an_edit_merged_into_an_archived_memory_is_reported(origin: Path, tmp_path: Path) -> None:
    alice = clone(origin, tmp_path / "alice")
    memory = alice.get("project_deploy.md")
    alice.update(memory.file, expected_version=memory.version, body=RELEASE_STEPS)  # long enough to be
    git(alice.memory_dir, "commit", "-qam", "release steps")  # followed as a rename by git
    git(alice.memory_dir, "push", "-q", "origin", "main")
    bob = clone(origin, tmp_path / "bob")
    alice.archive("project_deploy.md", reason="we moved to the platform team's pipeline")
    git(alice.memory_dir, "add", "-A")
    git(alice.memory_dir, "commit", "-qm", "archive deploy")
    git(alice.memory_dir, "push", "-q", "origin", "main")

    memory = bob.get("project_deploy.md")
    bob.update(memory.file, expected_version=memory.version, body=RELEASE_STEPS + "9. Tag the release.\n")
    git(bob.memory_dir, "commit", "-qam", "bob: tag after deploy")
    pulled = git(bob.memory_dir, "pull", "--no-rebase", "origin", "main")
    assert "CONFLICT" not in pulled.stdout  # git followed the rename: a clean merge
    archived = (bob.memory_dir / "archive" / "project_deploy.md").read_text()
    assert "Tag the release" in archived and not (bob.memory_dir / "project_deploy.md").exists()

    report = bob.check()
    found = [f for f in report.findings if f.check == "archived-changed"]
    assert [f.file for f in found] == ["archive/project_deploy.md"] and not report.ok
    message = found[0].message
    assert "we moved to the platform team's pipeline" in message  # the archiving side
    assert "bob: tag after deploy" not in message and " by t on " in message  # the editing side's commit
    assert "sagemem restore project_deploy.md" in message

    # A session starts being told, once.
    start = bob.inject("", session="s1", care=[("archived-changed", "archive/project_deploy.md")])
    assert "Memory notice: archive/project_deploy.md changed after being archived" in start.text
    hook = subprocess.run(
        [sys.executable, "-m", "sagemem", "hook", "claude-code", "SessionStart"],
        input=json.dumps({"session_id": "s2", "cwd": str(bob.memory_dir.parent.parent), "source": "startup"}),
        capture_output=True,
        text=True,
        cwd=bob.memory_dir.parent.parent,
    )
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "archive/project_deploy.md changed after being archived" in context

    # Alice's own clone, untouched since she archived: nothing to report.
    assert not [f for f in alice.check().findings if f.check == "archived-changed"]
    # Restored, the edit is live again and the finding is gone.
    assert "Tag the release" in bob.restore("project_deploy.md").body
    assert not [f for f in bob.check().findings if f.check == "archived-changed"]


def test_a_claude_code_memory_directory_works_as_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "claude-memory"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(
        "- [User prefers uv](feedback_uv.md) — packages Python with uv, not pip\n"
        "- [Release checklist](project_release.md) — steps before tagging a release\n"
    )
    (folder / "feedback_uv.md").write_text(
        "---\nname: prefers-uv\ndescription: packages Python with uv, not pip\nmetadata:\n  type: feedback\n"
        "---\nUse `uv add` for dependencies.\n\n**Why:** faster resolver.\n\n**How to apply:** never pip.\n"
    )
    (folder / "project_release.md").write_text(
        "---\nname: release-checklist\ndescription: steps before tagging a release\ntype: project\n---\n"
        "1. Bump the version. 2. Update the changelog. 3. Tag.\n"
    )
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    store = MemoryStore(folder, tmp_path / "state")
    assert [h.file for h in store.search("how should I add a python dependency with uv").hits] == [
        "feedback_uv.md"
    ]
    assert "feedback_uv.md" in store.inject("add a dependency with uv or pip?").text
    assert store.get("feedback_uv.md").type == "feedback"
    report = store.check()
    assert report.ok, [f.to_dict() for f in report.findings]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing converted


def test_union_merge_then_rebuild(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    store = MemoryStore(repo / ".sagemem" / "memory")
    store.init(git=True)
    git(repo, "init", "-q", "-b", "main")
    base = store.create(type="project", name="base", description="the base memory")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")

    git(repo, "checkout", "-qb", "side")
    store.create(type="project", name="side", description="added on a branch")
    store.update(base.file, expected_version=base.version, description="base, edited on side")
    git(repo, "commit", "-qam", "side edits")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "side adds")

    git(repo, "checkout", "-q", "main")
    store.create(type="user", name="main", description="added on main")
    store.update(base.file, expected_version=base.version, description="base, edited on main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main edits")

    # The memory file itself conflicts (both sides edited it): keep main's, as a person would.
    merge = git(repo, "merge", "side", check=False)
    assert "CONFLICT (content): Merge conflict in .sagemem/memory/project_base.md" in merge.stdout
    git(repo, "checkout", "--ours", ".sagemem/memory/project_base.md")
    index_text = (store.memory_dir / "MEMORY.md").read_text()
    assert "<<<<<<<" not in index_text  # union merge took both sides' lines
    assert index_text.count("(project_base.md)") == 2

    report = store.check_index()
    assert [e.target for e in report.duplicates] == ["project_base.md"]
    assert store.rebuild_index() is True
    assert store.check_index().ok
    text = (store.memory_dir / "MEMORY.md").read_text()
    assert text.count("(project_base.md)") == 1
    assert "(project_side.md)" in text and "(user_main.md)" in text
    assert "base, edited on main" in text
    assert store.rebuild_index() is False
