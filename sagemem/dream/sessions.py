"""`search_sessions`: what was said in past sessions, from the harnesses' own transcripts.

Opt-in (`sagemem dream --sessions`), since it sends conversation text to the model. Claude
Code keeps one JSONL file per session in `~/.claude/projects/<project>/` (lines of `type`
user or assistant, with `message.content`); Codex keeps `~/.codex/sessions/YYYY/MM/DD/
rollout-*.jsonl` (a `session_meta` line with the `cwd`, then `response_item` messages).
Only the person's and the model's own words are searched: not tool output, not developer
messages (which hold injected context, sagemem's own among it). The newest transcripts of
the project are read, each up to a size cap, links refused.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

NEWEST = 40  # transcripts searched, newest first
MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_RESULT_CHARS = 8000
MAX_CODEX_LISTED = 400  # Codex rollouts looked at to find this project's


def transcripts(home: Path, project: Path | None, claude_folder: Path | None) -> list[Path]:
    """The newest transcripts of `project` (every project's when None), newest first."""
    found: list[tuple[float, Path]] = []
    folders = [claude_folder] if claude_folder else _subfolders(home / ".claude" / "projects")
    for folder in folders:
        found += _jsonl(folder)
    rollouts = sorted(_rollouts(home / ".codex" / "sessions"), reverse=True)[:MAX_CODEX_LISTED]
    found += [
        (mtime, path) for mtime, path in rollouts if project is None or _codex_cwd(path) == str(project)
    ]
    return [path for _, path in sorted(found, reverse=True)[:NEWEST]]


def search(paths: list[Path], query: str) -> str:
    """Passages of the transcripts holding every word of `query`, newest first."""
    words = [w for w in re.findall(r"\w+", query.lower()) if len(w) > 1]
    if not words:
        return "give at least one word of two or more characters"
    out: list[str] = []
    size = 0
    for path in paths:
        for when, role, text in _messages(path):
            lower = text.lower()
            if all(w in lower for w in words):
                at = max(0, lower.find(words[0]) - 150)
                passage = " ".join(text[at : at + 400].split())
                line = f"[{path.name} {when} {role}] {passage}"
                if size + len(line) > MAX_RESULT_CHARS:
                    return "\n".join(out + ["(more found; ask a narrower question)"])
                out.append(line)
                size += len(line) + 1
    return "\n".join(out) if out else "nothing found"


def _messages(path: Path) -> Iterator[tuple[str, str, str]]:
    """(timestamp, role, text) of the person's and the model's messages."""
    for line in _lines(path):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        when = str(item.get("timestamp", ""))[:19]
        if item.get("type") in ("user", "assistant") and isinstance(item.get("message"), dict):
            role, content = str(item["type"]), item["message"].get("content")
        elif item.get("type") == "response_item" and isinstance(item.get("payload"), dict):
            payload = item["payload"]
            if payload.get("type") != "message" or payload.get("role") not in ("user", "assistant"):
                continue
            role, content = str(payload["role"]), payload.get("content")
        else:
            continue
        text = _text(content)
        if text and not text.startswith("<environment_context>"):
            yield when, role, text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _lines(path: Path) -> Iterator[str]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return
        read = 0
        # A line is read up to MAX_LINE_BYTES at a time: one huge line is never held whole (a
        # cut line is no JSON, and is skipped).
        while read <= MAX_TRANSCRIPT_BYTES and (raw := handle.readline(MAX_LINE_BYTES)):
            read += len(raw)
            yield raw.decode("utf-8", "replace")


def _codex_cwd(path: Path) -> str | None:
    for line in _lines(path):
        try:
            first = json.loads(line)
        except ValueError:
            return None
        payload = first.get("payload") if isinstance(first, dict) else None
        return str(payload.get("cwd")) if isinstance(payload, dict) and payload.get("cwd") else None
    return None


def _subfolders(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _jsonl(folder: Path) -> list[tuple[float, Path]]:
    try:
        with os.scandir(folder) as entries:
            return [
                (e.stat(follow_symlinks=False).st_mtime, Path(e.path))
                for e in entries
                if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False)
            ]
    except OSError:
        return []


def _rollouts(root: Path) -> Iterator[tuple[float, Path]]:
    for folder, subfolders, files in os.walk(root):  # os.walk follows no links by default
        subfolders[:] = [d for d in subfolders if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            if name.startswith("rollout-") and name.endswith(".jsonl"):
                path = Path(folder) / name
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    yield info.st_mtime, path
