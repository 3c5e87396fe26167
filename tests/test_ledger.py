"""The access ledger as the prompt hook meets it: large, of odd names, carried over whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sagemem.store import ledger

WHEN = 1_790_000_000.0


def test_a_ledger_of_long_names_is_read_and_written_without_the_secret_scanner(tmp_path: Path) -> None:
    """Its keys are names memories had: the path rule judges them, one regular expression a
    name. The new-name rule's secret pass (and its import) is for names being made."""
    names = [f"project_release{i:04d}abcdefghijklmnop.md" for i in range(300)]
    (tmp_path / "access.json").write_text(
        json.dumps({"files": {n: {"injected": {"last": WHEN, "count": 1}} for n in names}})
    )
    script = (
        "import sys; from pathlib import Path; from sagemem.store import ledger; "
        f"state = Path({str(tmp_path)!r}); "
        "assert len(ledger.load(state)) == 300, 'entries lost'; "
        f"ledger.record(state, 'injected', [{names[0]!r}]); "
        "assert ledger.problems(state) == []; "
        "print('sagemem.store.secrets' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "False", "")
    assert ledger.load(tmp_path)[names[0]].injected.count == 2


def test_what_a_newer_sagemem_or_a_receipt_holds_is_carried_over_whatever_its_text(tmp_path: Path) -> None:
    """A count needs no look at the receipts or at keys it does not know: they are written
    back as found, even a lone surrogate (legal JSON, no UTF-8), as ASCII escapes."""
    path = tmp_path / "access.json"
    path.write_text(
        '{"files": {"a.md": {"read": {"last": null, "count": 0}}}, "later": "\\ud800",'
        ' "receipts": {"r\\udcff": {"at": 1790000000.0, "files": ["a.md"]}}}'
    )
    assert ledger.record(tmp_path, "injected", ["a.md"], now=WHEN, live=lambda: ["a.md"]) == ["a.md"]
    kept = json.loads(path.read_text())
    assert kept["later"] == "\ud800" and list(kept["receipts"]) == ["r\udcff"]
    assert kept["files"]["a.md"]["injected"] == {"last": WHEN, "count": 1}
    assert ledger.problems(tmp_path)[0][1].startswith("receipts")  # for the next citation to set aside


# -- the hooks' log ---------------------------------------------------------------------------------


def test_the_hooks_uses_are_appended_then_folded_in_and_none_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for when in (WHEN, WHEN + 2, WHEN + 1):
        ledger.record(tmp_path, "injected", ["a.md", "b.md"], now=when)
    ledger.record(tmp_path, "read", ["a.md"], now=WHEN + 5)
    assert not (tmp_path / "access.json").exists()  # nothing rewritten: four lines appended
    assert len((tmp_path / ledger.LOG).read_bytes().splitlines()) == 4
    counted = ledger.load(tmp_path)
    assert counted["a.md"].injected == ledger.Use(WHEN + 2, 3) and counted["a.md"].read == ledger.Use(
        WHEN + 5, 1
    )
    monkeypatch.setattr(ledger, "FOLD_AT", 1)  # the next line takes the log past it
    ledger.record(tmp_path, "injected", ["b.md"], now=WHEN + 9)
    assert not (tmp_path / ledger.LOG).exists() and not (tmp_path / ledger.FOLDING).exists()
    folded = json.loads((tmp_path / "access.json").read_text())["files"]
    assert folded["b.md"]["injected"] == {"last": WHEN + 9, "count": 4}
    assert ledger.load(tmp_path) == {**counted, "b.md": ledger.load(tmp_path)["b.md"]}
    assert ledger.load(tmp_path)["b.md"].injected.count == 4 and ledger.problems(tmp_path) == []


def test_appenders_and_folders_in_many_processes_lose_no_use_and_count_none_twice(tmp_path: Path) -> None:
    """Four processes append (and fold each time their log passes a few lines) while two
    count reads under the lock, which folds every time: every use is counted once."""
    appending = (
        "import sys; from pathlib import Path; from sagemem.store import ledger\n"
        "ledger.FOLD_AT = 100\n"
        "for i in range(150):\n"
        "    ledger.record(Path(sys.argv[1]), 'injected', ['a.md', f'w{sys.argv[2]}.md'])\n"
    )
    locked = (
        "import sys; from pathlib import Path; from sagemem.store import ledger\n"
        "names = ['a.md', 'w0.md', 'w1.md', 'w2.md', 'w3.md']\n"
        "for i in range(40):\n"
        "    ledger.record(Path(sys.argv[1]), 'read', ['a.md'], live=lambda: names)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", appending, str(tmp_path), str(w)]) for w in range(4)]
    procs += [subprocess.Popen([sys.executable, "-c", locked, str(tmp_path)]) for _ in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    counted = ledger.load(tmp_path)
    assert counted["a.md"].injected.count == 4 * 150 and counted["a.md"].read.count == 2 * 40
    assert [counted[f"w{w}.md"].injected.count for w in range(4)] == [150] * 4
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])  # all folded in, nothing left over
    assert json.loads((tmp_path / "access.json").read_text())["files"]["a.md"]["injected"]["count"] == 600
    assert not (tmp_path / ledger.LOG).exists() and not (tmp_path / ledger.FOLDING).exists()


@pytest.mark.parametrize("planted", ["link", "fifo", "folder", "oversize"])
def test_whatever_a_clone_puts_in_the_logs_place_counting_goes_on(
    tmp_path: Path, planted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing is written through a link, no open waits on a FIFO, an oversize log is not
    read; the use is counted under the lock, and what was there is set aside, whole."""
    state = tmp_path / "state"
    state.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    log = state / ledger.LOG
    if planted == "link":
        log.symlink_to(outside)
    elif planted == "fifo":
        os.mkfifo(log)
    elif planted == "folder":
        log.mkdir()
    else:
        monkeypatch.setattr(ledger, "MAX_LOG_BYTES", 64)
        log.write_text(json.dumps({"kind": "read", "at": WHEN, "files": ["a.md"]}) + "\n" + "x" * 64 + "\n")
    assert ledger.record(state, "injected", ["a.md"], now=WHEN) == ["a.md"]
    assert outside.read_text() == "mine\n"
    assert ledger.load(state)["a.md"].injected == ledger.Use(WHEN, 1)
    assert ledger.load(state)["a.md"].read.count == 0  # an oversize log is not counted at all
    [aside] = state.glob(f"{ledger.FOLDING}.damaged-*")
    assert aside.is_symlink() if planted == "link" else aside.exists()
    assert not os.path.lexists(log) and ledger.problems(state) == []


def test_a_damaged_line_is_a_finding_and_the_fold_sets_the_log_aside(tmp_path: Path) -> None:
    good = json.dumps({"kind": "injected", "at": WHEN, "files": ["a.md"]})
    bad = [
        "not json",
        json.dumps({"kind": "cited", "at": WHEN, "files": ["a.md"]}),  # citations need a receipt
        json.dumps({"kind": "read", "at": "today", "files": ["a.md"]}),
        json.dumps({"kind": "read", "at": WHEN, "files": ["../../escape.md"]}),
    ]
    (tmp_path / ledger.LOG).write_text("\n".join([good, *bad, good]) + "\n")
    [(path, why)] = ledger.problems(tmp_path)
    assert (
        path == tmp_path / ledger.LOG
        and why.startswith("line 2 is not a JSON line")
        and "(and 3 more)" in why
    )
    assert ledger.load(tmp_path)["a.md"].injected.count == 2 and ledger.load(tmp_path)["a.md"].read.count == 0
    before = (tmp_path / ledger.LOG).read_bytes()
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])
    [aside] = tmp_path.glob(f"{ledger.FOLDING}.damaged-*")
    assert aside.read_bytes() == before and ledger.problems(tmp_path) == []
    assert ledger.load(tmp_path)["a.md"] == ledger.Record(
        "a.md", ledger.Use(WHEN, 2), ledger.load(tmp_path)["a.md"].read
    )


def test_a_log_a_crash_left_mid_fold_is_counted_at_the_next_fold(tmp_path: Path) -> None:
    line = json.dumps({"kind": "injected", "at": WHEN, "files": ["a.md"]}) + "\n"
    (tmp_path / ledger.FOLDING).write_text(line)
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN + 1)  # appended to a new log
    assert ledger.load(tmp_path)["a.md"].injected == ledger.Use(WHEN + 1, 2)
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])  # folds the one left behind
    assert not (tmp_path / ledger.FOLDING).exists() and (tmp_path / ledger.LOG).exists()
    assert ledger.load(tmp_path)["a.md"].injected == ledger.Use(WHEN + 1, 2)
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])  # and then the current one
    assert not (tmp_path / ledger.LOG).exists()
    assert json.loads((tmp_path / "access.json").read_text())["files"]["a.md"]["injected"]["count"] == 2


def test_an_appender_whose_log_was_folded_in_before_its_line_appends_to_the_new_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process folds the log between this appender's open and its lock."""
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN)
    real = ledger.hold

    def fold_first(fd: int, *, shared: bool, timeout: float) -> bool:
        if shared and not (tmp_path / "access.json").exists():
            ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])
        return real(fd, shared=shared, timeout=timeout)

    monkeypatch.setattr(ledger, "hold", fold_first)
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN + 1)
    assert ledger.load(tmp_path)["a.md"].injected == ledger.Use(WHEN + 1, 2)


def test_a_fold_waits_for_the_appender_that_holds_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold that starts while an appender holds the log takes the appender's line in."""
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN)
    real = ledger.hold
    folding: list[threading.Thread] = []

    def fold_meanwhile(fd: int, *, shared: bool, timeout: float) -> bool:
        held = real(fd, shared=shared, timeout=timeout)
        if shared and not folding:
            fold = threading.Thread(
                target=ledger.record, args=(tmp_path, "read", ["a.md"]), kwargs={"live": lambda: ["a.md"]}
            )
            folding.append(fold)
            fold.start()
            time.sleep(0.3)  # the fold has renamed the log and waits for this appender
        return held

    monkeypatch.setattr(ledger, "hold", fold_meanwhile)
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN + 1)
    folding[0].join(timeout=30)
    assert not (tmp_path / ledger.FOLDING).exists()  # folded, with or without the line
    assert ledger.load(tmp_path)["a.md"].injected == ledger.Use(WHEN + 1, 2)  # in the new log if not


def test_a_fold_that_cannot_have_the_log_to_itself_leaves_it_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An appender that holds the log past the wait (a stopped process) may write still: the
    fold leaves the log where the next fold takes it, and nothing is lost."""
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN)
    real = ledger.hold
    monkeypatch.setattr(
        ledger, "hold", lambda fd, *, shared, timeout: shared and real(fd, shared=True, timeout=timeout)
    )
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])
    assert (tmp_path / ledger.FOLDING).exists()  # not removed
    with open(tmp_path / ledger.FOLDING, "a") as late:  # the stopped appender's line
        late.write(json.dumps({"kind": "injected", "at": WHEN + 1, "files": ["a.md"]}) + "\n")
    monkeypatch.setattr(ledger, "hold", real)
    ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])
    assert not (tmp_path / ledger.FOLDING).exists()
    assert ledger.load(tmp_path)["a.md"] == ledger.Record(
        "a.md", ledger.Use(WHEN + 1, 2), ledger.load(tmp_path)["a.md"].read
    )
    assert ledger.load(tmp_path)["a.md"].read.count == 2


def test_an_appender_whose_log_was_set_aside_meanwhile_appends_to_the_new_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged log is moved to a name of its own, not removed: the appender that opened it
    before must not write its line there."""
    (tmp_path / ledger.LOG).write_text("not json\n")
    real = ledger.hold

    def fold_first(fd: int, *, shared: bool, timeout: float) -> bool:
        if shared and not list(tmp_path.glob("*.damaged-*")):
            ledger.record(tmp_path, "read", ["a.md"], live=lambda: ["a.md"])
        return real(fd, shared=shared, timeout=timeout)

    monkeypatch.setattr(ledger, "hold", fold_first)
    ledger.record(tmp_path, "injected", ["a.md"], now=WHEN)
    [aside] = tmp_path.glob("*.damaged-*")
    assert aside.read_text() == "not json\n"
    assert ledger.load(tmp_path)["a.md"].injected == ledger.Use(WHEN, 1)


def test_a_write_that_counts_nothing_still_replaces_a_damaged_ledger(tmp_path: Path) -> None:
    """The damaged ledger is set aside; its sound entries are written anew, not dropped."""
    (tmp_path / "access.json").write_text(
        json.dumps({"files": {"a.md": {"read": {"last": WHEN, "count": 5}}, "b.md": {"read": "x"}}})
    )
    assert ledger.record(tmp_path, "cited", [], receipt="r1") == []
    assert ledger.load(tmp_path)["a.md"].read == ledger.Use(WHEN, 5)
    assert len(list(tmp_path.glob("access.json.damaged-*"))) == 1
    # A damaged receipt, and a citation whose receipt was seen before: nothing counted, the
    # ledger set aside and written anew all the same.
    data = json.loads((tmp_path / "access.json").read_text())
    data["receipts"] = {"r0": {"at": "never", "files": []}, "r1": {"at": WHEN, "files": ["a.md"]}}
    (tmp_path / "access.json").write_text(json.dumps(data))
    assert ledger.record(tmp_path, "cited", ["a.md"], receipt="r1") == []
    assert ledger.load(tmp_path)["a.md"].read == ledger.Use(WHEN, 5)
    assert len(list(tmp_path.glob("access.json.damaged-*"))) == 2
