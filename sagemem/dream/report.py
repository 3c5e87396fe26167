"""The report of a dream run a person reads: `<memory dir>/dream/<run id>.md`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..memory_store import MemoryStore
from ..store.files import safe_folder, write_atomic
from . import record


def path(store: MemoryStore, run_id: str) -> Path:
    """Where the report of `run_id` goes: `<memory dir>/dream/<id>.md`, a subfolder never read
    as memories; for a harness's own folder (where sagemem writes nothing but memories), the
    run's folder in the state dir."""
    if store.lock_dir is not None:
        return record.folder(store.state_dir, run_id, create=True) / "report.md"
    # The memory directory itself may be reached through a link of the person's own; `dream/`
    # in it may not (a clone could point it anywhere).
    return safe_folder(store.memory_dir / "dream") / f"{record.check_id(run_id)}.md"


def write(store: MemoryStore, manifest: dict[str, Any]) -> Path:
    """Write (or rewrite) the run's report; returns its path."""
    place = path(store, manifest["id"])
    write_atomic(place, text(manifest).encode("utf-8", "replace"))
    return place


def text(m: dict[str, Any]) -> str:
    undone = record.rolled_back(m)
    lines = [
        f"# Dream run {m['id']}",
        "",
        f"- mode: {m['mode']}" + (f" (proposals of run {m['source']})" if m.get("source") else ""),
        f"- model: {m.get('model') or '-'} at {m.get('base_url') or '-'}"
        + ("" if m.get("model_checked", True) else " (the endpoint lists no models: not checked)"),
        f"- status: {m['status']}"
        + (f": {m['stop']}" if m.get("stop") else "")
        + (f"; rolled back {undone['at']}" if undone else ""),
        f"- rounds: {m.get('rounds', 0)}, tokens: {m.get('tokens', 0)}",
        f"- started {m.get('started', '?')}, finished {m.get('finished') or '-'}",
        f"- snapshot before the first change: {m.get('snapshot') or '-'}",
    ]
    if m.get("summary"):
        lines += ["", "## What the model says", "", str(m["summary"]).strip()]
    if m.get("report_error"):
        lines += ["", f"(An earlier report could not be written: {m['report_error']})"]
    changes = m.get("changes", [])
    lines += ["", f"## Changes ({len(changes)})", ""]
    if changes:
        lines += ["| # | file | op | reason | bytes before → after |", "|---|---|---|---|---|"]
        for c in changes:
            reason = c["reason"] or "**no reason given**"
            size = f"{_bytes(c['before'])} → {_bytes(c['after'])}"
            lines.append(f"| {c['seq']} | `{c['file']}` | {c['op']} | {_cell(reason)} | {size} |")
        if undone:
            lines += ["", f"Rolled back {undone['at']} (parts {undone['scope']}): see below."]
        else:
            lines += [
                "",
                f"Undo: `sagemem dream rollback {m['id']}` (only these files; `--parts all`: the whole"
                " directory as before the run).",
            ]
    else:
        lines.append("None.")
    proposals = m.get("proposals", [])
    if m["mode"] == "report":
        lines += ["", f"## Proposals ({len(proposals)})", ""]
        for i, p in enumerate(proposals, 1):
            lines.append(f"{i}. {p['op']} `{p['file']}`: {p['reason'] or '**no reason given**'}")
            if p["op"] == "write":
                fence = "`" * max(3, _longest_ticks(p["content"]) + 1)
                body = ("   " + line for line in p["content"].splitlines())
                lines += ["", f"   {fence}markdown", *body, f"   {fence}", ""]
        if proposals:
            lines += ["", f"Apply them, after review: `sagemem dream apply {m['id']}`."]
        else:
            lines.append("None: the model found nothing to change.")
    refused = m.get("refused", [])
    if refused:
        lines += ["", f"## Refused calls ({len(refused)})", ""]
        lines += [f"- {r['tool']} {_args(r['args'])}: {r['why']}" for r in refused]
    for key, title in (("audit_before", "Health before"), ("audit_after", "Health after")):
        if m.get(key) is not None:
            lines += ["", f"## {title}", "", _audit(m[key])]
    for rollback in m.get("rollbacks", []):
        lines += ["", f"## Rolled back {rollback['at']} (parts {rollback['scope']})", ""]
        for key in ("restored", "archived", "conflicts", "retired", "kept"):
            if rollback.get(key):
                lines.append(f"- {key}: {', '.join(rollback[key])}")
    return "\n".join(lines) + "\n"


def _longest_ticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _bytes(stamp: dict[str, Any] | None) -> str:
    return "-" if stamp is None else str(stamp["bytes"])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v['cut'] + '…' if isinstance(v, dict) else v}" for k, v in args.items())[:300]


def _audit(audit: dict[str, Any]) -> str:
    if not audit.get("findings"):
        return f"No findings in {audit.get('files', 0)} files."
    counts: dict[str, int] = {}
    for f in audit["findings"]:
        counts[f["check"]] = counts.get(f["check"], 0) + 1
    listed = ", ".join(f"{check} {n}" for check, n in sorted(counts.items()))
    return f"{audit['problems']} problem(s) in {audit['files']} files: {listed}."
