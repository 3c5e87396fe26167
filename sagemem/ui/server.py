"""`sagemem ui`: a local web page to look after the memories, a thin face over `MemorySet`.

Served by the standard library's HTTP server on 127.0.0.1 only. Every rule of the library
holds because every action calls the library: names are checked, writes are version guarded
(a stale save becomes a recorded conflict), locked memories are not archived, bulk changes
take a snapshot first.

The page shows every scope of the set, as the CLI does: with several, each memory is named
with its scope (`user:user_cat.md`), and so are the conflicts and snapshots, each of which
belongs to one scope's state (`user:<id>`); what the page sends back is taken apart again
(`MemorySet.split`), the file part checked by the name rule, and the action done by that
scope's store. With one scope (a directory chosen by hand) names are plain, as before sets.

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

The page itself is plain HTML, CSS and JavaScript shipped in the package (`static/`),
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
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..memory_set import MemorySet
from ..memory_store import MemoryStore
from ..store.errors import SagememError
from .app import GET_ROUTES, POST_ROUTES, App, Conflicted, Gone, Refused, as_set, status_of

HEADER = "X-Sagemem-Token"
MAX_BODY = 1024 * 1024
STATIC = ("index.html", "app.js", "style.css")
# How a client that hung up or stalled shows up on its socket: nobody is left to answer, and
# it is no fault of ours, so not worth a line on the terminal.
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, memories: MemorySet | MemoryStore, port: int = 0, token: str | None = None) -> None:
        self.app = App(as_set(memories))
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
        except Conflicted as exc:
            status, payload, headers = _json(HTTPStatus.CONFLICT, exc.data)
        except (Refused, SagememError, KeyError, ValueError, TypeError) as exc:
            status, payload, headers = _json(status_of(exc), {"error": str(exc)})
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
        data = resources.files("sagemem.ui").joinpath("static", name).read_bytes()
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
    try:
        payload = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:  # a path the file system gave that is not UTF-8: as \u escapes
        payload = json.dumps(data, default=str).encode("ascii")
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Content-Length": str(len(payload)),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
    }
    return status, payload, headers


def serve(
    memories: MemorySet | MemoryStore, *, port: int = 0, open_browser: bool = True, announce: Any = print
) -> None:
    """Serve until interrupted."""
    server = Server(memories, port)
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

    from ..store.config import temp_dir

    folder = temp_dir()
    if folder is None:
        webbrowser.open(server.url)
        return
    page = folder / f"ui-{server.port}.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with open(fd, "w", encoding="utf-8") as handle:
        handle.write(f'<!doctype html><meta http-equiv="refresh" content="0;url={server.url}">\n')
    webbrowser.open(page.as_uri())
