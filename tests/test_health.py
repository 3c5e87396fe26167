from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagemem import MemoryStore
from sagemem.cli import cli

from .conftest import write_file

DEMO = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
FUTURE = (dt.date.today() + dt.timedelta(days=30)).isoformat()

SEEDED = {
    "project_ok.md": (
        "---\nname: ok\ndescription: a healthy memory about invoices\ntype: project\n---\n\n"
        "See [[user_me]] and `[[not a link]]`.\n"
    ),
    "user_me.md": (
        "---\nname: me\ndescription: who I am\ntype: user\n---\n\n"
        "Links: [[ok|the ok one]], [[ok#part]], [[gone]], [[old]].\n\n```\n[[inside code]]\n```\n"
    ),
    "reference_crlf.md": "---\r\ndescription: windows line endings\r\ntype: reference\r\n---\r\n\r\nbody\r\n",
    "feedback_mismatch.md": "---\ndescription: says feedback, is project\ntype: project\n---\n\nbody\n",
    "notes.md": "no frontmatter here\n",
    "project_nodesc.md": "---\nname: nodesc\ntype: project\n---\n\nbody\n",
    "project_multiline.md": "---\ndescription: >-\n  spread over\n  two lines\ntype: project\n---\n\nbody\n",
    "project_dup1.md": "---\ndescription: The Same Words\ntype: project\n---\n\nbody\n",
    "project_dup2.md": "---\ndescription: the same  words\ntype: project\n---\n\nbody\n",
    "project_hash.md": "---\ndescription: uses C # and more\ntype: project\n---\n\nbody\n",
    "project_future.md": f"---\ndescription: from the future\ntype: project\nupdated: {FUTURE}\n---\n\nx\n",
    "project_secret.md": "---\ndescription: deploy keys\ntype: project\n---\n\nkey AKIAABCDEFGHIJKLMNOP\n",
    "project_badyaml.md": "---\ndescription: [unclosed\n---\n",
    "Project_Ok.md": "---\ndescription: case twin\ntype: project\n---\n",
}


def seeded(folder: Path) -> MemoryStore:
    store = MemoryStore(folder)
    store.init()
    for name, text in SEEDED.items():
        (folder / name).write_bytes(text.encode())
    (folder / "archive").mkdir()
    (folder / "archive" / "old.md").write_text("---\ndescription: archived one\n---\n")
    (folder / "big.md").write_bytes(b"x" * (600 * 1024))
    index = "# Memory\n\n" + "".join(f"- [x{i}](gone{i}.md)\n" for i in range(2)) + "filler\n" * 210
    index += "token ghp_" + "z" * 36 + "\n"
    (folder / "MEMORY.md").write_text(index)
    return store


def by_check(store: MemoryStore) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in store.check().findings:
        found.setdefault(f.check, set()).add(f.file if f.line is None else f"{f.file}:{f.line}")
    return found


def test_every_seeded_problem_is_found(tmp_path: Path) -> None:
    store = seeded(tmp_path / "mem")
    found = by_check(store)
    assert found["index-dangling"] == {"MEMORY.md:3", "MEMORY.md:4"}
    assert "project_ok.md" in found["index-unlisted"]
    assert found["index-too-long"] == {"MEMORY.md"}
    assert found["unreadable"] == {"project_badyaml.md", "big.md"}
    assert found["case-duplicate"] == {"project_ok.md", "Project_Ok.md"}
    assert found["no-frontmatter"] == {"notes.md"}
    assert found["description"] == {"project_nodesc.md", "project_multiline.md:2"}
    assert found["duplicate-description"] == {"project_dup1.md", "project_dup2.md"}
    assert found["type-mismatch"] == {"feedback_mismatch.md"}
    assert found["crlf"] == {"reference_crlf.md"}
    assert found["hash-comment"] == {"project_hash.md:2"}
    assert found["future-updated"] == {"project_future.md"}
    assert found["broken-link"] == {"user_me.md:7"}
    assert found["archived-link"] == {"user_me.md:7"}
    assert found["secret"] == {"project_secret.md:6", "MEMORY.md:215"}
    report = store.check()
    assert not report.ok
    assert all(f.severity == "hint" for f in report.findings if f.check == "archived-link")
    messages = [f.message for f in report.findings if f.check == "broken-link"]
    assert messages == ["[[gone]] matches no memory"]


def test_a_clean_directory_has_no_findings(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    store.create(type="project", name="a", description="alpha")
    store.create(type="user", name="b", description="beta", body="See [[a]].")
    report = store.check()
    assert report.ok and report.findings == ()
    assert MemoryStore(DEMO, tmp_path / "state").check().ok


def test_check_reads_only(tmp_path: Path) -> None:
    store = seeded(tmp_path / "mem")
    before = {
        p: p.read_bytes() for p in store.memory_dir.rglob("*") if p.is_file() and ".sagemem" not in p.parts
    }
    store.check()
    after = {
        p: p.read_bytes() for p in store.memory_dir.rglob("*") if p.is_file() and ".sagemem" not in p.parts
    }
    assert after == before


def test_fix_repairs_what_is_mechanical_after_a_snapshot(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    store.create(type="project", name="a", description="alpha")
    write_file(store, "reference_crlf.md", "---\r\ndescription: windows\r\n---\r\n\r\nbody\r\n")
    (store.memory_dir / "MEMORY.md").write_text("# Memory\n\n- [gone](gone.md)\n- [a](project_a.md) — old\n")
    assert not store.check().ok
    changes = store.fix()
    assert changes[0].startswith("snapshot ") and len(changes) == 3
    assert store.check().ok
    assert (
        store.memory_dir / "reference_crlf.md"
    ).read_bytes() == b"---\ndescription: windows\n---\n\nbody\n"
    assert store.snapshots()[0].label == "before check --fix"
    assert store.fix() == []


def test_check_command_exit_codes(tmp_path: Path) -> None:
    store = seeded(tmp_path / "mem")
    result = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "check", "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["problems"] == sum(1 for f in data["findings"] if f["severity"] == "problem")
    clean = tmp_path / "clean"
    assert CliRunner().invoke(cli, ["--dir", str(clean), "init"]).exit_code == 0
    result = CliRunner().invoke(cli, ["--dir", str(clean), "check"])
    assert result.exit_code == 0 and result.stdout.endswith("0 memories, 0 problems\n")


@pytest.mark.parametrize(
    "line",
    [
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "token ghp_" + "a" * 36,
        "export OPENAI_API_KEY=sk-" + "b" * 40,
        "password: hunter2hunter2hunter2",
        "xoxb-123456789012-abcdefghij",
    ],
)
def test_secret_patterns(tmp_path: Path, line: str) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    write_file(store, "project_s.md", f"---\ndescription: s\n---\n\n{line}\n")
    assert "secret" in by_check(store)


def test_no_false_alarms_on_healthy_oddities(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    claude = (
        '---\nname: prefers-uv\ndescription: "the user packages Python with uv # not pip"\n'
        "metadata:\n  type: feedback\n---\n\nSee [[MEMORY]] and [[session-log]].\n\n"
        "    [[indented code]]\n\n````\n```\n[[inside a longer fence]]\n````\n\n"
        "password: ${DB_PASSWORD_FROM_ENV}\napi_key = <your-key-here>\n"
    )
    write_file(store, "feedback_uv.md", claude)
    store.rebuild_index()
    report = store.check()
    assert report.ok, [f.to_dict() for f in report.findings]


def test_check_reports_what_it_cannot_read(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    store.create(type="project", name="a", description="alpha")
    (store.memory_dir / "MEMORY.md").write_bytes(b"# \xff\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.memory_dir / "archive").symlink_to(elsewhere)
    found = by_check(store)
    assert {"MEMORY.md", "archive/"} <= found["unreadable"]


def test_fix_goes_on_past_a_file_it_cannot_rewrite(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m")
    store.init()
    write_file(store, "project_bad.md", "---\r\ndescription: [broken\r\n---\r\n")
    write_file(store, "project_ok.md", "---\r\ndescription: fine\r\n---\r\n")
    changes = store.fix()
    assert any(c.startswith("project_bad.md: not fixed") for c in changes)
    assert "project_ok.md: CRLF line endings converted to LF" in changes
    assert b"\r" not in (store.memory_dir / "project_ok.md").read_bytes()


def test_check_names_a_type_that_write_refuses(store: MemoryStore) -> None:
    text = "---\nname: typo\ndescription: a typo in its type\ntype: projet\n---\n\nx\n"
    write_file(store, "project_typo.md", text)
    found = [(f.check, f.file) for f in store.check().findings]
    assert ("unknown-type", "project_typo.md") in found
    done = CliRunner().invoke(cli, ["--dir", str(store.memory_dir), "check"], catch_exceptions=False)
    assert done.exit_code == 1 and "unknown-type: project_typo.md: type 'projet' is none of" in done.stdout
    with pytest.raises(Exception, match="type must be one of"):  # what `check` says `write` does
        store.write("project_new.md", text, expected_version=None)
