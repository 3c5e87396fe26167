"""`diagnose`: each harness's checks in turn, then the memory directory, in one `Report`.

A harness counts as set up here when its settings hold a sagemem hook or MCP entry (or a
settings file that cannot be read); when none is, one finding says so. Search paths with
relative entries, which every child doctor starts goes without, are told first.
"""

from __future__ import annotations

from . import claude, codex, dsh, gemini
from .findings import Finding, Report, info
from .memory_dir import memory_findings
from .places import Places
from .probes import Runs
from .process import search_path_findings


def diagnose(places: Places | None = None) -> Report:
    """Every check, for each harness sagemem is set up in here, then the memory directory."""
    places = places or Places.here()
    runs = Runs(places)
    findings: list[Finding] = search_path_findings(places)
    found_any = False
    for check in (claude.check, codex.check, gemini.check, dsh.check):
        found, results = check(places, runs)
        found_any = found_any or found
        findings += results
    if not found_any:
        findings.append(
            info(
                "sagemem",
                "installed",
                "no harness runs sagemem here: no sagemem hook or MCP entry in the project or user settings"
                " of Claude Code, Codex, Gemini CLI or dsh (`sagemem install <harness>` adds them)",
            )
        )
    return Report(tuple(findings + memory_findings(places)))
