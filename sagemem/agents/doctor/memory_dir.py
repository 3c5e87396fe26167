"""The memory directory a hook run here would use: that it exists, and what the health check
(`sagemem check`) finds in it.
"""

from __future__ import annotations

from .findings import Finding, ok, problem, unknown
from .places import Places


def memory_findings(places: Places) -> list[Finding]:
    """The memory directory a hook run here would use: it exists, and its health check."""
    from ...store.config import locate

    location = locate(env=places.env, cwd=places.cwd)
    folder = location.memory_dir
    if not folder.is_dir():
        text = f"no memory here: a hook would use {folder} ({location.rule}), which does not exist"
        fix = "sagemem init --project (this project's memory) or sagemem init (yours, for everywhere)"
        return [problem("memory", "memory", text, fix, folder)]
    from ...memory_store import MemoryStore

    try:
        report = MemoryStore.at(location).check()
    except Exception as exc:  # a check that cannot run is reported, not raised
        return [unknown("memory", "memory", f"{folder}: {type(exc).__name__}: {exc}", folder)]
    files = f"{report.files} memor{'y' if report.files == 1 else 'ies'}"
    if report.ok:
        return [ok("memory", "memory", f"{folder}: {files}, no problems", folder)]
    problems = f"{report.problems} problem{'s' * (report.problems != 1)}"
    text = f"{folder}: {files}, {problems} found by the health check"
    return [
        problem("memory", "memory", text, "sagemem check (sagemem check --fix for the safe repairs)", folder)
    ]
