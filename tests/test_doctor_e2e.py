"""`sagemem doctor` against the real Codex, Claude Code and Gemini CLIs: opt-in, since they
come from npm.

Each of SAGEMEM_CODEX_E2E, SAGEMEM_CLAUDE_E2E and SAGEMEM_GEMINI_E2E names a runner script
that starts that CLI headless and offline against a fake model API and reports whether a
text reached the model request (usage: `RUNNER WORKDIR HOOK PROMPT EXPECTED`; exit 0 when
it did, 1 when not), leaving the isolated `home/` and `proj/` in WORKDIR. They honour
CODEX_PREFIX / CC_PREFIX / GEMINI_PREFIX, an npm prefix that already holds the CLI.

In each case a project set up with `sagemem install` is run twice, once as it is and once
with one switch that stops the hooks (Codex: no trust; Claude Code: `disableAllHooks`;
Gemini: `hooksConfig.disabled`), and doctor's verdict is compared with what the CLI did.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CODEWORD = "PELICAN-42"
PROMPT = "what is our rule about deploying to production on Fridays?"
SAGEMEM = [sys.executable, "-m", "sagemem"]
# Read at import: the suite's fixture clears SAGEMEM_* variables before each test.
RUNNERS = {
    name: os.environ.get(name, "")
    for name in ("SAGEMEM_CODEX_E2E", "SAGEMEM_CLAUDE_E2E", "SAGEMEM_GEMINI_E2E")
}


def runner(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not RUNNERS[name], reason=f"set {name} to run this end to end")


def make_project(folder: Path, harness: str) -> Path:
    folder.mkdir(parents=True)
    subprocess.run([*SAGEMEM, "init", "--project"], cwd=folder, check=True, capture_output=True)
    description = f"Deploy freeze rule: no production deploys on Fridays, codename {CODEWORD}"
    subprocess.run(
        [*SAGEMEM, "new", "--type", "project", "--name", "Deploy freeze", "--description", description],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    subprocess.run([*SAGEMEM, "install", harness], cwd=folder, check=True, capture_output=True)
    return folder


def edit(settings: Path, **values: object) -> None:
    settings.write_text(json.dumps({**json.loads(settings.read_text()), **values}, indent=2))


def run(variable: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", RUNNERS[variable], str(workdir), "true", PROMPT, CODEWORD],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


def doctor(workdir: Path, path: list[str] | None = None, **env: str) -> dict:
    """Doctor in the run's project, with the run's home."""
    home = workdir / "home"
    folders = path if path is not None else os.environ["PATH"].split(os.pathsep)
    done = subprocess.run(
        [*SAGEMEM, "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=workdir / "proj",
        env={
            **os.environ,
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "PATH": os.pathsep.join(folders),
            **env,
        },
        timeout=120,
    )
    return json.loads(done.stdout)


def checks(report: dict, area: str, check: str) -> list[tuple[str, str]]:
    return [
        (f["status"], f["message"]) for f in report["findings"] if f["area"] == area and f["check"] == check
    ]


@runner("SAGEMEM_CODEX_E2E")
def test_codex_runs_only_trusted_hooks_and_doctor_says_which(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "codex")
    prefix = Path(os.environ.get("CODEX_PREFIX") or tmp_path / "npm")
    # The project's own .codex/hooks.json, as install wrote it; trusted through Codex's own
    # app-server (as /hooks does), or not at all.
    given = {"CODEX_PROJECT": str(project), "CODEX_SCOPE": "none", "CODEX_PREFIX": str(prefix)}
    skipped = run("SAGEMEM_CODEX_E2E", tmp_path / "none", {**given, "CODEX_HOOK_TRUST": "none"})
    assert skipped.returncode == 1, skipped.stdout + skipped.stderr  # the memory never reached the model
    ran = run("SAGEMEM_CODEX_E2E", tmp_path / "persist", {**given, "CODEX_HOOK_TRUST": "persist"})
    assert ran.returncode == 0 and "found in request" in ran.stdout, ran.stdout + ran.stderr
    without = [p for p in os.environ["PATH"].split(os.pathsep) if p and not shutil.which("codex", path=p)]
    for path in ([str(prefix / "node_modules" / ".bin"), *without], without):  # app-server, then the hash
        for workdir, status in ((tmp_path / "none", "problem"), (tmp_path / "persist", "ok")):
            report = doctor(workdir, path, CODEX_HOME=str(workdir / "home" / ".codex"))
            found = checks(report, "codex", "trust")
            assert [s for s, _ in found] == [status, status], found
            assert all(("Codex 0.171's rules" in m) == (path is without) for _, m in found)
            assert report["ok"] is (status == "ok")


@runner("SAGEMEM_CLAUDE_E2E")
def test_claude_code_with_hooks_disabled_and_doctor_says_so(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    off = tmp_path / "off"
    shutil.copytree(project, off)
    edit(off / ".claude" / "settings.json", disableAllHooks=True)
    given = {"CC_EVENTS": "Stop"}  # the runner's own hook does nothing; sagemem's come from install
    ran = run("SAGEMEM_CLAUDE_E2E", tmp_path / "w-on", {**given, "CC_PROJECT": str(project)})
    assert ran.returncode == 0 and "found in request" in ran.stdout, ran.stdout + ran.stderr
    stopped = run("SAGEMEM_CLAUDE_E2E", tmp_path / "w-off", {**given, "CC_PROJECT": str(off)})
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    for workdir, ok in ((tmp_path / "w-on", True), (tmp_path / "w-off", False)):
        report = doctor(workdir, CLAUDE_CONFIG_DIR=str(workdir / "home" / ".claude"))
        assert report["ok"] is ok and bool(checks(report, "claude-code", "hooks-disabled")) is not ok
        assert checks(report, "claude-code", "hook-run")[0][0] == "ok"
        [(_, memory)] = checks(report, "claude-code", "auto-memory")
        assert (
            str(next((workdir / "home" / ".claude" / "projects").iterdir())) in memory
        )  # the folder it made


@runner("SAGEMEM_GEMINI_E2E")
def test_gemini_trust_and_hooks_config_and_doctor_says_so(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "gemini")
    off = tmp_path / "off"
    shutil.copytree(project, off)
    edit(off / ".gemini" / "settings.json", hooksConfig={"disabled": ["sagemem"]})
    given = {"GEMINI_SCOPE": "none", "GEMINI_EVENTS": "SessionEnd"}
    cases = [("w-on", project, "file", 0, []), ("w-off", off, "file", 1, ["hooks-config"])]
    cases.append(("w-untrusted", project, "none", 2, ["folder-trust"]))  # gemini refuses to run
    for name, source, trust, code, problems in cases:
        done = run(
            "SAGEMEM_GEMINI_E2E",
            tmp_path / name,
            {**given, "GEMINI_PROJECT": str(source), "GEMINI_TRUST": trust},
        )
        assert done.returncode == code, done.stdout + done.stderr
        report = doctor(tmp_path / name)
        found = sorted({f["check"] for f in report["findings"] if f["status"] == "problem"})
        assert found == problems, report
