"""Worker processes for the concurrency tests; run as `python tests/workers.py MODE ...`."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from sagemem import MemoryStore, VersionConflict
from sagemem.store.directory import Directory

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
        stop = os.path.exists(stop_path)
        if store.read(FILE).memory is None:
            bad += 1
        reads += 1
        if stop:
            break
    with open(log_path, "w", encoding="utf-8") as handle:
        json.dump({"reads": reads, "bad": bad}, handle)


STEPS = ("fsync", "replace", "link", "unlink")  # what a write does to the disk, one call at a time


def churn(memory_dir: str, pause_at: str, *paths: str) -> None:
    """Write the files' contents in turn, as fast as possible, until killed. With `pause_at`
    N > 0, write once and stop at the N-th point of that write, before or after each of its
    disk steps (an fsync, rename, link or unlink), saying which, until killed: the parent
    kills it exactly there. When the write has fewer points, say "done" and exit.

    The secret scan is skipped: it reads the text before any byte is written, and costs more
    than the write itself, so random kills would mostly land in it (tests/test_secrets.py
    tests it)."""
    assert hasattr(Directory, "refuse_new_secrets")  # a renamed check must not go on silently
    Directory.refuse_new_secrets = lambda self, file, text: None  # type: ignore[method-assign]
    store = MemoryStore(memory_dir)
    contents = [open(p, encoding="utf-8").read() for p in paths]
    stop, points = int(pause_at), 0

    def point(when: str, name: str, args: tuple[Any, ...]) -> None:
        nonlocal points
        points += 1
        if points == stop:
            where = " ".join(os.path.basename(a) for a in args if isinstance(a, (str, os.PathLike)))
            print(f"paused {points} {when} {name} {where}".rstrip(), flush=True)
            sys.stdin.read()  # until killed (or the parent is gone)

    def pausing(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            point("before", name, args)
            result = real(*args, **kwargs)
            point("after", name, args)
            return result

        return step

    print("ready", flush=True)
    turn = 0
    while True:
        read = store.read(FILE)
        if stop:
            for name in STEPS:
                setattr(os, name, pausing(name, getattr(os, name)))
        store.write(FILE, contents[turn % len(contents)], expected_version=read.version)
        if stop:
            print(f"done {points}", flush=True)
            return
        turn += 1


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
