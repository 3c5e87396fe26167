"""The access ledger as the prompt hook meets it: large, of odd names, carried over whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    assert ledger.record(tmp_path, "injected", ["a.md"], now=WHEN) == ["a.md"]
    kept = json.loads(path.read_text())
    assert kept["later"] == "\ud800" and list(kept["receipts"]) == ["r\udcff"]
    assert kept["files"]["a.md"]["injected"] == {"last": WHEN, "count": 1}
    assert ledger.problems(tmp_path)[0][1].startswith("receipts")  # for the next citation to set aside
