"""A fake model API on 127.0.0.1 for the real agent CLIs, offline.

`FakeAPI` serves, on a port of its own, each API the CLIs call, and appends every request
(method, path, JSON body; no headers, so no credential) to a JSONL log:

* Anthropic Messages, `POST .../v1/messages` (Claude Code), streamed as SSE when asked;
* OpenAI Responses, `POST .../responses` (Codex), SSE;
* OpenAI Chat Completions, `POST .../chat/completions` (dsh), SSE when asked;
* Gemini, `POST ...:generateContent` and `...:streamGenerateContent` (Gemini CLI).

Everything is answered with a short text, except Claude Code's main loop (a request with
`tools`) when a *script* is given: a list of steps served in turn, each
`{"text": ...}`, `{"tool_use": {"name": ..., "input": {...}}}` (or a list of calls), or
`{"shell": CMD}`, run (in `cwd`) before the next turn is served. A string of a step may hold
`{{re:PATTERN}}`, replaced when served by group 1 of PATTERN in the JSON of the request's last
message (a value from an earlier tool result). After the last step, "(end of script)".
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

END = "(end of script)"
TOOL_ID = re.compile(r"toolu_e2e(\d{3})_")


def _events(events: list[dict], named: bool = True) -> bytes:
    lines = []
    for event in events:
        if named:
            lines.append(f"event: {event['type']}\n")
        lines.append(f"data: {json.dumps(event, ensure_ascii=False)}\n\n")
    return "".join(lines).encode()


def _expand(value: Any, last: str) -> Any:
    if isinstance(value, str):

        def found(match: re.Match[str]) -> str:
            hit = re.search(match.group(1), last, re.S)
            return "" if hit is None else (hit.group(1) if hit.groups() else hit.group(0))

        return re.sub(r"\{\{re:(.+?)\}\}", found, value)
    if isinstance(value, list):
        return [_expand(v, last) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, last) for k, v in value.items()}
    return value


class Script:
    """The turns of a script, and which turn a main-loop request is due."""

    def __init__(self, steps: list[dict], cwd: Path) -> None:
        self.turns: list[dict] = []
        self.cwd = cwd
        self.shell_log: list[dict] = []
        before: list[str] = []
        for step in steps:
            if "shell" in step:
                before.append(step["shell"])
                continue
            calls = step.get("tool_use") or []
            self.turns.append(
                {
                    "before": before,
                    "text": step.get("text"),
                    "calls": [calls] if isinstance(calls, dict) else calls,
                }
            )
            before = []
        self._ran: set[int] = set()
        self._lock = threading.Lock()
        self.served = -1

    def index(self, body: dict) -> int:
        """The number of this run's turns already in the conversation: from the ids of the
        tool calls it made, plus one after a turn with only text."""
        highest = -1
        for message in body.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") != "assistant":
                continue
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    hit = TOOL_ID.match(str(block.get("id", "")))
                    if hit:
                        highest = max(highest, int(hit.group(1)))
        return highest + 1

    def turn(self, body: dict) -> tuple[list[dict], str]:
        k = self.index(body)
        messages = body.get("messages") or []
        last = json.dumps(messages[-1], ensure_ascii=False) if messages else ""
        with self._lock:
            if k not in self._ran and k < len(self.turns):
                self._ran.add(k)
                for command in self.turns[k]["before"]:
                    cmd = _expand(command, last)
                    done = subprocess.run(
                        ["bash", "-c", cmd], cwd=self.cwd, capture_output=True, text=True, timeout=60
                    )
                    self.shell_log.append(
                        {"cmd": cmd, "rc": done.returncode, "out": done.stdout + done.stderr}
                    )
            self.served = max(self.served, k)
        if k >= len(self.turns):
            return [{"type": "text", "text": END}], "end_turn"
        turn = self.turns[k]
        blocks: list[dict] = []
        if turn["text"] is not None:
            blocks.append({"type": "text", "text": _expand(turn["text"], last)})
        for j, call in enumerate(turn["calls"]):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_e2e{k:03d}_{j}_{uuid.uuid4().hex[:8]}",
                    "name": call["name"],
                    "input": _expand(call.get("input") or {}, last),
                }
            )
        return blocks, "tool_use" if turn["calls"] else "end_turn"

    @property
    def done(self) -> bool:
        return self.served >= len(self.turns) - 1


class FakeAPI:
    """`with FakeAPI(log) as api:` ... `api.url`; `script` for Claude Code's main loop."""

    def __init__(
        self,
        log: Path,
        script: list[dict] | None = None,
        cwd: Path | None = None,
        text: str = "ok",
        models: tuple[str, ...] = (),
    ):
        self.log = log
        self.text = text
        self.models = [{"id": name, "object": "model"} for name in models]
        self.script = None if script is None else Script(script, cwd or log.parent)
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                api.answer(self)

            def do_GET(self) -> None:
                api.answer(self)

            do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    def __enter__(self) -> FakeAPI:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the exchange ---------------------------------------------------------------------

    def _body(self, h: BaseHTTPRequestHandler) -> Any:
        size = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(size) if size > 0 else b""
        if (h.headers.get("Content-Encoding") or "").lower() in ("gzip", "x-gzip"):
            raw = gzip.decompress(raw)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _send(self, h: BaseHTTPRequestHandler, code: int, kind: str, data: bytes) -> None:
        h.send_response(code)
        h.send_header("Content-Type", kind)
        h.send_header("Content-Length", str(len(data)))
        h.send_header("request-id", "req_e2e_" + uuid.uuid4().hex[:12])
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    def _json(self, h: BaseHTTPRequestHandler, value: Any, code: int = 200) -> None:
        self._send(h, code, "application/json", json.dumps(value).encode())

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        body = self._body(h) if h.command in ("POST", "PUT", "PATCH") else None
        record = {"t": time.time(), "method": h.command, "path": h.path, "body": body}
        with self._lock, self.log.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        path = h.path.split("?", 1)[0]
        body = body if isinstance(body, dict) else {}
        if h.command != "POST":
            if path.endswith("/models"):
                return self._json(h, {"object": "list", "data": self.models, "has_more": False})
            return self._json(h, {})
        if path.endswith("/v1/messages"):
            return self.messages(h, body)
        if path.endswith("/count_tokens"):
            return self._json(h, {"input_tokens": 10})
        if path.endswith("/responses"):
            return self.responses(h, body)
        if path.endswith("/chat/completions"):
            return self.chat(h, body)
        if path.endswith(":streamGenerateContent"):
            return self.gemini(h, body, stream=True)
        if path.endswith(":generateContent"):
            return self.gemini(h, body, stream=False)
        if path.endswith(":countTokens"):
            return self._json(h, {"totalTokens": 10})
        return self._json(h, {})

    # -- Anthropic Messages ---------------------------------------------------------------

    def messages(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        if self.script is not None and body.get("tools"):
            blocks, stop = self.script.turn(body)
        else:
            blocks, stop = [{"type": "text", "text": self.text}], "end_turn"
        model, mid = body.get("model") or "claude-e2e", "msg_e2e_" + uuid.uuid4().hex[:16]
        usage = {
            "input_tokens": 10,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {"id": mid, "type": "message", "role": "assistant", "model": model, "stop_sequence": None}
        if not body.get("stream"):
            return self._json(h, {**message, "content": blocks, "stop_reason": stop, "usage": usage})
        events = [
            {
                "type": "message_start",
                "message": {**message, "content": [], "stop_reason": None, "usage": usage},
            }
        ]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                delta = {
                    "type": "input_json_delta",
                    "partial_json": json.dumps(block["input"], ensure_ascii=False),
                }
            events += [
                {"type": "content_block_start", "index": i, "content_block": start},
                {"type": "content_block_delta", "index": i, "delta": delta},
                {"type": "content_block_stop", "index": i},
            ]
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
            {"type": "message_stop"},
        ]
        self._send(h, 200, "text/event-stream", _events(events))

    # -- OpenAI Responses and Chat Completions --------------------------------------------

    def responses(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        rid, mid = "resp_e2e_" + uuid.uuid4().hex[:16], "msg_e2e_" + uuid.uuid4().hex[:16]
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 11,
        }
        part = {"type": "output_text", "text": self.text, "annotations": []}
        item = {"type": "message", "role": "assistant", "id": mid, "status": "completed", "content": [part]}
        done = {
            "id": rid,
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model") or "e2e",
            "status": "completed",
            "output": [item],
            "usage": usage,
        }
        if not body.get("stream"):
            return self._json(h, done)
        started = {**done, "status": "in_progress", "output": []}
        at = {"item_id": mid, "output_index": 0, "content_index": 0}
        events = [
            {"type": "response.created", "response": started},
            {"type": "response.in_progress", "response": started},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {**at, "type": "response.content_part.added", "part": {**part, "text": ""}},
            {**at, "type": "response.output_text.delta", "delta": self.text},
            {**at, "type": "response.output_text.done", "text": self.text},
            {**at, "type": "response.content_part.done", "part": part},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": done},
        ]
        self._send(h, 200, "text/event-stream", _events(events))

    def chat(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        head = {
            "id": "chatcmpl-e2e" + uuid.uuid4().hex[:12],
            "created": int(time.time()),
            "model": body.get("model") or "e2e",
        }
        usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
        if not body.get("stream"):
            choice = {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": self.text},
            }
            return self._json(h, {**head, "object": "chat.completion", "choices": [choice], "usage": usage})
        head["object"] = "chat.completion.chunk"
        chunks = [
            {
                **head,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": self.text}, "finish_reason": None}
                ],
            },
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage},
        ]
        self._send(h, 200, "text/event-stream", _events(chunks, named=False) + b"data: [DONE]\n\n")

    # -- Gemini ---------------------------------------------------------------------------

    def gemini(self, h: BaseHTTPRequestHandler, body: dict, stream: bool) -> None:
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        # The CLI's own JSON-mode calls (its model router): a value of their schema, or it retries.
        wanted = config.get("responseMimeType") == "application/json" and schema
        text = json.dumps(fitting(schema)) if wanted else self.text
        answer = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
            "modelVersion": "gemini-e2e",
        }
        if not stream:
            return self._json(h, answer)
        self._send(h, 200, "text/event-stream", f"data: {json.dumps(answer)}\n\n".encode())


def fitting(schema: Any) -> Any:
    """A small value of a JSON (or Gemini) schema: its first enum value, every property."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {k: fitting(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [fitting(schema.get("items"))] if schema.get("minItems") else []
    return {"string": "ok", "integer": 0, "number": 0, "boolean": False}.get(kind)


def requests(log: Path, path: str = "") -> list[dict]:
    """The bodies of the POST requests in a log whose URL path matches `path`, in order."""
    found = []
    if not log.exists():
        return found
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["method"] == "POST" and re.search(path, record["path"].split("?", 1)[0]):
            found.append(record["body"])
    return found
