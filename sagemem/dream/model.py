"""The model a dream run talks to: any OpenAI-compatible chat-completions endpoint with tool
calls (DeepSeek, OpenAI, Ollama, vLLM, LM Studio, a gateway), through the official `openai`
SDK, an optional extra (`pip install 'sagemem[dream]'`), imported only here.

Where the endpoint comes from, first found wins: the command's flags; `SAGEMEM_DREAM_BASE_URL`
and `SAGEMEM_DREAM_MODEL`; `OPENAI_BASE_URL`; the `dream_base_url` and `dream_model` settings.
The key: `SAGEMEM_DREAM_API_KEY`, else the provider's usual variable (`DEEPSEEK_API_KEY` for
a DeepSeek address, else `OPENAI_API_KEY`). A key is never read from a file: settings live in
a state directory that may have come with a cloned repository. For the same reason, a base
URL that only `settings.json` names is used only when it is on this machine (loopback) or a
provider's own address: a clone cannot send a person's memories, or key, elsewhere.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlparse

from ..config import Settings
from ..errors import SagememError

KNOWN_HOSTS = ("api.openai.com", "api.deepseek.com")
TIMEOUT = 180.0


class ModelError(SagememError):
    """The model endpoint is not configured, refused, or failed."""


class Endpoint(NamedTuple):
    base_url: str
    model: str
    api_key: str
    source: str  # where the base URL came from: "flag", "environment" or "settings"


class Call(NamedTuple):
    id: str
    name: str
    arguments: str  # JSON, as the model wrote it (maybe not valid)


class Reply(NamedTuple):
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
    env = os.environ if env is None else env
    url, source = _first(
        (base_url, "flag"),
        (env.get("SAGEMEM_DREAM_BASE_URL"), "environment"),
        (env.get("OPENAI_BASE_URL"), "environment"),
        (settings.dream_base_url, "settings"),
    )
    name, _ = _first(
        (model, "flag"), (env.get("SAGEMEM_DREAM_MODEL"), "environment"), (settings.dream_model, "settings")
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
    usual = "DEEPSEEK_API_KEY" if "deepseek" in host else "OPENAI_API_KEY"
    key = env.get("SAGEMEM_DREAM_API_KEY") or env.get(usual) or ""
    if source == "settings" and not (_loopback(host) or host in KNOWN_HOSTS):
        raise ModelError(
            f"{url}: this base URL comes from settings.json only, which may have come with a "
            "cloned repository, so sagemem sends it neither memories nor a key; pass --base-url "
            "or set SAGEMEM_DREAM_BASE_URL to use it"
        )
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
                messages=list(messages),
                tools=list(tools),  # type: ignore[arg-type]
            )
        except self._openai.OpenAIError as exc:
            raise ModelError(f"{self.endpoint.base_url}: {_why(exc)}") from None
        if not response.choices:
            raise ModelError(f"{self.endpoint.base_url}: the reply has no choices")
        message = response.choices[0].message
        calls = tuple(
            Call(c.id, c.function.name, c.function.arguments or "")
            for c in (message.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        sent: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            sent["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
        tokens = response.usage.total_tokens if response.usage else 0
        return Reply(message.content or "", calls, tokens, sent)


def arguments(call: Call) -> dict[str, Any]:
    """A call's arguments as an object, or `ModelError` (reported to the model as refused)."""
    try:
        found = json.loads(call.arguments or "{}")
    except ValueError:
        raise ModelError("the arguments are not valid JSON") from None
    if not isinstance(found, dict):
        raise ModelError("the arguments must be a JSON object")
    return found


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
