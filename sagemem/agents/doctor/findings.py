"""What doctor reports: a `Finding` per check (ok; a problem, with its fix; information; or
unknown, meaning it could not check, with why) and the `Report` that holds them all.

Findings are values, not exceptions: a check that cannot run says so in an unknown finding.
The report fails on a problem only; the unknown ones are counted beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OK, PROBLEM, INFO, UNKNOWN = "ok", "problem", "info", "unknown"


@dataclass(frozen=True)
class Finding:
    """One result. `status` is ok, problem (`fix` then says what to run or edit), info, or
    unknown (could not check; `message` says why)."""

    area: str  # the harness, or "memory"
    check: str
    status: str
    message: str
    fix: str = ""
    where: str = ""  # the file it is about, if one

    def to_dict(self) -> dict[str, str]:
        return {
            "area": self.area,
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix,
            "where": self.where,
        }


def ok(area: str, check: str, message: str, where: object = "") -> Finding:
    return Finding(area, check, OK, message, where=str(where))


def problem(area: str, check: str, message: str, fix: str, where: object = "") -> Finding:
    return Finding(area, check, PROBLEM, message, fix, str(where))


def info(area: str, check: str, message: str, fix: str = "") -> Finding:
    return Finding(area, check, INFO, message, fix)


def unknown(area: str, check: str, message: str, where: object = "", fix: str = "") -> Finding:
    return Finding(area, check, UNKNOWN, message, fix, str(where))


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    @property
    def problems(self) -> int:
        return sum(f.status == PROBLEM for f in self.findings)

    @property
    def unknown(self) -> int:
        return sum(f.status == UNKNOWN for f in self.findings)

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_dict(self) -> dict[str, Any]:
        findings = [f.to_dict() for f in self.findings]
        return {"ok": self.ok, "problems": self.problems, "unknown": self.unknown, "findings": findings}
