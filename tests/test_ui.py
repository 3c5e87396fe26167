"""`sagemem ui` at the HTTP level: who may talk to it, and every action going through the store."""

from __future__ import annotations

import http.client
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sagemem import MemorySet, MemoryStore
from sagemem.ui.server import MAX_BODY, Handler, Server

from .memories import DANCE, OLD_PLAN, make
from .test_git import git

TOKEN = "test-token-0123456789"


class Client:
    def __init__(self, server: Server) -> None:
        self.port = server.port

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = TOKEN,
        host: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sent = {"Host": host or f"127.0.0.1:{self.port}", **(headers or {})}
        if token is not None:
            sent["X-Sagemem-Token"] = token
        payload = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        conn.close()
        kind = response.getheader("Content-Type") or ""
        return response.status, json.loads(raw) if kind.startswith("application/json") else raw, response

    def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        status, data, _ = self.call("GET", path, **kwargs)
        return status, data

    def post(self, path: str, body: Any, **kwargs: Any) -> tuple[int, Any]:
        status, data, _ = self.call("POST", path, body, **kwargs)
        return status, data


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", {**DANCE, "project_old_plan.md": OLD_PLAN})


@pytest.fixture
def server(store: MemoryStore) -> Iterator[Server]:
    server = Server(store, token=TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def client(server: Server) -> Client:
    return Client(server)


def connect(port: int) -> socket.socket:
    """A raw connection, for what http.client will not send. The timeout only turns a server
    that never answers into a failure instead of a hung test."""
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def request_head(port: int, method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> tuple[int, Any]:
    """Read until the server closes the connection: its status and JSON body."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert b"application/json" in head, data
    return int(head.split()[1]), json.loads(body)


def reset(sock: socket.socket) -> None:
    """Close with a TCP reset, as a crashed client or a killed tab does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_without_the_token_nothing_is_served(client: Client) -> None:
    assert client.get("/api/overview", token=None)[0] == 403
    assert client.get("/api/overview", token="wrong")[0] == 403
    assert client.get("/api/overview", token="é" * 5)[0] == 403  # not ASCII: refused, not dropped
    assert client.get("/", token=None)[0] == 403
    assert client.get("/app.js", token=None)[0] == 403
    status, page, response = client.call("GET", f"/?token={TOKEN}", token=None)
    assert status == 200 and f'src="app.js?token={TOKEN}"'.encode() in page
    assert response.getheader("Set-Cookie") is None  # a cookie would go to every local port
    assert client.get(f"/app.js?token={TOKEN}", token=None)[0] == 200
    assert client.get("/api/overview", token=None, headers={"Cookie": f"sagemem_ui={TOKEN}"})[0] == 403


def test_a_foreign_host_or_origin_is_refused(client: Client, store: MemoryStore) -> None:
    assert client.get("/api/overview", host=f"evil.example:{client.port}")[0] == 403  # DNS rebinding
    assert client.get("/api/overview", host=f"localhost:{client.port}")[0] == 200
    before = (store.memory_dir / "project_studio_opening.md").read_bytes()
    status, _ = client.post(
        "/api/archive", {"file": "project_studio_opening.md"}, headers={"Origin": "https://evil.example"}
    )
    assert status == 403
    # A cross-site form can send the cookie but not the header: changes need the header.
    status, _ = client.post(
        "/api/archive",
        {"file": "project_studio_opening.md"},
        token=None,
        headers={"Cookie": f"sagemem_ui={TOKEN}"},
    )
    assert status == 403
    assert (store.memory_dir / "project_studio_opening.md").read_bytes() == before


@pytest.mark.parametrize(
    "path",
    [
        "/api/memory?file=../secret.md",
        "/api/memory?file=%2Fetc%2Fpasswd",
        "/api/memory?file=sub%2Fx.md",
        "/api/memory?file=MEMORY.md",
        "/api/memory?file=.sagemem",
    ],
)
def test_nothing_outside_the_memory_files_is_served(client: Client, path: str) -> None:
    status, data = client.get(path)
    assert status == 400 and "error" in data


@pytest.mark.parametrize(
    "path", ["/../pyproject.toml", "/server.py", "/app.py", "/%2e%2e/pyproject.toml", "/api/nothing"]
)
def test_only_the_page_and_the_api_are_served(client: Client, path: str) -> None:
    assert client.get(path)[0] == 404


def test_the_overview_counts_types_tags_problems_and_conflicts(client: Client, store: MemoryStore) -> None:
    store.lock("user_dancer_profile.md")
    status, data = client.get("/api/overview")
    assert status == 200
    files = {m["file"]: m for m in data["memories"]}
    assert set(files) >= {"project_studio_opening.md", "project_old_plan.md"}
    assert data["tags"]["studio"] == 1 and data["types"]["project"] >= 2
    assert files["user_dancer_profile.md"]["locked"] is True
    assert data["problems"] == store.check().problems and data["conflicts"] == 0


def test_search_gives_the_ranked_files_of_sagemem_search(client: Client, store: MemoryStore) -> None:
    status, data = client.get("/api/search?q=studio%20lease%20rent")
    assert status == 200
    assert data["files"][0] == store.search("studio lease rent").hits[0].file


def test_saving_over_the_version_read_writes_and_a_stale_save_is_a_recorded_conflict(
    client: Client, store: MemoryStore
) -> None:
    status, memory = client.get("/api/memory?file=project_studio_opening.md")
    assert status == 200
    mine = memory["text"].replace("five years", "ten years")
    status, saved = client.post(
        "/api/save",
        {"file": "project_studio_opening.md", "text": mine, "expected_version": memory["version"]},
    )
    assert status == 200 and store.read("project_studio_opening.md").text == mine
    # Someone changes the file behind the page; the page saves on the version it loaded.
    path = store.memory_dir / "project_studio_opening.md"
    theirs = mine.replace("ten years", "seven years")
    path.write_text(theirs)
    status, refused = client.post(
        "/api/save",
        {
            "file": "project_studio_opening.md",
            "text": mine + "\nmore\n",
            "expected_version": saved["version"],
        },
    )
    assert status == 409 and refused["theirs"] == theirs and refused["conflict_id"]
    assert path.read_text() == theirs  # nothing overwritten
    conflict = store.conflict(refused["conflict_id"])
    assert conflict.proposed == (mine + "\nmore\n").encode()
    # Keeping one's own text means saving again on the version now on disk.
    status, _ = client.post(
        "/api/save",
        {
            "file": "project_studio_opening.md",
            "text": mine + "\nmore\n",
            "expected_version": refused["theirs_version"],
        },
    )
    assert status == 200 and path.read_text() == mine + "\nmore\n"


def test_create_archive_restore_lock_unlock(client: Client, store: MemoryStore) -> None:
    status, made = client.post(
        "/api/create",
        {"type": "feedback", "name": "Short answers", "description": "answer briefly", "tags": ["style"]},
    )
    assert status == 200 and store.get(made["file"]).tags == ("style",)
    assert client.post("/api/lock", {"file": made["file"]}) == (200, {"changed": True})
    status, refused = client.post("/api/archive", {"file": made["file"]})
    assert status == 400 and "locked" in refused["error"]
    assert (store.memory_dir / made["file"]).is_file()
    assert client.post("/api/unlock", {"file": made["file"]})[0] == 200
    assert client.post("/api/archive", {"file": made["file"], "reason": "done with it"})[0] == 200
    archived = {m["file"]: m for m in client.get("/api/overview")[1]["memories"] if m["archived"]}
    assert archived[made["file"]]["archived_reason"] == "done with it"
    status, text = client.get(f"/api/memory?file={made['file']}&archived=1")
    assert status == 200 and "answer briefly" in text["text"]
    assert client.post("/api/restore", {"file": made["file"]})[0] == 200
    assert (store.memory_dir / made["file"]).is_file()


def test_candidates_are_archived_after_a_snapshot(client: Client, store: MemoryStore) -> None:
    status, data = client.get("/api/candidates")
    assert status == 200 and "project_old_plan.md" in {c["file"] for c in data["candidates"]}
    status, done = client.post(
        "/api/candidates/apply", {"files": ["project_old_plan.md", "user_dancer_profile.md"]}
    )
    assert status == 200 and done["archived"] == ["project_old_plan.md"]
    assert done["refused"] == [{"file": "user_dancer_profile.md", "error": "no longer an archive candidate"}]
    assert done["snapshot"] in {s.id for s in store.snapshots()}


def test_health_and_its_safe_fix_with_the_snapshot_it_takes(client: Client, store: MemoryStore) -> None:
    path = store.memory_dir / "user_dancer_profile.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    status, report = client.get("/api/health")
    assert status == 200 and any(f["check"] == "crlf" and f["file"] == path.name for f in report["findings"])
    status, done = client.post("/api/fix", {})
    assert status == 200 and done["changes"][0].startswith("snapshot ")
    assert b"\r\n" not in path.read_bytes()


def test_snapshots_list_and_roll_back_with_the_libraries_checks(client: Client, store: MemoryStore) -> None:
    made = store.snapshot(label="before")
    path = store.memory_dir / "project_studio_opening.md"
    original = path.read_text()
    path.write_text(original.replace("five years", "one year"))
    status, data = client.get("/api/snapshots")
    assert status == 200 and made.id in {s["id"] for s in data["snapshots"]}
    assert client.post("/api/rollback", {"id": made.id, "scope": "everything"})[0] == 400
    assert client.post("/api/rollback", {"id": "no-such-snapshot"})[0] in (400, 404)
    status, _ = client.post("/api/rollback", {"id": made.id, "scope": "files"})
    assert status == 200 and path.read_text() == original


MINE = "---\ndescription: the studio opens in May\n---\nmine\n"


def test_conflicts_are_listed_and_resolved(client: Client, store: MemoryStore) -> None:
    current = store.read("project_studio_opening.md")
    (store.memory_dir / "project_studio_opening.md").write_text(current.text + "\nedited by hand\n")
    status, refused = client.post(
        "/api/save",
        {"file": "project_studio_opening.md", "text": MINE, "expected_version": current.version},
    )
    assert status == 409
    status, data = client.get("/api/conflicts")
    assert [c["id"] for c in data["conflicts"]] == [refused["conflict_id"]]
    assert data["conflicts"][0]["proposed"] == MINE
    # "Save mine over it" on the conflict page resolves the recorded conflict with the refused text.
    assert client.post("/api/conflicts/resolve", {"id": refused["conflict_id"], "keep": "proposed"})[0] == 200
    assert store.read("project_studio_opening.md").text == MINE
    assert client.get("/api/conflicts")[1]["conflicts"] == []
    assert client.get("/api/overview")[1]["conflicts"] == 0


def test_a_forged_state_record_breaks_no_page(client: Client, store: MemoryStore) -> None:
    """One forged conflict record, one forged ledger: every page answers, the health page
    names both, and asking for the forged conflict itself is a clear refusal."""
    current = store.read("project_studio_opening.md")
    (store.memory_dir / "project_studio_opening.md").write_text(current.text + "\nedited by hand\n")
    refused = client.post(
        "/api/save", {"file": "project_studio_opening.md", "text": MINE, "expected_version": current.version}
    )[1]
    real = store.state_dir / "conflicts" / f"{refused['conflict_id']}.json"
    forged = {**json.loads(real.read_text()), "id": "0123456789abcdef", "created": 1}
    (real.parent / "0123456789abcdef.json").write_text(json.dumps(forged))
    (store.state_dir / "access.json").write_text(json.dumps({"files": []}))
    for path in ("/api/overview", "/api/health", "/api/conflicts", "/api/candidates", "/api/snapshots"):
        assert client.get(path)[0] == 200, path
    status, data = client.get("/api/conflicts")
    assert [c["id"] for c in data["conflicts"]] == [refused["conflict_id"]]
    flagged = {f["file"] for f in client.get("/api/health")[1]["findings"] if f["check"] == "state-record"}
    assert flagged == {str(real.parent / "0123456789abcdef.json"), str(store.state_dir / "access.json")}
    status, data = client.post("/api/conflicts/resolve", {"id": "0123456789abcdef", "keep": "proposed"})
    assert status == 400 and "conflict record is damaged (created: is a number, not text)" in data["error"]


def test_bad_requests_are_refused_clearly(client: Client) -> None:
    status, data, _ = client.call("POST", "/api/archive", b"not json")
    assert status == 400 and "JSON" in data["error"]
    assert client.post("/api/nothing", {})[0] == 404
    assert client.post("/api/candidates/apply", {"files": 5})[0] == 400
    assert client.post("/api/archive", ["project_old_plan.md"])[0] == 400
    status, data, _ = client.call("POST", "/api/archive", b"\xff\xfe{")
    assert status == 400 and "JSON" in data["error"]


def test_a_body_nested_too_deeply_is_answered(client: Client) -> None:
    status, data, _ = client.call("POST", "/api/lock", b"[" * 200_000)
    assert status == 400 and "deeply" in data["error"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Sagemem-Token": "wrong"},
        {"X-Sagemem-Token": TOKEN, "Origin": "https://evil.example"},
    ],
    ids=["no token", "wrong token", "foreign origin"],
)
def test_a_refused_request_is_answered_without_its_body_being_read(
    client: Client, store: MemoryStore, headers: dict[str, str]
) -> None:
    # The headers promise 200,000 bytes and only the first 1,000 come: the 403 can only arrive
    # (before the socket's timeout) if the server does not wait for the rest.
    head = request_head(client.port, "POST", "/api/lock", {**headers, "Content-Length": "200000"})
    with connect(client.port) as sock:
        sock.sendall(head + b"[" * 1000)
        status, data = answer(sock)  # and the server closed the connection
    assert status == 403 and "error" in data
    assert store.locked() == set()


def test_a_wrong_host_is_refused_without_its_body_being_read(client: Client) -> None:
    head = request_head(client.port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": "500"})
    head = head.replace(
        f"Host: 127.0.0.1:{client.port}".encode(), f"Host: evil.example:{client.port}".encode()
    )
    with connect(client.port) as sock:
        sock.sendall(head)
        assert answer(sock)[0] == 403


def test_a_body_over_the_limit_is_refused_unread(client: Client) -> None:
    head = request_head(
        client.port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": str(MAX_BODY + 1)}
    )
    with connect(client.port) as sock:
        sock.sendall(head + b"{")
        assert answer(sock)[0] == 413


@pytest.mark.parametrize("length", ["-1", "abc", "+2", "0_2", "2.0", "0x2", ""])
def test_a_content_length_that_is_not_a_number_of_bytes_is_refused(
    client: Client, store: MemoryStore, length: str
) -> None:
    # `{}` is a valid body for /api/fix, so only the header is wrong (int() would take +2 and 0_2).
    status, data, _ = client.call("POST", "/api/fix", b"{}", headers={"Content-Length": length})
    assert status == 400 and "Content-Length" in data["error"]
    assert store.snapshots() == []  # the fix did not run


def test_a_body_shorter_than_its_content_length_is_refused(client: Client, store: MemoryStore) -> None:
    body = json.dumps({"file": "user_dancer_profile.md"}).encode()
    head = request_head(client.port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": "500"})
    with connect(client.port) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)  # the client says it is done: the rest will never come
        status, data = answer(sock)
    assert status == 400 and "shorter" in data["error"]
    assert store.locked() == set()  # a complete-looking prefix is not taken for the body


def test_a_client_stalled_in_its_body_holds_up_no_one(client: Client, store: MemoryStore) -> None:
    body = json.dumps({"file": "user_dancer_profile.md"}).encode()
    head = request_head(
        client.port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": str(len(body))}
    )
    with connect(client.port) as stalled:
        stalled.sendall(head + body[:5])
        # While its handler waits for the rest, others read and change (the change lock is free).
        assert client.get("/api/overview")[0] == 200
        assert client.post("/api/lock", {"file": "project_old_plan.md"}) == (200, {"changed": True})
        stalled.sendall(body[5:])
        assert answer(stalled) == (200, {"changed": True})  # it was still waiting, and is served
    assert store.locked() == {"project_old_plan.md", "user_dancer_profile.md"}


def test_a_client_that_stalls_past_the_timeout_is_answered_and_let_go(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Handler, "timeout", 1)  # for connections made from here on
    head = request_head(client.port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": "100"})
    with connect(client.port) as sock:
        sock.sendall(head + b'{"file": ')
        status, data = answer(sock)  # within the handler's timeout, and the connection closed
    assert status == 408 and "error" in data


def test_clients_that_hang_up_early_leave_the_terminal_quiet(
    server: Server, client: Client, capfd: pytest.CaptureFixture[str]
) -> None:
    server.daemon_threads = False  # so that server_close() below waits for every handler to end
    port = client.port
    overview = request_head(port, "GET", "/api/overview", {"X-Sagemem-Token": TOKEN})
    script = request_head(port, "GET", f"/app.js?token={TOKEN}", {})
    partial = request_head(port, "POST", "/api/lock", {"X-Sagemem-Token": TOKEN, "Content-Length": "100"})
    for _ in range(50):
        with connect(port) as sock:  # asks, and is gone before the answer is written
            sock.sendall(overview)
            reset(sock)
        with connect(port) as sock:  # asks, and closes without reading the answer
            sock.sendall(overview)
        with connect(port) as sock:  # gone in the middle of the answer
            sock.sendall(script)
            sock.recv(10)
            reset(sock)
        with connect(port) as sock:  # gone while its headers are read
            sock.sendall(overview[:20])
            reset(sock)
        with connect(port) as sock:  # gone while its body is read
            sock.sendall(partial + b"{")
            reset(sock)
        with connect(port) as sock:  # refused, and gone before the refusal is written
            sock.sendall(request_head(port, "POST", "/api/lock", {"Content-Length": "100"}))
            reset(sock)
    assert client.get("/api/overview")[0] == 200
    server.shutdown()
    server.server_close()
    assert capfd.readouterr().err == ""


def test_a_failure_of_our_own_is_answered_500_and_shown_on_the_terminal(
    client: Client, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from sagemem.ui import server as ui

    def broken(_app: Any, _query: dict[str, str]) -> dict[str, Any]:
        raise RuntimeError("a bug")

    monkeypatch.setitem(ui.GET_ROUTES, "/api/health", broken)
    status, data = client.get("/api/health")
    assert status == 500 and "RuntimeError" in data["error"] and "Traceback" not in data["error"]
    err = capfd.readouterr().err  # written before the answer was sent
    assert err.count("Traceback") == 1 and "RuntimeError: a bug" in err
    assert client.get("/api/overview")[0] == 200


def test_a_damaged_state_file_leaves_the_page_usable(client: Client, store: MemoryStore) -> None:
    (store.memory_dir / "archive").write_text("a file where the archive folder should be")
    status, data = client.get("/api/overview")
    assert status == 200 and data["troubles"]
    assert {m["file"] for m in data["memories"]} >= {"project_studio_opening.md"}


@contextmanager
def command(*args: str, cwd: Path | None = None) -> Iterator[tuple[int, str]]:
    """`sagemem ui --no-open` running: the port and the token of the URL it printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemem", *args, "ui", "--no-open"],
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "BROWSER": "false"},
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("sagemem ui: http://127.0.0.1:") and "?token=" in line
        url = line.split()[2]
        yield int(url.split(":")[2].split("/")[0]), url.split("token=")[1]
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


def overview_of(port: int, token: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/api/overview", headers={"X-Sagemem-Token": token})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    return response.status, json.loads(raw)


def test_the_command_prints_a_tokened_local_url(store: MemoryStore) -> None:
    with command("--dir", str(store.memory_dir)) as (port, token):
        status, data = overview_of(port, token)
    assert status == 200
    # A directory named by hand is a set of one scope: plain names, as before sets.
    assert data["named"] is False and "project_studio_opening.md" in {m["file"] for m in data["memories"]}


def test_the_browser_is_opened_on_a_private_redirect_not_on_the_token(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    from sagemem.ui import server as ui

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", opened.append)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    server = Server(store, token=TOKEN)
    try:
        ui._open(server)
    finally:
        server.server_close()
    assert len(opened) == 1 and TOKEN not in opened[0]  # what other users can see in `ps`
    page = Path(opened[0].removeprefix("file://"))
    assert page.stat().st_mode & 0o777 == 0o600 and server.url in page.read_text()


# -- a memory set: the project's memory and the user's --------------------------------------

PNPM = "---\nname: pnpm\ndescription: The user prefers pnpm over npm\ntype: user\n---\n\nUse pnpm install.\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project with the dance memories, and a user memory (under the tests' HOME) with
    one memory of its own, an old plan, and a profile of the same name as the project's."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    make(root / ".sagemem" / "memory", DANCE)
    make(
        Path(os.environ["HOME"]) / ".sagemem" / "memory",
        {
            "user_pnpm.md": PNPM,
            "project_old_plan.md": OLD_PLAN,
            "user_dancer_profile.md": DANCE["user_dancer_profile.md"],
        },
    )
    return root


@pytest.fixture
def memories(project: Path) -> MemorySet:
    found = MemorySet.locate(cwd=project)
    assert [s.scope for s in found.stores] == ["project", "user"]
    return found


@pytest.fixture
def scoped(memories: MemorySet) -> Iterator[Client]:
    server = Server(memories, token=TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Client(server)
    server.shutdown()
    server.server_close()


def test_the_overview_shows_every_scope_with_qualified_names(scoped: Client, memories: MemorySet) -> None:
    memories.store("user").archive("project_old_plan.md", reason="an old plan")
    status, data = scoped.get("/api/overview")
    assert status == 200 and data["named"] is True
    assert [(s["name"], s["memories"]) for s in data["scopes"]] == [("project", len(DANCE)), ("user", 2)]
    files = {m["file"]: m for m in data["memories"]}
    assert files["project:project_studio_opening.md"]["scope"] == "project"
    assert files["user:user_pnpm.md"]["scope"] == "user" and not files["user:user_pnpm.md"]["archived"]
    assert {"project:user_dancer_profile.md", "user:user_dancer_profile.md"} <= set(files)
    assert files["user:project_old_plan.md"]["archived"] is True
    assert files["user:project_old_plan.md"]["archived_reason"] == "an old plan"
    assert all(m["file"].startswith(m["scope"] + ":") for m in data["memories"])
    assert data["types"]["user"] == 3  # counted over both scopes


def test_search_ranks_across_every_scope(scoped: Client, memories: MemorySet) -> None:
    status, data = scoped.get("/api/search?q=should%20I%20use%20pnpm%20or%20npm")
    assert status == 200 and data["files"][0] == "user:user_pnpm.md"
    assert data["files"][0] == memories.search("should I use pnpm or npm").hits[0].file
    assert (
        "project:project_studio_opening.md" in scoped.get("/api/search?q=studio%20lease%20rent")[1]["files"]
    )


def test_a_stale_save_in_the_user_scope_is_a_conflict_of_the_user_scope(
    scoped: Client, memories: MemorySet
) -> None:
    user, project = memories.store("user"), memories.store("project")
    status, memory = scoped.get("/api/memory?file=user:user_pnpm.md")
    assert status == 200 and memory["file"] == "user:user_pnpm.md"
    path = user.memory_dir / "user_pnpm.md"
    theirs = memory["text"] + "\nedited by hand\n"
    path.write_text(theirs)
    mine = memory["text"].replace("Use pnpm install.", "Use pnpm, always.")
    status, refused = scoped.post(
        "/api/save", {"file": "user:user_pnpm.md", "text": mine, "expected_version": memory["version"]}
    )
    assert status == 409 and refused["file"] == "user:user_pnpm.md" and refused["theirs"] == theirs
    scope, _, own = refused["conflict_id"].partition(":")
    assert scope == "user" and user.conflict(own).proposed == mine.encode()
    assert project.conflicts() == [] and path.read_text() == theirs
    listed = scoped.get("/api/conflicts")[1]["conflicts"]
    assert [(c["id"], c["file"], c["scope"]) for c in listed] == [
        (refused["conflict_id"], "user:user_pnpm.md", "user")
    ]
    assert scoped.get("/api/overview")[1]["conflicts"] == 1
    # Resolving goes to the scope the id names.
    status, settled = scoped.post(
        "/api/conflicts/resolve", {"id": refused["conflict_id"], "keep": "proposed"}
    )
    assert status == 200 and settled["resolution"] == "proposed" and path.read_text() == mine
    assert user.conflicts() == [] and scoped.get("/api/conflicts")[1]["conflicts"] == []
    # A fresh save in that scope writes there.
    current = user.read("user_pnpm.md")
    status, saved = scoped.post(
        "/api/save",
        {"file": "user:user_pnpm.md", "text": mine + "more\n", "expected_version": current.version},
    )
    assert status == 200 and saved["file"] == "user:user_pnpm.md" and path.read_text() == mine + "more\n"


def test_create_goes_to_the_scope_chosen_else_where_its_type_belongs(
    scoped: Client, memories: MemorySet
) -> None:
    user, project = memories.store("user"), memories.store("project")

    def create(**fields: str) -> tuple[int, Any]:
        return scoped.post("/api/create", {"name": "x", "description": "a test memory", **fields})

    assert create(type="project", scope="user") == (
        200,
        {**create_answer(user, "project_x.md"), "scope": "user"},
    )
    assert not (project.memory_dir / "project_x.md").exists()
    status, made = create(type="user")
    assert status == 200 and made["file"] == "user:user_x.md" and (user.memory_dir / "user_x.md").is_file()
    status, made = create(type="feedback")
    assert status == 200 and made["file"] == "project:feedback_x.md"
    assert (project.memory_dir / "feedback_x.md").is_file()
    status, refused = create(type="reference", scope="nowhere")
    assert status == 404 and "no such scope" in refused["error"]
    assert not list(project.memory_dir.glob("reference_x.md")) and not list(
        user.memory_dir.glob("reference_x.md")
    )


def create_answer(store: MemoryStore, file: str) -> dict[str, str]:
    return {"file": f"{store.scope}:{file}", "version": store.read(file).version}


def test_archive_restore_lock_and_unlock_in_the_second_scope(scoped: Client, memories: MemorySet) -> None:
    user, project = memories.store("user"), memories.store("project")
    assert scoped.post("/api/lock", {"file": "user:user_pnpm.md"}) == (200, {"changed": True})
    assert user.locked() == {"user_pnpm.md"} and project.locked() == set()
    status, refused = scoped.post("/api/archive", {"file": "user:user_pnpm.md"})
    assert status == 400 and "locked" in refused["error"]
    assert scoped.post("/api/unlock", {"file": "user_pnpm.md"}) == (
        200,
        {"changed": True},
    )  # one scope has it
    assert user.locked() == set()
    status, done = scoped.post("/api/archive", {"file": "user:user_pnpm.md", "reason": "switched"})
    assert status == 200 and done == {"file": "user:user_pnpm.md"}
    assert (user.memory_dir / "archive" / "user_pnpm.md").is_file() and not (
        user.memory_dir / "user_pnpm.md"
    ).exists()
    status, read = scoped.get("/api/memory?file=user:user_pnpm.md&archived=1")
    assert status == 200 and read["file"] == "user:user_pnpm.md" and "switched" in read["text"]
    assert scoped.post("/api/restore", {"file": "user:user_pnpm.md"}) == (200, {"file": "user:user_pnpm.md"})
    assert (user.memory_dir / "user_pnpm.md").is_file()
    assert {p.name for p in project.memory_dir.iterdir()} >= set(DANCE)  # the project's untouched


@pytest.mark.parametrize(
    "name",
    [
        "user:../secret.md",
        "user:..%2Fsecret.md",
        "user:sub%2Fx.md",
        "user:MEMORY.md",
        "user:",
        ":user_pnpm.md",
    ],
)
def test_the_file_part_of_a_scoped_name_is_checked(scoped: Client, name: str) -> None:
    status, data = scoped.get(f"/api/memory?file={name}")
    assert status == 400 and "error" in data


def test_an_unknown_scope_or_a_name_two_scopes_hold_is_refused_clearly(
    scoped: Client, memories: MemorySet
) -> None:
    status, data = scoped.get("/api/memory?file=elsewhere:user_pnpm.md")
    assert (
        status == 404 and "'elsewhere': no such scope" in data["error"] and "project, user" in data["error"]
    )
    status, data = scoped.post("/api/archive", {"file": "user:../../proj/.sagemem/memory/x.md"})
    assert status == 400
    status, data = scoped.post("/api/archive", {"file": "user_dancer_profile.md"})
    assert status == 400 and "more than one scope" in data["error"]
    assert (memories.store("project").memory_dir / "user_dancer_profile.md").is_file()
    assert (memories.store("user").memory_dir / "user_dancer_profile.md").is_file()
    status, data = scoped.get("/api/memory?file=user_pnpm.md")  # one scope holds it: found there
    assert status == 200 and data["file"] == "user:user_pnpm.md"


def test_health_fix_snapshots_and_rollback_each_in_their_own_scope(
    scoped: Client, memories: MemorySet
) -> None:
    user, project = memories.store("user"), memories.store("project")
    path = user.memory_dir / "user_pnpm.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    status, report = scoped.get("/api/health")
    assert status == 200
    crlf = [f for f in report["findings"] if f["check"] == "crlf"]
    assert [(f["file"], f["scope"]) for f in crlf] == [("user:user_pnpm.md", "user")]
    status, done = scoped.post("/api/fix", {})
    assert status == 200 and b"\r\n" not in path.read_bytes()
    assert "user:user_pnpm.md: CRLF line endings converted to LF" in done["changes"]
    made = user.snapshot(label="before")
    original = path.read_text()
    path.write_text(original.replace("pnpm install", "yarn"))
    listed = scoped.get("/api/snapshots")[1]["snapshots"]
    assert {"id": f"user:{made.id}", "scope": "user"}.items() <= next(
        s for s in listed if s["label"] == "before"
    ).items()
    before = [s.id for s in project.snapshots()]
    status, outcome = scoped.post("/api/rollback", {"id": f"user:{made.id}", "scope": "files"})
    assert status == 200 and outcome["restored"] == ["user:user_pnpm.md"] and path.read_text() == original
    assert outcome["protection"].startswith("user:") and [s.id for s in project.snapshots()] == before
    status, refused = scoped.post("/api/rollback", {"id": f"project:{made.id}"})  # not that scope's
    assert status in (400, 404) and made.id in refused["error"]


def test_candidates_of_every_scope_are_archived_in_their_scope(scoped: Client, memories: MemorySet) -> None:
    user = memories.store("user")
    status, data = scoped.get("/api/candidates")
    assert status == 200 and "user:project_old_plan.md" in {c["file"] for c in data["candidates"]}
    status, done = scoped.post("/api/candidates/apply", {"files": ["user:project_old_plan.md"]})
    assert status == 200 and done["archived"] == ["user:project_old_plan.md"] and done["refused"] == []
    assert [s.split(":")[0] for s in done["snapshots"]] == ["user"]
    assert done["snapshot"].removeprefix("user:") in {s.id for s in user.snapshots()}
    assert (user.memory_dir / "archive" / "project_old_plan.md").is_file()


def test_the_command_serves_the_set_of_its_project(project: Path) -> None:
    with command(cwd=project) as (port, token):
        status, data = overview_of(port, token)
    assert status == 200 and [s["name"] for s in data["scopes"]] == ["project", "user"]
    assert {"project:project_studio_opening.md", "user:user_pnpm.md"} <= {m["file"] for m in data["memories"]}


def test_a_damaged_second_scope_is_named_and_the_others_are_shown(
    scoped: Client, memories: MemorySet
) -> None:
    (memories.store("user").memory_dir / "archive").write_text("a file where the archive folder should be")
    status, data = scoped.get("/api/overview")
    assert status == 200 and data["troubles"] and all(t.startswith("user: ") for t in data["troubles"])
    assert {"project:project_studio_opening.md", "user:user_pnpm.md"} <= {m["file"] for m in data["memories"]}


def propose_archiving_the_old_plan(store: MemoryStore) -> dict[str, Any]:
    """A report run (against a scripted model) that proposes to archive the old plan."""
    from sagemem.dream import dream

    from .fake_openai import calls, final, serving

    script = [
        calls(("read_memory", {"file": "project_old_plan.md"})),
        calls(("propose_archive", {"file": "project_old_plan.md", "reason": "the plan was replaced"})),
        final("Proposed one archive."),
    ]
    with serving(script) as fake:
        return dream(store, base_url=fake.url, model="fake-model")


def test_dream_runs_are_listed_shown_applied_and_rolled_back(client: Client, store: MemoryStore) -> None:
    path = store.memory_dir / "project_old_plan.md"
    original = path.read_bytes()
    run = propose_archiving_the_old_plan(store)
    status, data = client.get("/api/dream")
    assert status == 200 and [(r["id"], r["mode"], r["proposals"]) for r in data["runs"]] == [
        (run["id"], "report", 1)
    ]
    status, shown = client.get(f"/api/dream/run?id={run['id']}")
    assert (
        status == 200 and "the plan was replaced" in shown["report"] and shown["manifest"]["id"] == run["id"]
    )
    assert client.get("/api/dream/run?id=../../etc")[0] == 400
    status, applied = client.post("/api/dream/apply", {"id": run["id"]})
    assert status == 200 and applied["changes"] == ["project_old_plan.md"] and not path.exists()
    assert client.post("/api/dream/apply", {"id": run["id"]})[0] == 400  # applied already
    assert client.post("/api/dream/rollback", {"id": applied["id"], "scope": "some"})[0] == 400
    status, undone = client.post("/api/dream/rollback", {"id": applied["id"], "scope": "files"})
    assert status == 200 and undone["restored"][0] == "project_old_plan.md" and path.read_bytes() == original


def test_a_rolled_back_dream_run_is_shown_as_such_and_not_rolled_back_twice(
    client: Client, store: MemoryStore
) -> None:
    path = store.memory_dir / "project_old_plan.md"
    original = path.read_bytes()
    run = propose_archiving_the_old_plan(store)
    status, applied = client.post("/api/dream/apply", {"id": run["id"]})
    assert status == 200 and not path.exists()
    (before,) = [r for r in client.get("/api/dream")[1]["runs"] if r["id"] == applied["id"]]
    assert (before["status"], before["rolled_back"]) == ("done", None)
    status, undone = client.post("/api/dream/rollback", {"id": applied["id"], "parts": "files"})
    assert status == 200 and path.read_bytes() == original
    status, data = client.get("/api/dream")
    (after,) = [r for r in data["runs"] if r["id"] == applied["id"]]
    assert (after["status"], after["run_status"], after["rolled_back"]) == (
        "rolled back",
        "done",
        undone["at"],
    )
    status, shown = client.get(f"/api/dream/run?id={applied['id']}")
    assert f"- status: done; rolled back {undone['at']}" in shown["report"]
    snapshots = len(store.snapshots())
    assert client.post("/api/dream/rollback", {"id": applied["id"], "parts": "some"})[0] == 400
    status, refused = client.post("/api/dream/rollback", {"id": applied["id"], "parts": "all"})
    assert (
        status == 400
        and "rolled back already" in refused["error"]
        and "nothing was changed" in refused["error"]
    )
    assert path.read_bytes() == original and len(store.snapshots()) == snapshots
    # The page offers no second roll back: it reads `rolled_back`, and the table has its headers.
    page = (Path(__file__).parents[1] / "sagemem" / "ui" / "static" / "app.js").read_text()
    assert "r.changes && !r.rolled_back" in page and 'h("thead"' in page


def test_a_snapshot_rollback_takes_its_parts(client: Client, store: MemoryStore) -> None:
    made = store.snapshot(label="before")
    store.create(type="project", name="later", description="made after the snapshot")
    assert client.post("/api/rollback", {"id": made.id, "parts": "everything"})[0] == 400
    status, outcome = client.post("/api/rollback", {"id": made.id, "parts": "all"})
    assert status == 200 and outcome["scope"] == "all" and outcome["retired"] == ["project_later.md"]
