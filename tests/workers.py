"""Worker processes for the concurrency tests; run as `python tests/workers.py MODE ...`."""

from __future__ import annotations

import json
import re
import sys
import time

from sagemem import MemoryStore, VersionConflict

FILE = "project_race.md"


def race(memory_dir: str, state_dir: str, worker: int, cycles: int, log_path: str) -> None:
    """Guarded read-modify-write cycles that change the description and add a line; log every
    attempt's outcome."""
    store = MemoryStore(memory_dir, state_dir)
    log = []
    for i in range(cycles):
        read = store.read(FILE)
        if read.memory is None:
            log.append({"outcome": "unparseable", "problem": read.problem})
            continue
        line = f"- worker {worker} cycle {i}\n"
        text = re.sub(r"^description: .*$", f"description: w{worker} c{i}", read.text, count=1, flags=re.M)
        try:
            new = store.write(FILE, text + line, expected_version=read.version, writer=f"w{worker}")
            log.append({"outcome": "applied", "expected": read.version, "new": new.version, "line": line})
        except VersionConflict as exc:
            log.append({"outcome": "conflict", "expected": read.version, "id": exc.conflict_id, "line": line})
    with open(log_path, "w", encoding="utf-8") as handle:
        json.dump(log, handle)


def watch(memory_dir: str, stop_path: str, log_path: str) -> None:
    """Read the file until told to stop; count reads that did not parse."""
    store = MemoryStore(memory_dir)
    reads = bad = 0
    while True:
        stop = __import__("os").path.exists(stop_path)
        if store.read(FILE).memory is None:
            bad += 1
        reads += 1
        if stop:
            break
    with open(log_path, "w", encoding="utf-8") as handle:
        json.dump({"reads": reads, "bad": bad}, handle)


def churn(memory_dir: str, a_path: str, b_path: str) -> None:
    """Write A and B in turn, as fast as possible, until killed."""
    store = MemoryStore(memory_dir)
    contents = [open(a_path, encoding="utf-8").read(), open(b_path, encoding="utf-8").read()]
    from sagemem.store.secrets import scan

    scan("warm")  # the secret detector loads on the first write: load it before the kills begin
    print("ready", flush=True)
    turn = 0
    while True:
        read = store.read(FILE)
        store.write(FILE, contents[turn % 2], expected_version=read.version)
        turn += 1
        time.sleep(0)


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "race":
        race(args[0], args[1], int(args[2]), int(args[3]), args[4])
    elif mode == "watch":
        watch(*args)
    elif mode == "churn":
        churn(*args)
    else:
        raise SystemExit(f"unknown mode {mode}")
