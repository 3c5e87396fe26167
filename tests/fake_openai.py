"""A scripted OpenAI-compatible server on 127.0.0.1, for driving `sagemem dream` in tests.

Each POST to `/v1/chat/completions` takes the next step of the script: a function of the
request (so a step can answer with what the run read, or edit a file as a person would
between rounds) that returns either a tool-call reply (`calls`), a final answer (`final`)
or an HTTP error status (an int: from then on every request fails with it). Every request is
recorded. `GET /v1/models` lists `models`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = Callable[[dict[str, Any]], "dict[str, Any] | int"]


def calls(*pairs: tuple[str, dict[str, Any]], tokens: int = 100) -> dict[str, Any]:
    """A reply that calls the tools `(name, arguments)` in order."""
    return _reply(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(pairs)
            ],
        },
        tokens,
        "tool_calls",
    )


def final(text: str, tokens: int = 50) -> dict[str, Any]:
    return _reply({"role": "assistant", "content": text}, tokens, "stop")


def _reply(message: dict[str, Any], tokens: int, reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {"prompt_tokens": tokens - 10, "completion_tokens": 10, "total_tokens": tokens},
    }


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool answers in a request, in order."""
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"]


class Server:
    def __init__(self, script: list[Step | dict[str, Any] | int], models: list[str]) -> None:
        self.script = list(script)
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.failing: int | None = None
        self.url = ""

    def next(self, request: dict[str, Any]) -> dict[str, Any] | int:
        self.requests.append(request)
        if self.failing is not None:
            return self.failing
        if not self.script:
            return final("(script ended)")
        step = self.script.pop(0)
        answer = step(request) if callable(step) else step
        if isinstance(answer, int):
            self.failing = answer
        return answer


@contextmanager
def serving(script: list[Any], models: list[str] | None = None) -> Iterator[Server]:
    server = Server(script, ["fake-model"] if models is None else models)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in server.models]
                self._send(200, {"object": "list", "data": data})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            answer = server.next(request)
            if isinstance(answer, int):
                self._send(
                    answer, {"error": {"message": f"scripted failure {answer}", "type": "server_error"}}
                )
            else:
                self._send(200, answer)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
