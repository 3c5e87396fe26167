"""`sagemem doctor` against the real Codex CLI: opt-in, since it needs Codex from npm.

Set SAGEMEM_CODEX_E2E to a runner script that starts `codex exec` offline against a fake
model API and reports whether a text reached the model request (its usage: `RUNNER WORKDIR
HOOK PROMPT EXPECTED`; it honours CODEX_PREFIX, CODEX_PROJECT, CODEX_SCOPE and
CODEX_HOOK_TRUST=none|persist, and leaves the isolated `home/` and `proj/` in WORKDIR).
CODEX_PREFIX may name an npm prefix that already holds @openai/codex.

For an untrusted and for a trusted install, doctor's verdict is compared with what Codex did:
skipped the hooks (the memory never reached the model), or ran them (it did).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = os.environ.get("SAGEMEM_CODEX_E2E", "")
CODEWORD = "PELICAN-42"

pytestmark = pytest.mark.skipif(not RUNNER, reason="set SAGEMEM_CODEX_E2E to run Codex end to end")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("codex") / "proj"
    folder.mkdir()
    sagemem = [sys.executable, "-m", "sagemem"]
    subprocess.run([*sagemem, "init", "--project"], cwd=folder, check=True, capture_output=True)
    description = f"Deploy freeze rule: no production deploys on Fridays, codename {CODEWORD}"
    subprocess.run(
        [*sagemem, "new", "--type", "project", "--name", "Deploy freeze", "--description", description],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    subprocess.run([*sagemem, "install", "codex"], cwd=folder, check=True, capture_output=True)
    return folder


def codex_run(workdir: Path, project: Path, trust: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CODEX_PROJECT": str(project),
        "CODEX_SCOPE": "none",  # the project's own .codex/hooks.json, as `sagemem install codex` wrote it
        "CODEX_HOOK_TRUST": trust,
    }
    prompt = "what is our rule about deploying to production on Fridays?"
    return subprocess.run(
        ["bash", RUNNER, str(workdir), "true", prompt, CODEWORD],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def doctor(workdir: Path, *, with_codex: bool) -> dict:
    """Doctor in the run's project, with its home, and `codex` on PATH or not."""
    home = workdir / "home"
    prefix = Path(os.environ.get("CODEX_PREFIX") or workdir / "npm")
    folders = [p for p in os.environ["PATH"].split(os.pathsep) if p and not (Path(p) / "codex").exists()]
    if with_codex:
        folders.insert(0, str(prefix / "node_modules" / ".bin"))
    env = {
        **os.environ,
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": os.pathsep.join(folders),
    }
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=workdir / "proj",
        env=env,
        timeout=120,
    )
    return json.loads(done.stdout)


def trust(report: dict) -> list[tuple[str, str]]:
    return [
        (f["status"], f["message"])
        for f in report["findings"]
        if f["area"] == "codex" and f["check"] == "trust"
    ]


def test_untrusted_hooks_are_skipped_by_codex_and_doctor_says_so(tmp_path: Path, project: Path) -> None:
    run = codex_run(tmp_path / "none", project, "none")
    assert run.returncode == 1, run.stdout + run.stderr  # Codex ran, and the memory did not reach the model
    for with_codex in (True, False):
        report = doctor(tmp_path / "none", with_codex=with_codex)
        found = trust(report)
        assert len(found) == 2 and all(s == "problem" and "not trusted yet" in m for s, m in found), found
        assert report["ok"] is False


def test_trusted_hooks_run_in_codex_and_doctor_agrees(tmp_path: Path, project: Path) -> None:
    run = codex_run(tmp_path / "persist", project, "persist")
    assert run.returncode == 0 and "found in request" in run.stdout, run.stdout + run.stderr
    for with_codex in (True, False):
        report = doctor(tmp_path / "persist", with_codex=with_codex)
        found = trust(report)
        assert len(found) == 2 and all(s == "ok" for s, _ in found), found
        assert all(("Codex 0.171's rules" in m) != with_codex for _, m in found)  # who answered
        runs = [f for f in report["findings"] if f["area"] == "codex" and f["check"] == "hook-run"]
        assert runs and all(f["status"] == "ok" for f in runs)
