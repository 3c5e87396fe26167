"""`sagemem ui`: a local web page to look after the memories, a thin face over `MemoryStore`.

Served by the standard library's HTTP server on 127.0.0.1 only. Every rule of the library
holds because every action calls the library: names are checked, writes are version guarded
(a stale save becomes a recorded conflict), locked memories are not archived, bulk changes
take a snapshot first.

Who may talk to it:

* Every request carries the run's random token: the page and its two files in the URL (the
  one the command prints; the page asks for its script and style with it), the API calls in
  the `X-Sagemem-Token` header. A request without it is refused. There is no cookie: browsers
  send cookies to every port of a host, so one would leak the token to other local servers.
* The `Host` header must name this server (`127.0.0.1:<port>` or `localhost:<port>`), so a
  DNS-rebinding page on another name gets nothing; a request with an `Origin` header must
  come from this server, so another site cannot post to it.
* Changes (POST, PUT) take the token only from the header, which another site cannot set.
* All of that is checked from the request line and headers before any body is read: a
  refused request is answered and its connection closed with the body unread, so a client
  without the token cannot make the server read, let alone parse, anything more.

Every request that reaches a handler gets an answer: a body that is not a JSON object (too
deep, too large, shorter than its `Content-Length`, stalled) a 4xx, any failure of our own a
500 with a one-line error (its traceback goes to the terminal). A client that hangs up or
stalls past the timeout is dropped without a word.

The page itself is plain HTML, CSS and JavaScript shipped in the package (`ui_static/`),
with no build step and nothing loaded from the internet.
"""

from __future__ import annotations

import hmac
import json
import mimetypes
import os
import secrets
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .archive import ARCHIVE_DIR
from .errors import MemoryNotFound, SagememError, VersionConflict
from .files import read_bytes
from .names import check_name, name_key
from .store import MemoryStore

HEADER = "X-Sagemem-Token"
MAX_BODY = 1024 * 1024
STATIC = ("index.html", "app.js", "style.css")
# How a client that hung up or stalled shows up on its socket: nobody is left to answer, and
# it is no fault of ours, so not worth a line on the terminal.
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class Refused(Exception):
    """A request the server will not serve: (status, message)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class Gone(Exception):
    """The client hung up while its request was being read."""


class App:
    """The API: one method per route, each a call into the store."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    # -- reading ------------------------------------------------------------------------

    def overview(self, _query: dict[str, str]) -> dict[str, Any]:
        """Every memory (live and archived) with what the list, the chips and the star map
        need; the header's counts."""
        store = self.store
        scan = store.scan()
        troubles: list[str] = []  # one damaged state file must not take the whole page down
        locked = _or(store.locked, set(), troubles)
        uses = _or(store.ledger, {}, troubles)
        now = time.time()

        def item(memory: Any, archived: bool) -> dict[str, Any]:
            record = uses.get(memory.file)
            last = record.last_used if record else None
            return {
                "file": memory.file,
                "name": memory.title,
                "description": memory.description,
                "type": memory.type,
                "tags": list(memory.tags),
                "updated": memory.updated,
                "bytes": memory.size,
                "version": memory.version,
                "locked": name_key(memory.file) in locked,
                "archived": archived,
                "archived_reason": str(memory.extra.get("archived_reason", "")) if archived else "",
                "archived_at": str(memory.extra.get("archived_at", "")) if archived else "",
                "idle_days": None if last is None else int((now - last) // 86400),
            }

        live = [item(m, False) for m in scan.memories]
        archived = [item(m, True) for m in _or(store.archived, [], troubles)]
        tags: dict[str, int] = {}
        types: dict[str, int] = {}
        for entry in live:
            types[entry["type"]] = types.get(entry["type"], 0) + 1
            for tag in entry["tags"]:
                tags[tag] = tags.get(tag, 0) + 1
        return {
            "memory_dir": str(store.memory_dir),
            "memories": live + archived,
            "broken": [{"file": p.file, "rule": p.rule} for p in scan.problems],
            "types": dict(sorted(types.items())),
            "tags": dict(sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))),
            "problems": _or(lambda: store.check().problems, 0, troubles),
            "conflicts": len(_or(store.conflicts, [], troubles)),
            "troubles": troubles,
        }

    def search(self, query: dict[str, str]) -> dict[str, Any]:
        """The files `sagemem search` ranks for `q`, best first (the page ANDs them with its chips)."""
        text = query.get("q", "").strip()
        if not text:
            return {"files": []}
        result = self.store.search(text, limit=30)
        return {"files": list(dict.fromkeys(h.file for h in result.ranked))}

    def memory(self, query: dict[str, str]) -> dict[str, Any]:
        file = _name(query.get("file"))
        if query.get("archived") == "1":
            found = next((m for m in self.store.archived() if m.file == file), None)
            if found is None:
                raise MemoryNotFound(file)
            data = read_bytes(self.store.memory_dir / ARCHIVE_DIR / found.file)  # links and size refused
            return {"file": file, "archived": True, "version": found.version, "text": data.decode("utf-8")}
        read = self.store.read(file)
        return {
            "file": read.file,
            "archived": False,
            "version": read.version,
            "text": read.text,
            "problem": read.problem,
        }

    def candidates(self, _query: dict[str, str]) -> dict[str, Any]:
        return {"candidates": [c.to_dict() for c in self.store.candidates()]}

    def health(self, _query: dict[str, str]) -> dict[str, Any]:
        return self.store.check().to_dict()

    def snapshots(self, _query: dict[str, str]) -> dict[str, Any]:
        return {"snapshots": [s.to_dict() for s in self.store.snapshots()]}

    def conflicts(self, _query: dict[str, str]) -> dict[str, Any]:
        return {"conflicts": [c.to_dict() for c in self.store.conflicts()]}

    # -- changing -----------------------------------------------------------------------

    def save(self, body: dict[str, Any]) -> dict[str, Any]:
        """Write the whole file, guarded by the version the page loaded (None: create)."""
        file = _name(body.get("file"))
        text = body.get("text")
        if not isinstance(text, str):
            raise Refused(HTTPStatus.BAD_REQUEST, "`text` must be the file's whole text")
        expected = body.get("expected_version")
        memory = self.store.write(file, text, expected_version=expected, writer="sagemem ui")
        return {"file": memory.file, "version": memory.version}

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        tags = body.get("tags") or []
        memory = self.store.create(
            type=str(body.get("type") or ""),
            name=str(body.get("name") or ""),
            description=str(body.get("description") or ""),
            body=str(body.get("body") or ""),
            tags=[str(t) for t in tags] if isinstance(tags, list) else [],
            writer="sagemem ui",
        )
        return {"file": memory.file, "version": memory.version}

    def archive(self, body: dict[str, Any]) -> dict[str, Any]:
        memory = self.store.archive(
            _name(body.get("file")), reason=str(body.get("reason") or "archived in sagemem ui")
        )
        return {"file": memory.file}

    def restore(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"file": self.store.restore(_name(body.get("file"))).file}

    def lock(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"changed": self.store.lock(_name(body.get("file")))}

    def unlock(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"changed": self.store.unlock(_name(body.get("file")))}

    def apply_candidates(self, body: dict[str, Any]) -> dict[str, Any]:
        """Archive the chosen candidates, each on its own (one refusal does not stop the rest)."""
        files = body.get("files") or []
        if not isinstance(files, list):
            raise Refused(HTTPStatus.BAD_REQUEST, "`files` must be a list of file names")
        wanted = {_name(f) for f in files}
        reasons = {c.file: c.reason for c in self.store.candidates()}
        done, refused = [], []
        if wanted:
            made = self.store.snapshot(label="before archiving candidates in sagemem ui", kind="auto")
        for file in sorted(wanted):
            if file not in reasons:
                refused.append({"file": file, "error": "no longer an archive candidate"})
                continue
            try:
                self.store.archive(file, reason=reasons[file])
                done.append(file)
            except SagememError as exc:
                refused.append({"file": file, "error": str(exc)})
        return {"archived": done, "refused": refused, "snapshot": made.id if wanted else None}

    def fix(self, _body: dict[str, Any]) -> dict[str, Any]:
        return {"changes": self.store.fix()}

    def rollback(self, body: dict[str, Any]) -> dict[str, Any]:
        scope = str(body.get("scope") or "files")
        if scope not in ("files", "all"):
            raise Refused(HTTPStatus.BAD_REQUEST, "scope must be files or all")
        return self.store.rollback(str(body.get("id") or ""), scope=scope)

    def resolve(self, body: dict[str, Any]) -> dict[str, Any]:
        keep = str(body.get("keep") or "")
        if keep not in ("disk", "proposed"):
            raise Refused(HTTPStatus.BAD_REQUEST, "keep must be disk or proposed")
        return self.store.resolve_conflict(str(body.get("id") or ""), keep, writer="sagemem ui").to_dict()


GET_ROUTES = {
    "/api/overview": App.overview,
    "/api/search": App.search,
    "/api/memory": App.memory,
    "/api/candidates": App.candidates,
    "/api/health": App.health,
    "/api/snapshots": App.snapshots,
    "/api/conflicts": App.conflicts,
}
POST_ROUTES = {
    "/api/save": App.save,
    "/api/create": App.create,
    "/api/archive": App.archive,
    "/api/restore": App.restore,
    "/api/lock": App.lock,
    "/api/unlock": App.unlock,
    "/api/candidates/apply": App.apply_candidates,
    "/api/fix": App.fix,
    "/api/rollback": App.rollback,
    "/api/conflicts/resolve": App.resolve,
}


def _or(read: Any, fallback: Any, troubles: list[str]) -> Any:
    try:
        return read()
    except (SagememError, OSError, ValueError) as exc:
        troubles.append(str(exc))
        return fallback


def _name(raw: Any) -> str:
    """A memory file name from the page, checked by the library's own rule (no paths)."""
    if not isinstance(raw, str):
        raise Refused(HTTPStatus.BAD_REQUEST, "`file` must be a memory file name")
    return check_name(raw)


def _status(exc: Exception) -> HTTPStatus:
    if isinstance(exc, Refused):
        return exc.status
    if isinstance(exc, VersionConflict):
        return HTTPStatus.CONFLICT
    if isinstance(exc, (MemoryNotFound, KeyError)):
        return HTTPStatus.NOT_FOUND
    return HTTPStatus.BAD_REQUEST


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: MemoryStore, port: int = 0, token: str | None = None) -> None:
        self.app = App(store)
        self.token = token or secrets.token_urlsafe(24)
        self.lock = threading.Lock()  # one change at a time; reads go on in parallel
        super().__init__(("127.0.0.1", port), Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Called while handling what escaped a request: a client gone is dropped quietly
        (every closed tab would print a traceback otherwise), anything else is shown."""
        if isinstance(sys.exc_info()[1], GONE):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = "sagemem-ui"
    timeout = 30  # seconds a client may stall before its connection is dropped

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: the terminal shows the URL and errors only

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._serve(change=False)

    def do_POST(self) -> None:  # noqa: N802
        self._serve(change=True)

    def do_PUT(self) -> None:  # noqa: N802
        self._serve(change=True)

    def _serve(self, *, change: bool) -> None:
        """Work out the whole answer, then send it: a client that hangs up while it is sent
        is dropped by `Server.handle_error`, not mistaken for a failure of the action."""
        try:
            status, payload, headers = self._answer(change)
        except Gone:
            self.close_connection = True
            return
        except VersionConflict as exc:
            status, payload, headers = _json(HTTPStatus.CONFLICT, self._conflict(exc))
        except (Refused, SagememError, KeyError, ValueError, TypeError) as exc:
            status, payload, headers = _json(_status(exc), {"error": str(exc)})
        except OSError as exc:
            status, payload, headers = _json(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{exc.strerror or exc}"}
            )
        except Exception as exc:  # a bug of ours: the page gets a line, the terminal the traceback
            self.server.handle_error(self.request, self.client_address)
            error = f"internal error ({type(exc).__name__}); the terminal running sagemem ui has the details"
            status, payload, headers = _json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": error})
        if status >= 400:
            self.close_connection = True  # a body left unread must not be read as the next request
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _answer(self, change: bool) -> tuple[HTTPStatus, bytes, dict[str, str]]:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self._admit(query, change)  # from the headers alone: a refused client gets no body read
        if change:
            handler = POST_ROUTES.get(url.path)
            if handler is None:
                raise Refused(HTTPStatus.NOT_FOUND, f"no such action: {url.path}")
            body = self._body()  # read before the lock: a slow client holds none
            with self.server.lock:
                return _json(HTTPStatus.OK, handler(self.server.app, body))
        if url.path.startswith("/api/"):
            route = GET_ROUTES.get(url.path)
            if route is None:
                raise Refused(HTTPStatus.NOT_FOUND, f"no such page: {url.path}")
            return _json(HTTPStatus.OK, route(self.server.app, query))
        return self._static(url.path)

    def _conflict(self, exc: VersionConflict) -> dict[str, Any]:
        """What the page needs to show both versions: the refused write is in the queue."""
        data: dict[str, Any] = {"error": str(exc), "conflict_id": exc.conflict_id, "file": exc.file}
        try:
            current = self.server.app.store.read(exc.file)
            data.update(theirs=current.text, theirs_version=current.version)
        except (SagememError, OSError, ValueError):
            data.update(theirs=None, theirs_version=None)  # gone, or not text: the queue has it
        return data

    def _admit(self, query: dict[str, str], change: bool) -> None:
        """The Host, the Origin and the token, as the module docstring says."""
        port = self.server.port
        allowed = {f"127.0.0.1:{port}", f"localhost:{port}"}
        if self.headers.get("Host", "") not in allowed:
            raise Refused(HTTPStatus.FORBIDDEN, "wrong Host: this server answers only to 127.0.0.1")
        origin = self.headers.get("Origin")
        if origin is not None and origin not in {f"http://{a}" for a in allowed}:
            raise Refused(HTTPStatus.FORBIDDEN, "requests from other sites are refused")
        given = self.headers.get(HEADER) or ("" if change else query.get("token", ""))
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.server.token.encode("utf-8")):
            raise Refused(HTTPStatus.FORBIDDEN, "a valid token is needed (open the URL `sagemem ui` printed)")

    def _body(self) -> dict[str, Any]:
        """The request's JSON object. Only a `Content-Length` of plain digits is believed
        (`int` would take `+5` or `1_0`), and the read waits for no more than it says."""
        if "Transfer-Encoding" in self.headers:
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
        given = self.headers.get("Content-Length")
        if given is None:
            return {}
        if not (given.isascii() and given.isdigit()):
            raise Refused(HTTPStatus.BAD_REQUEST, "Content-Length must be a number of bytes")
        size = int(given)
        if size > MAX_BODY:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request too large (1 MiB at most)")
        try:
            raw = self.rfile.read(size)
        except TimeoutError:  # the handler's timeout: a stalled client holds a thread no longer
            raise Refused(HTTPStatus.REQUEST_TIMEOUT, "the body did not arrive in time") from None
        except GONE as exc:
            raise Gone from exc
        if len(raw) < size:
            raise Refused(HTTPStatus.BAD_REQUEST, "the body is shorter than its Content-Length")
        try:
            data = json.loads(raw or b"{}")
        except RecursionError:
            raise Refused(HTTPStatus.BAD_REQUEST, "the body is nested too deeply") from None
        except ValueError:
            raise Refused(HTTPStatus.BAD_REQUEST, "the body must be JSON") from None
        if not isinstance(data, dict):
            raise Refused(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return data

    def _static(self, path: str) -> tuple[HTTPStatus, bytes, dict[str, str]]:
        name = "index.html" if path in ("/", "/index.html") else path.lstrip("/")
        if name not in STATIC:
            raise Refused(HTTPStatus.NOT_FOUND, f"no such page: {path}")
        data = resources.files("sagemem").joinpath("ui_static", name).read_bytes()
        if name == "index.html":  # its script and style are asked for with the token too
            token = self.server.token.encode("ascii")
            for asset in (b"app.js", b"style.css"):
                data = data.replace(b'"' + asset + b'"', b'"' + asset + b"?token=" + token + b'"')
        return (
            HTTPStatus.OK,
            data,
            {
                "Content-Type": mimetypes.guess_type(name)[0] or "application/octet-stream",
                "Content-Length": str(len(data)),
                "Cache-Control": "no-store",
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:;"
                " frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
            },
        )


def _json(status: HTTPStatus, data: Any) -> tuple[HTTPStatus, bytes, dict[str, str]]:
    payload = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": str(len(payload)),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
    return status, payload, headers


def serve(store: MemoryStore, *, port: int = 0, open_browser: bool = True, announce: Any = print) -> None:
    """Serve until interrupted."""
    server = Server(store, port)
    announce(f"sagemem ui: {server.url}  (Ctrl-C to stop)")
    if open_browser:
        threading.Thread(target=_open, args=(server,), daemon=True).start()
    try:
        server.serve_forever()
    finally:
        server.server_close()


def _open(server: Server) -> None:
    """Open the page through a private file that redirects to it: a browser started with the
    URL itself would show the token to every user of the machine (`ps`)."""
    import webbrowser

    from .config import temp_dir

    folder = temp_dir()
    if folder is None:
        webbrowser.open(server.url)
        return
    page = folder / f"ui-{server.port}.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={server.url}">\n')
    webbrowser.open(page.as_uri())
