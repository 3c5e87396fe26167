"""The automatic trigger: SessionStart starts a dream run in the background when one is due.

Off unless `SAGEMEM_DREAM_AUTO` is `report` or `apply` (the environment only: a settings
file can come with a clone). A run is due when `dream_min_hours` have passed since the last
one and `dream_min_sessions` sessions have started since. The check reads one small file
and lists the sessions folder; the run itself is a detached process, so the hook never
waits for it, and the run's own lock keeps two from overlapping. Imported by the hook only
when the trigger is on.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ..care import dream_state
from ..store import shape
from ..store.config import Scope, Settings
from ..store.files import safe_folder, write_atomic
from ..store.records import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.forms import DreamTriggerForm

STATE = dream_state.TRIGGER_NAME  # `forms.DreamTriggerForm`: when the last run ended, when the trigger fired
RECORD = dream_state.TRIGGER  # its shape, which `check` judges
THROTTLE_SECONDS = 600  # a run just started is not started again while it may still be running
# The runs this process started: never waited for (the hook must not wait), but held, so that
# Python does not warn of a running child when the object would be collected.
started: list[subprocess.Popen[bytes]] = []


def record_run(state_dir: Path, when: float | None = None) -> None:
    """Note that a run ended (any run, started by hand or by the trigger)."""
    state = _state(state_dir)
    state["last"] = time.time() if when is None else when
    _save(state_dir, state)


def due(state_dir: Path, settings: Settings, now: float | None = None) -> bool:
    now = time.time() if now is None else now
    state = _state(state_dir)
    last, started = float(state.get("last") or 0), float(state.get("started") or 0)
    if now - started < THROTTLE_SECONDS or now - last < settings.dream_min_hours * 3600:
        return False
    return _sessions_since(state_dir, last, settings.dream_min_sessions) >= settings.dream_min_sessions


# `python -c` with the current directory taken off the path: neither the project nor a state
# directory that came with it can shadow the installed sagemem (on Python 3.10 too, which has
# no `-P`).
_BOOT = (
    "import sys, runpy; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
    "runpy.run_module('sagemem', run_name='__main__', alter_sys=True)"
)


def maybe_start(
    scope: Scope,
    settings: Settings,
    now: float | None = None,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> bool:
    """Start a run in the background if one is due; whether one was started. A harness's own
    folder is named by its scope (`--in`, from the session's `cwd`), so the run takes the
    same locks as the hook; another directory by its path."""
    if settings.dream_auto not in ("report", "apply") or not due(scope.state_dir, settings, now):
        return False
    state = _state(scope.state_dir)
    state["started"] = time.time() if now is None else now
    _save(scope.state_dir, state)
    command = [sys.executable, "-c", _BOOT]
    if scope.native:
        command += ["--in", scope.name]
    else:
        command += ["--dir", str(scope.memory_dir), "--state-dir", str(scope.state_dir)]
    command += ["dream", *(["--apply"] if settings.dream_auto == "apply" else [])]
    command += ["--sessions"] if settings.dream_sessions else []
    fd = _log(scope.state_dir)
    try:
        child = subprocess.Popen(  # noqa: S603 - our own command, no shell
            command,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=cwd if scope.native and cwd else scope.state_dir,
            env=None if env is None else dict(env),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    started.append(child)
    return True


def _log(state_dir: Path) -> int:
    """The run's log, opened to append: never through a link, never a FIFO (which would hold
    the hook), a regular file or nothing."""
    path = safe_folder(state_dir, "dream") / "auto.log"
    flags = (
        os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    )
    try:
        fd = os.open(path, flags, 0o600)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return os.open(os.devnull, os.O_WRONLY)
    return fd


def _sessions_since(state_dir: Path, since: float, enough: int) -> int:
    """Sessions whose ledger changed since `since`, counted up to `enough`."""
    count = 0
    try:
        with os.scandir(state_dir / "sessions") as entries:
            for entry in entries:
                if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                    if entry.stat(follow_symlinks=False).st_mtime >= since:
                        count += 1
                        if count >= enough:
                            break
    except OSError:
        return 0
    return count


def _state(state_dir: Path) -> DreamTriggerForm:
    """The trigger's times; a file that does not fit reads as none (a run is then due by the
    sessions alone), and is replaced by the next save: it holds nothing but those times."""
    try:
        found = shape.load(state_dir / "dream" / STATE, dream_state.MAX_SMALL_BYTES, RECORD, under=state_dir)
    except shape.Damaged:
        return {}
    return found if found is not None else {}  # of `RECORD`'s shape: the form's


def _save(state_dir: Path, state: DreamTriggerForm) -> None:
    path = safe_folder(state_dir, "dream") / STATE
    shape.clear_folder(path)  # what `_state` read as no time: a file is replaced, a folder set aside
    write_atomic(path, json.dumps(state).encode(), durable=False)
