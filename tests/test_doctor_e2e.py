"""`sagemem doctor` against the real Codex, Claude Code and Gemini CLIs: opt-in, since they
come from npm (`SAGEMEM_E2E=1`, docs/e2e.md; the rig is tests/e2e).

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

from tests.e2e.rigs import CODEX, Rig, Run, e2e

CODEWORD = "PELICAN-42"
PROMPT = "what is our rule about deploying to production on Fridays?"
SAGEMEM = [sys.executable, "-m", "sagemem"]


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


def reached(run: Run) -> bool:
    """Whether the memory's codeword reached a model request of the run."""
    return run.log.exists() and CODEWORD in run.log.read_text(encoding="utf-8")


def doctor(project: Path, home: Path, path: list[str] | None = None, **env: str) -> dict:
    """Doctor in the run's project, with the run's home."""
    # This sagemem first on PATH, as the rig puts it for the CLI: the hooks' portable line finds it.
    folders = (
        path
        if path is not None
        else [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]
    )
    done = subprocess.run(
        [*SAGEMEM, "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=project,
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


@e2e
def test_codex_runs_only_trusted_hooks_and_doctor_says_which(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "codex")
    # The project's own .codex/hooks.json, as install wrote it; trusted through Codex's own
    # app-server (as /hooks does), or not at all; each run with a CODEX_HOME of its own.
    none, review = Rig(tmp_path / "none"), Rig(tmp_path / "review")
    skipped = none.codex(project, PROMPT, trust="none")
    assert skipped.returncode == 0 and not reached(skipped), skipped.explain()  # never reached the model
    ran = review.codex(project, PROMPT, trust="review")
    assert ran.returncode == 0 and reached(ran), ran.explain()
    binary = CODEX.binary()
    here = [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]  # this sagemem first
    without = [p for p in here if p and not shutil.which("codex", path=p)]
    for path in ([str(binary.parent), *without], without):  # app-server, then the hash
        for rig, status in ((none, "problem"), (review, "ok")):
            report = doctor(project, rig.home, path, CODEX_HOME=str(rig.home / ".codex"))
            found = checks(report, "codex", "trust")
            assert [s for s, _ in found] == [status, status], found
            assert all(("Codex 0.171's rules" in m) == (path is without) for _, m in found)
            assert report["ok"] is (status == "ok")


@e2e
def test_claude_code_with_hooks_disabled_and_doctor_says_so(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "claude-code")
    off = tmp_path / "off"
    shutil.copytree(project, off)
    edit(off / ".claude" / "settings.json", disableAllHooks=True)
    on_rig, off_rig = Rig(tmp_path / "w-on"), Rig(tmp_path / "w-off")
    ran = on_rig.claude(project, PROMPT).check()
    assert reached(ran), ran.explain()
    stopped = off_rig.claude(off, PROMPT).check()
    assert not reached(stopped), stopped.explain()
    for rig, folder, ok in ((on_rig, project, True), (off_rig, off, False)):
        report = doctor(folder, rig.home, CLAUDE_CONFIG_DIR=str(rig.home / ".claude"))
        assert report["ok"] is ok and bool(checks(report, "claude-code", "hooks-disabled")) is not ok
        assert checks(report, "claude-code", "hook-run")[0][0] == "ok"
        [(_, memory)] = checks(report, "claude-code", "auto-memory")
        assert str(next((rig.home / ".claude" / "projects").iterdir())) in memory  # the folder it made


@e2e
def test_gemini_trust_and_hooks_config_and_doctor_says_so(tmp_path: Path) -> None:
    project = make_project(tmp_path / "proj", "gemini")
    off = tmp_path / "off"
    shutil.copytree(project, off)
    edit(off / ".gemini" / "settings.json", hooksConfig={"disabled": ["sagemem"]})
    cases = [("w-on", project, True, 0, True, []), ("w-off", off, True, 0, False, ["hooks-config"])]
    cases.append(("w-untrusted", project, False, None, False, ["folder-trust"]))  # gemini refuses to run
    for name, folder, trusted, code, seen, problems in cases:
        rig = Rig(tmp_path / name)
        done = rig.gemini(folder, PROMPT, trusted=trusted)
        assert (done.returncode == 0) is (code == 0) and reached(done) is seen, done.explain()
        report = doctor(folder, rig.home, GEMINI_CLI_HOME=str(rig.home))
        found = sorted({f["check"] for f in report["findings"] if f["status"] == "problem"})
        assert found == problems, report
