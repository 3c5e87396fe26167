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
from pathlib import Path
from typing import Any

import pytest

from sagemem import MemoryStore
from sagemem.ui import MAX_BODY, Handler, Server

from .memories import DANCE, OLD_PLAN, make

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


@pytest.mark.parametrize("path", ["/../pyproject.toml", "/ui.py", "/%2e%2e/pyproject.toml", "/api/nothing"])
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
    from sagemem import ui

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


def test_the_command_prints_a_tokened_local_url(store: MemoryStore) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemem", "--dir", str(store.memory_dir), "ui", "--no-open"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "BROWSER": "false"},
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("sagemem ui: http://127.0.0.1:") and "?token=" in line
        url = line.split()[2]
        port = int(url.split(":")[2].split("/")[0])
        token = url.split("token=")[1]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/overview", headers={"X-Sagemem-Token": token})
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


def test_the_browser_is_opened_on_a_private_redirect_not_on_the_token(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    from sagemem import ui

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
