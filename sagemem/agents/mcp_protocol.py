"""The Model Context Protocol's stdio server side, as much of it as sagemem's tools need.

MCP over stdio is JSON-RPC 2.0, one message a line. A memory server needs five methods of it:
`initialize`, `ping`, `tools/list`, `tools/call`, and the notifications it may ignore. The
official SDK brings those and much more (HTTP transports, pydantic models, anyio), and costs
about a second to import, so a harness's first request came before the server had answered
`initialize` and the model's first memory call failed. This layer answers in the time an
interpreter takes to start, needs no package beyond the standard library, and is tested
against the SDK's own client (tests/test_mcp.py). See docs/decisions.md.

A tool is a plain function registered with `Server.tool`; its parameters, with their
`Annotated[..., Field(description=...)]` notes, become the tool's JSON Schema, and the
arguments of a call are checked against it before the function runs.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# The revisions this server speaks, newest first: a client asking for one of them gets it.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


class ToolError(Exception):
    """A tool's refusal: its message goes back to the model as the call's error result."""


@dataclass(frozen=True)
class Field:
    """What a tool's parameter means, for the model: `Annotated[str, Field(description=...)]`."""

    description: str


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    function: Callable[..., Any]
    schema: dict[str, Any]
    params: tuple[tuple[str, Any, bool], ...]  # (name, type, required)


class Server:
    """Tools by name, and the answer to each JSON-RPC message."""

    def __init__(self, name: str, *, version: str = "", instructions: str = "") -> None:
        self.name, self.version, self.instructions = name, version, instructions
        self.tools: dict[str, Tool] = {}

    def tool(self, *, description: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as a tool named after it."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            schema, params = _schema(function)
            self.tools[function.__name__] = Tool(function.__name__, description, function, schema, params)
            return function

        return register

    def answer(self, line: bytes | str) -> dict[str, Any] | None:
        """The reply to one line of input; None for a notification (or a reply of the
        client's), which gets none."""
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return _error(None, PARSE_ERROR, "the line is not JSON")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        if "method" not in message:
            return None  # an answer to a request of ours: there are none
        ident, method = message.get("id"), message["method"]
        if ident is None:
            return None  # a notification: initialized, cancelled, progress
        if not isinstance(ident, (str, int)) or isinstance(ident, bool):
            return _error(None, INVALID_REQUEST, "the id must be a string or a number")
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if method == "initialize":
            return _result(ident, self._initialize(params))
        if method == "ping":
            return _result(ident, {})
        if method == "tools/list":
            return _result(ident, {"tools": [_listed(tool) for tool in self.tools.values()]})
        if method == "tools/call":
            name = params.get("name")
            tool = self.tools.get(name) if isinstance(name, str) else None
            if tool is None:
                return _error(ident, INVALID_PARAMS, f"no tool named {name!r}")
            arguments = params.get("arguments")
            return _result(ident, _call(tool, arguments if isinstance(arguments, dict) else {}))
        return _error(ident, METHOD_NOT_FOUND, f"Method not found: {str(method)[:200]}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        answer: dict[str, Any] = {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "version": self.version},
        }
        if self.instructions:
            answer["instructions"] = self.instructions
        return answer


def serve(server: Server, lines: Iterable[bytes], write: Callable[[bytes], None]) -> None:
    """Answer each line in turn, each answer written as one line, until the input ends."""
    for line in lines:
        if not line.strip():
            continue
        reply = server.answer(line)
        if reply is not None:
            write(json.dumps(reply, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")


# --- calls ---------------------------------------------------------------------------------


def _call(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's result: its JSON as text and as structured content, or its error."""
    wrong = _check(tool, arguments)
    if wrong:
        return _failed(f"{tool.name}: {wrong}")
    given = {name: arguments[name] for name, _, _ in tool.params if name in arguments}
    try:
        result = tool.function(**given)
    except ToolError as exc:
        return _failed(str(exc))
    except Exception as exc:  # noqa: BLE001 - the model is told, the server goes on
        return _failed(f"{tool.name} failed: {type(exc).__name__}: {exc}")
    if isinstance(result, list):
        content = [_text(item) for item in result]
        return {"content": content, "structuredContent": {"result": result}, "isError": False}
    return {"content": [_text(result)], "structuredContent": result, "isError": False}


def _text(value: Any) -> dict[str, str]:
    return {"type": "text", "text": json.dumps(value, ensure_ascii=False, indent=2)}


def _failed(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _check(tool: Tool, arguments: dict[str, Any]) -> str:
    """What is wrong with the arguments of a call, "" when nothing."""
    for name, kind, required in tool.params:
        if name not in arguments:
            if required:
                return f"the argument {name!r} is required"
            continue
        if not _fits(arguments[name], kind):
            return f"the argument {name!r} must be {_says(kind)}"
    return ""


def _fits(value: Any, kind: Any) -> bool:
    options = _options(kind)
    if len(options) > 1:
        return any(_fits(value, option) for option in options)
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    return True


def _says(kind: Any) -> str:
    options = _options(kind)
    if len(options) > 1:
        return " or ".join(_says(option) for option in options)
    if typing.get_origin(kind) is list:
        return f"a list of {_says(typing.get_args(kind)[0])}s"
    return {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}.get(
        kind, "null" if kind is type(None) else str(kind)
    )


# --- schemas -------------------------------------------------------------------------------


def _schema(function: Callable[..., Any]) -> tuple[dict[str, Any], tuple[tuple[str, Any, bool], ...]]:
    """The JSON Schema of a tool's arguments, from its signature, and its parameters."""
    hints = typing.get_type_hints(function, include_extras=True)
    properties: dict[str, Any] = {}
    required, params = [], []
    for name, parameter in inspect.signature(function).parameters.items():
        kind = hints[name]
        notes: tuple[Any, ...] = ()
        if typing.get_origin(kind) is typing.Annotated:
            kind, *extra = typing.get_args(kind)
            notes = tuple(extra)
        schema = _type_schema(kind)
        for note in notes:
            if isinstance(note, Field):
                schema["description"] = note.description
        has_default = parameter.default is not inspect.Parameter.empty
        if has_default:
            schema["default"] = parameter.default
        else:
            required.append(name)
        properties[name] = schema
        params.append((name, kind, not has_default))
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema, tuple(params)


def _type_schema(kind: Any) -> dict[str, Any]:
    options = _options(kind)
    if len(options) > 1:
        return {"anyOf": [_type_schema(option) for option in options]}
    if typing.get_origin(kind) is list:
        return {"type": "array", "items": _type_schema(typing.get_args(kind)[0])}
    names = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if kind in names:
        return {"type": names[kind]}
    raise TypeError(f"no JSON Schema for {kind!r}")


def _options(kind: Any) -> tuple[Any, ...]:
    """The alternatives of a union (`str | None`), else the type alone."""
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        return typing.get_args(kind)
    return (kind,)


def _listed(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "inputSchema": tool.schema}


def _result(ident: str | int, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _error(ident: str | int | None, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
