"""How a conflict ends: each says what it is and how to close it, in the CLI, MCP and the UI,
and the advice it gives closes it; settling one never opens another."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemem import MemoryStore
from sagemem.store.errors import VersionConflict
from sagemem.ui.server import Server

from .test_ui import TOKEN, Client

SAGEMEM = [sys.executable, "-m", "sagemem"]
NEW = ["new", "--type", "project", "--name", "Deploy freeze", "--description"]


def sagemem(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SAGEMEM, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def commands(text: str) -> list[list[str]]:
    """The `sagemem ...` commands a message tells a person to run."""
    return [shlex.split(c) for c in re.findall(r"`(sagemem [^`]+)`", text)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    assert sagemem(folder, "init", "--project").returncode == 0
    assert sagemem(folder, *NEW, "No production deploys on Fridays").returncode == 0
    return folder


def duplicate(project: Path) -> subprocess.CompletedProcess[str]:
    done = sagemem(project, *NEW, "No production deploys after 3pm")
    assert done.returncode == 3, done.stderr
    return done


@pytest.mark.parametrize("keep", ["disk", "proposed"])
def test_a_duplicate_new_says_so_and_its_advice_closes_it(project: Path, keep: str) -> None:
    memory = project / ".sagemem" / "memory" / "project_deploy_freeze.md"
    before = memory.read_bytes()
    refused = duplicate(project)
    assert "project_deploy_freeze.md: duplicate name: a memory of that name exists already" in refused.stderr
    assert memory.read_bytes() == before  # nothing written
    advised = {c[-1]: c for c in commands(refused.stderr) if c[:3] == ["sagemem", "conflicts", "resolve"]}
    assert set(advised) == {"disk", "proposed"}, refused.stderr

    listed = sagemem(project, "conflicts", "list")
    assert "duplicate" in listed.stdout and "to close:" in listed.stdout
    [record] = json.loads(sagemem(project, "conflicts", "list", "--json").stdout)
    assert record["kind"] == "duplicate" and "--keep disk" in record["to_close"]
    assert "--keep disk" in sagemem(project, "conflicts", "show", record["id"]).stdout
    shown = json.loads(sagemem(project, "conflicts", "show", record["id"], "--json").stdout)
    assert shown["kind"] == "duplicate" and shown["to_close"] == record["to_close"]

    done = sagemem(project, *advised[keep][1:])
    assert done.returncode == 0, done.stderr
    assert json.loads(sagemem(project, "conflicts", "list", "--json").stdout) == []
    text = memory.read_text(encoding="utf-8")
    assert ("after 3pm" in text) == (keep == "proposed") and ("on Fridays" in text) == (keep == "disk")
    assert json.loads(sagemem(project, "check", "--json").stdout)["ok"]


def test_each_kind_of_conflict_names_its_own_ending(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    m = store.create(type="project", name="x", description="first")
    with pytest.raises(VersionConflict) as taken:
        store.create(type="project", name="x", description="second")
    newer = store.update(m.file, expected_version=m.version, description="by a person")
    with pytest.raises(VersionConflict) as changed:
        store.update(m.file, expected_version=m.version, description="by a stale reader")
    (store.memory_dir / m.file).unlink()
    with pytest.raises(VersionConflict) as deleted:
        store.write(m.file, "---\ndescription: late\n---\n", expected_version=newer.version)
    kinds = {c.id: c.kind for c in store.conflicts()}
    assert kinds == {
        taken.value.conflict_id: "duplicate",
        changed.value.conflict_id: "changed",
        deleted.value.conflict_id: "deleted",
    }
    endings = {c.kind: c.ending() for c in store.conflicts()}
    assert "replaces it" in endings["duplicate"] and "writes it back" in endings["deleted"]
    assert "compare with `sagemem conflicts show" in endings["changed"]


def test_resolving_over_a_file_changed_again_opens_no_second_conflict(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    m = store.create(type="project", name="x", description="first")
    store.update(m.file, expected_version=m.version, description="by a person")
    with pytest.raises(VersionConflict) as caught:
        store.update(m.file, expected_version=m.version, description="by a stale reader")
    cid = caught.value.conflict_id
    path = store.memory_dir / m.file
    path.write_text(path.read_text().replace("by a person", "edited again"))

    with pytest.raises(VersionConflict) as again:
        store.resolve_conflict(cid, "proposed")
    assert again.value.conflict_id == cid and "stays open" in str(again.value)
    assert "edited again" in path.read_text()  # nothing written
    [still] = store.conflicts()  # the same one, now holding the file as it is
    assert still.id == cid and b"edited again" in (still.disk or b"")

    done = store.resolve_conflict(cid, "proposed")  # after looking again: it lands
    assert done.resolution == "proposed" and store.conflicts() == []
    assert store.get(m.file).description == "by a stale reader"
    [kept] = store.conflicts(resolved=True)
    assert b"edited again" in (kept.disk or b"")  # the text it replaced stays readable


def test_the_cli_says_the_conflict_stays_open_when_the_file_changed_again(project: Path) -> None:
    refused = duplicate(project)
    [cid] = re.findall(r"conflict ([0-9a-f]{16})", refused.stderr)[:1]
    memory = project / ".sagemem" / "memory" / "project_deploy_freeze.md"
    memory.write_text(
        memory.read_text(encoding="utf-8") + "Also: no deploys on holidays.\n", encoding="utf-8"
    )
    again = sagemem(project, "conflicts", "resolve", cid, "--keep", "proposed")
    assert again.returncode == 3 and f"Conflict {cid} stays open" in again.stderr
    assert [c["id"] for c in json.loads(sagemem(project, "conflicts", "list", "--json").stdout)] == [cid]
    assert "no deploys on holidays" in sagemem(project, "conflicts", "show", cid).stdout
    assert sagemem(project, "conflicts", "resolve", cid, "--keep", "proposed").returncode == 0
    assert "after 3pm" in memory.read_text(encoding="utf-8")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[Client, MemoryStore]]:
    store = MemoryStore(tmp_path / "mem")
    store.init()
    server = Server(store, token=TOKEN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Client(server), store
    server.shutdown()
    server.server_close()


def test_the_page_shows_a_duplicate_as_such_and_closing_it_clears_the_count(
    client: tuple[Client, MemoryStore],
) -> None:
    api, store = client
    store.create(type="project", name="x", description="first")
    with pytest.raises(VersionConflict):
        store.create(type="project", name="x", description="second")
    assert api.get("/api/overview")[1]["conflicts"] == 1
    [shown] = api.get("/api/conflicts")[1]["conflicts"]
    assert shown["kind"] == "duplicate"
    status, _ = api.post("/api/conflicts/resolve", {"id": shown["id"], "keep": "disk"})
    assert status == 200 and api.get("/api/overview")[1]["conflicts"] == 0
    assert store.get("project_x.md").description == "first"
