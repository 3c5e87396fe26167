"""The model a dream run talks to: any OpenAI-compatible chat-completions endpoint with tool
calls (DeepSeek, OpenAI, Ollama, vLLM, LM Studio, a gateway), through the official `openai`
SDK, an optional extra (`pip install 'sagemem[dream]'`), imported only here.

Where the endpoint comes from, first found wins: the command's flags; `SAGEMEM_DREAM_BASE_URL`
and `SAGEMEM_DREAM_MODEL`; `OPENAI_BASE_URL`; the `dream_base_url` and `dream_model` settings.
The key: `SAGEMEM_DREAM_API_KEY`, else the provider's usual variable (`DEEPSEEK_API_KEY` for
a DeepSeek address, else `OPENAI_API_KEY`). A key is never read from a file: settings live in
a state directory that may have come with a cloned repository. For the same reason, a base
URL that only `settings.json` names is used only when it is https to a provider's own address
or on this machine (loopback, sent no key), and a model only settings name goes only with
such a URL: a clone cannot send a person's memories or key elsewhere, nor pick the model a
person's own endpoint bills.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from ..store.config import Settings, dream_environment
from ..store.errors import SagememError
from ..store.records import Record

KNOWN_HOSTS = ("api.openai.com", "api.deepseek.com")
TIMEOUT = 180.0
MAX_CALLS = 32  # tool calls taken from one reply
MAX_ARGUMENT_CHARS = 1024 * 1024


class ModelError(SagememError):
    """The model endpoint is not configured, refused, or failed."""


class Endpoint(Record):
    base_url: str
    model: str
    api_key: str
    source: str  # where the base URL came from: "flag", "environment" or "settings"


class Call(Record):
    id: str
    name: str
    arguments: Any  # JSON text, as the model wrote it (maybe not valid, maybe not even text)


class Reply(Record):
    content: str
    calls: tuple[Call, ...]
    tokens: int
    message: dict[str, Any]  # the assistant message, to send back with the next request


def endpoint(
    settings: Settings,
    *,
    base_url: str | None = None,
    model: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Endpoint:
    """The endpoint to use, or `ModelError` saying what is missing."""
    given = dream_environment(env)
    url, source = _first(
        (base_url, "flag"),
        (given.base_url, "environment"),
        (settings.dream_base_url, "settings"),
    )
    # A model named by settings only goes with a base URL named there too: a clone's settings
    # must not pick what a person's own endpoint is asked for (and billed).
    name, _ = _first(
        (model, "flag"),
        (given.model, "environment"),
        (settings.dream_model if source == "settings" else None, "settings"),
    )
    if not url:
        raise ModelError(
            "no model endpoint: pass --base-url (or set SAGEMEM_DREAM_BASE_URL), e.g. "
            "https://api.deepseek.com or http://127.0.0.1:11434/v1 for Ollama"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ModelError(f"{url!r}: the base URL must be an http(s) address")
    if not name:
        raise ModelError("no model: pass --model (or set SAGEMEM_DREAM_MODEL)")
    host = parsed.hostname.lower()
    deepseek = host == "api.deepseek.com" or host.endswith(".deepseek.com")
    key = given.key or (given.deepseek_key if deepseek else given.openai_key)
    if source == "settings":
        known = host in KNOWN_HOSTS and parsed.scheme == "https"
        if not (known or _loopback(host)):
            raise ModelError(
                f"{url}: this base URL comes from settings.json only, which may have come with a "
                "cloned repository, so sagemem sends it neither memories nor a key unless it is "
                "https to a provider's own address or on this machine; pass --base-url or set "
                "SAGEMEM_DREAM_BASE_URL to use it"
            )
        if not known:
            key = ""  # a server on this machine that a clone named may be the clone's own
    return Endpoint(url.rstrip("/"), name, key, source)


class ChatModel:
    """One endpoint and model, through the `openai` SDK."""

    def __init__(self, where: Endpoint, *, timeout: float = TIMEOUT) -> None:
        try:
            import openai
        except ImportError:
            raise ModelError("dream needs the openai package: pip install 'sagemem[dream]'") from None
        self._openai = openai
        self.endpoint = where
        # Local servers want no key, but the SDK insists on one.
        self._client = openai.OpenAI(
            base_url=where.base_url, api_key=where.api_key or "no-key", timeout=timeout, max_retries=1
        )

    def check(self) -> bool:
        """Whether the endpoint lists the model: `ModelError` if it lists others only (never
        a silent fallback to another model); False when it lists none (not every server
        offers `/models`), so the first request will tell."""
        try:
            listed = [m.id for m in self._client.models.list()]
        except self._openai.NotFoundError:
            return False
        except self._openai.OpenAIError as exc:
            raise ModelError(f"{self.endpoint.base_url}: {_why(exc)}") from None
        if not listed:
            return False
        if self.endpoint.model not in listed:
            shown = ", ".join(listed[:8]) + (" ..." if len(listed) > 8 else "")
            raise ModelError(
                f"{self.endpoint.base_url} does not know the model {self.endpoint.model!r} (it has: {shown})"
            )
        return True

    def chat(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]) -> Reply:
        try:
            response = self._client.chat.completions.create(
                model=self.endpoint.model,
                messages=list(messages),  # type: ignore[arg-type]  # the SDK's TypedDicts, built as plain dicts
                tools=list(tools),  # type: ignore[arg-type]
            )
        except self._openai.OpenAIError as exc:
            raise ModelError(f"{self.endpoint.base_url}: {_why(exc)}") from None
        choices = getattr(response, "choices", None)
        message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        if message is None:
            raise ModelError(f"{self.endpoint.base_url}: the reply is not a chat completion with a message")
        calls = tuple(  # a call without a function is kept, to be refused by name
            Call(str(c.id), getattr(c.function, "name", None) or "", getattr(c.function, "arguments", None))
            for c in (getattr(message, "tool_calls", None) or ())[:MAX_CALLS]
        )
        content = message.content if isinstance(message.content, str) else _text(message.content)
        sent: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            sent["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments if isinstance(c.arguments, str) else "{}",
                    },
                }
                for c in calls
            ]
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "total_tokens", None)
        return Reply(content, calls, max(0, tokens) if isinstance(tokens, int) else 0, sent)


def arguments(call: Call) -> dict[str, Any]:
    """A call's arguments as an object, or `ModelError` (reported to the model as refused)."""
    if not isinstance(call.arguments, (str, type(None))):
        raise ModelError("the arguments must be a JSON object in a string")
    if call.arguments and len(call.arguments) > MAX_ARGUMENT_CHARS:
        raise ModelError(f"the arguments are over {MAX_ARGUMENT_CHARS} characters")
    try:
        found = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        raise ModelError("the arguments are not valid JSON") from None
    if not isinstance(found, dict):
        raise ModelError("the arguments must be a JSON object")
    return found


def _text(content: Any) -> str:
    """A reply's content given as parts, as text."""
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", None) for p in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _first(*candidates: tuple[str | None, str]) -> tuple[str, str]:
    for value, source in candidates:
        if value and value.strip():
            return value.strip(), source
    return "", ""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _why(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    text = " ".join(str(exc).split())[:300]
    return f"HTTP {status}: {text}" if status else text
