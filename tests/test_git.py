"""Project memory tracked in git, with real `git`: two clones, edits, merges."""

from __future__ import annotations

import os
import shutil
import subprocess
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
