"""The MCP server's standard input, one JSON-RPC line at a time, so that every request is
answered.

Two kinds of line are mended here before the protocol layer reads them:

* A line longer than `MAX_LINE_BYTES` is not held in memory: it is skipped to its end and
  replaced by a request for a method no server has, named with the reason, under the same
  id, so the client gets an error naming the cause at once. The id is looked for where
  clients put it: at the start (`{"jsonrpc":"2.0","id":…`) or at the end (the TypeScript
  SDK writes `{…request, "jsonrpc":"2.0", "id":…}`); a line with neither is dropped.
* A string holding a lone UTF-16 surrogate (`"\\ud800"`, valid JSON syntax, not text) has
  each one replaced by U+FFFD, as bytes that are not UTF-8 are.
"""

from __future__ import annotations

import io
import json
import os
import re
from typing import Any

MAX_LINE_BYTES = 8 * 1024 * 1024  # a 512 KiB memory sent as \uXXXX escapes is under 2 MiB
_CHUNK = 64 * 1024
_EDGE = 4096  # how much of an over-long line's start and end is kept to find its id in
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_ID = rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_SHORT = rb'"(?:jsonrpc|method)"\s*:\s*"(?:[^"\\]|\\.){0,200}"'  # what may come before or after the id
_LEADING_ID = re.compile(rb"\A\s*\{(?:\s*" + _SHORT + rb"\s*,)*\s*\"id\"\s*:\s*" + _ID)
_TRAILING_ID = re.compile(rb",\s*\"id\"\s*:\s*" + _ID + rb"(?:\s*,\s*" + _SHORT + rb")*\s*\}\s*\Z")


class Requests(io.RawIOBase):
    """File descriptor `fd` read as lines, each mended as the module docstring says."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.pending = bytearray()  # mended lines not yet read
        self.pieces: list[bytes] = []  # the line being read, in the chunks it came in
        self.size = 0
        self.skipping = False  # an over-long line is being read to its end
        self.head = b""  # its start
        self.tail = b""  # and the last bytes seen of it
        self.eof = False  # the input has ended
        self.ended = False  # and the end has been handed on

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending and not self.ended:
            if self.eof:
                self.ended = True
            else:
                self._fill()
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        del self.pending[:size]
        return size

    def _fill(self) -> None:
        chunk = os.read(self.fd, _CHUNK)
        if not chunk:
            if self.size or self.skipping:
                self._end_line(newline=False)
            self.eof = True
            return
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._take(chunk[start:end])
            self._end_line(newline=True)
            start = end + 1
        self._take(chunk[start:])

    def _take(self, piece: bytes) -> None:
        if self.skipping:
            self.tail = (self.tail + piece)[-_EDGE:]
            return
        self.pieces.append(piece)
        self.size += len(piece)
        if self.size > MAX_LINE_BYTES:  # too long to hold: keep only its edges
            line = b"".join(self.pieces)
            self.head, self.tail = line[:_EDGE], line[-_EDGE:]
            self.pieces, self.size, self.skipping = [], 0, True

    def _end_line(self, *, newline: bool) -> None:
        if self.skipping:
            line = refusal(request_id(self.head, self.tail))
            self.head = self.tail = b""
            self.skipping = False
        else:
            line = mend(b"".join(self.pieces)) + (b"\n" if newline else b"")
            self.pieces, self.size = [], 0
        self.pending += line


def request_id(head: bytes, tail: bytes) -> bytes:
    """The JSON text of a request's id, found in its first or last bytes; b"" for none."""
    found = _LEADING_ID.match(head) or _TRAILING_ID.search(tail.rstrip(b"\r"))
    return found.group(1) if found else b""


def refusal(request_id: bytes) -> bytes:
    """A line the server answers with an error naming why, under `request_id`; nothing for a
    line without an id to answer under (a notification, or an id in its middle)."""
    if not request_id:
        return b""
    method = f"sagemem: a request over {MAX_LINE_BYTES // (1024 * 1024)} MiB is not read"
    return b'{"jsonrpc":"2.0","id":' + request_id + b',"method":' + json.dumps(method).encode() + b"}\n"


def mend(line: bytes) -> bytes:
    """`line` with every lone surrogate in its strings made U+FFFD."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line  # answered as the line it is (a parse error)
    mended = _without_surrogates(message)
    return line if mended == message else json.dumps(mended).encode("ascii")


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value)
    if isinstance(value, list):
        return [_without_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value
