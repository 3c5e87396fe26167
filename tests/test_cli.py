from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagemem import MemoryStore, __version__
from sagemem.cli import cli

DEMO = Path(__file__).resolve().parent.parent / "fixtures" / "demo"


def run(args: list[str], input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, input=input, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def mem(tmp_path: Path) -> str:
    folder = tmp_path / "mem"
    assert run(["--dir", str(folder), "init"])[0] == 0
    return str(folder)


def test_version() -> None:
    code, out, _ = run(["--version"])
    assert code == 0 and __version__ in out


def test_init_twice(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    code, out, _ = run(["--dir", str(folder), "init", "--git"])
    assert code == 0 and "MEMORY.md" in out and ".gitattributes" in out
    code, out, _ = run(["--dir", str(folder), "init", "--git"])
    assert code == 0 and out.startswith("already initialised")


def test_init_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["init", "--project"])[0] == 0
    assert (tmp_path / ".sagemem" / "memory" / "MEMORY.md").is_file()
    code, out, _ = run(["path", "--json"])
    assert json.loads(out)["memory_dir"] == str(tmp_path / ".sagemem" / "memory")
    assert run(["--dir", "x", "init", "--project"])[0] == 2


def test_path_reports_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAGE_MEM_DIR", str(tmp_path / "legacy"))
    code, out, _ = run(["path"])
    assert code == 0
    assert f"dir:     {tmp_path / 'legacy'}  (SAGE_MEM_DIR)" in out  # one directory: one scope
    assert f"state: {tmp_path / 'legacy' / '.sagemem'}" in out
    data = json.loads(run(["--state-dir", str(tmp_path / "s"), "path", "--json"])[1])
    assert data["state_dir"] == str(tmp_path / "s") and [s["name"] for s in data["scopes"]] == ["dir"]


def test_new_read_write_cycle(mem: str) -> None:
    code, out, _ = run(
        [
            "--dir",
            mem,
            "new",
            "--type",
            "project",
            "--name",
            "Deploy flow",
            "--description",
            "How we deploy",
            "--tag",
            "ci",
            "--alias",
            "ship",
        ],
        input="Run make deploy.\n",
    )
    assert code == 0
    file, version = out.split()
    assert file == "project_deploy_flow.md" and len(version) == 64

    code, out, err = run(["--dir", mem, "read", file])
    assert code == 0 and out.endswith("Run make deploy.\n") and version in err
    data = json.loads(run(["--dir", mem, "read", file, "--json"])[1])
    assert data["version"] == version and data["memory"]["tags"] == ["ci"]
    assert data["memory"]["aliases"] == ["ship"]

    code, out, _ = run(["--dir", mem, "read", file, "--lines", "2-3"])
    assert out == "name: Deploy flow\ndescription: How we deploy\n"
    data = json.loads(run(["--dir", mem, "read", file, "--lines", "10-99", "--json"])[1])
    assert data["lines"] == [10, 10] and data["text"] == "Run make deploy.\n"

    content = Path(mem, file).read_text().replace("How we deploy", "How we deploy, v2")
    code, out, _ = run(["--dir", mem, "write", file, "--expected-version", version], input=content)
    assert code == 0 and out.split()[0] == file and out.split()[1] != version
    assert "v2" in Path(mem, "MEMORY.md").read_text()

    # The old version again: exit 3, conflict id on stderr, nothing written.
    stale = "---\ndescription: stale\n---\nx\n"
    code, out, err = run(["--dir", mem, "write", file, "--expected-version", version], input=stale)
    assert code == 3 and out == ""
    conflict_id = err.split("conflict ")[1].split()[0]
    assert "v2" in Path(mem, file).read_text()

    listed = json.loads(run(["--dir", mem, "conflicts", "--json"])[1])
    assert [c["id"] for c in listed] == [conflict_id]
    code, out, _ = run(["--dir", mem, "conflicts", "show", conflict_id])
    assert code == 0 and "+x" in out and "-description: How we deploy, v2" in out
    code, out, _ = run(["--dir", mem, "conflicts", "resolve", conflict_id, "--keep", "disk"])
    assert code == 0 and "kept disk" in out
    assert run(["--dir", mem, "conflicts", "list"])[1] == ""
    assert conflict_id in run(["--dir", mem, "conflicts", "list", "--resolved"])[1]


def test_new_body_sources(mem: str, tmp_path: Path) -> None:
    body = tmp_path / "body.md"
    body.write_text("从文件读入的正文\n", encoding="utf-8")
    base = ["--dir", mem, "new", "--type", "reference", "--description", "d"]
    assert run([*base, "--name", "a", "--body", "inline"])[0] == 0
    assert run([*base, "--name", "b", "--body-file", str(body)])[0] == 0
    assert Path(mem, "reference_a.md").read_text().endswith("\ninline\n")
    assert Path(mem, "reference_b.md").read_text(encoding="utf-8").endswith("\n从文件读入的正文\n")


def test_update_command(mem: str) -> None:
    _, out, _ = run(
        ["--dir", mem, "new", "--type", "user", "--name", "u", "--description", "d", "--body", "b"]
    )
    file, version = out.split()
    code, out, _ = run(
        [
            "--dir",
            mem,
            "update",
            file,
            "--expected-version",
            version,
            "--tag",
            "x",
            "--tag",
            "y",
            "--description",
            "d2",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(out)
    memory = MemoryStore(mem).get(file)
    assert data["version"] == memory.version and memory.tags == ("x", "y") and memory.description == "d2"
    assert run(["--dir", mem, "update", file, "--expected-version", version, "--tag", "z"])[0] == 3


def test_list_and_filters(mem: str) -> None:
    for type_, name, tag in [("user", "me", "a"), ("project", "p", "b"), ("project", "q", "a")]:
        run(
            [
                "--dir",
                mem,
                "new",
                "--type",
                type_,
                "--name",
                name,
                "--description",
                f"{name} desc",
                "--tag",
                tag,
            ]
        )
    Path(mem, "broken.md").write_text("---\nx: [\n---\n")
    code, out, err = run(["--dir", mem, "list"])
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == ["project_p.md", "project_q.md", "user_me.md"]
    assert "broken.md" in err and "not valid YAML" in err
    data = json.loads(run(["--dir", mem, "list", "--type", "project", "--tag", "a", "--json"])[1])
    assert [m["file"] for m in data] == ["project_q.md"]


def test_index_check_and_rebuild(mem: str) -> None:
    run(["--dir", mem, "new", "--type", "user", "--name", "a", "--description", "alpha"])
    assert run(["--dir", mem, "index"]) == (0, "MEMORY.md is up to date\n", "")
    Path(mem, "project_b.md").write_text("---\ndescription: beta\n---\n")
    with open(Path(mem, "MEMORY.md"), "a") as handle:
        handle.write("- [Gone](gone.md) — removed\n")
    code, out, err = run(["--dir", mem, "index", "--check"])
    assert code == 1 and "dangling: line 4" in out and "unlisted: project_b.md" in out
    assert err == "sagemem: MEMORY.md: 2 problems; `sagemem index --rebuild` fixes them\n"
    report = json.loads(run(["--dir", mem, "index", "--json"])[1])
    assert report["ok"] is False and report["unlisted"] == ["project_b.md"]
    assert run(["--dir", mem, "index", "--rebuild"])[1] == "MEMORY.md rebuilt\n"
    assert run(["--dir", mem, "index", "--rebuild", "--json"])[1].strip() == '{\n  "changed": false\n}'
    assert run(["--dir", mem, "index", "--check"])[0] == 0


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["read", "nope.md"], 1, "nope.md: no such memory"),
        (["read", "../etc.md"], 1, "invalid memory file name: must be a single path segment"),
        (["read", "MEMORY.md"], 1, "is reserved"),
        (["write", "x.md", "--expected-version", "0" * 64], 1, "x.md: frontmatter is not valid YAML"),
        (["write", "x.md", "--expected-version", "abc"], 2, "is not a version"),
        (["new", "--type", "user", "--name", "x", "--description", "d", "--priority", "nan"], 2, "finite"),
        (
            ["new", "--type", "user", "--name", "x", "--description", "d", "--body", "b", "--body-file", "-"],
            2,
            "not both",
        ),
        (["conflicts", "show", "0123456789abcdef"], 1, "no such conflict"),
        (["read", "x.md", "--lines", "5-2"], 2, "need 1 <= A <= B"),
        (["new", "--type", "diary", "--name", "x", "--description", "d"], 2, "diary"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_errors_are_one_line_with_exit_codes(mem: str, args: list[str], code: int, message: str) -> None:
    got, out, err = run(["--dir", mem, *args], input="---\nx: [\n---\n")
    assert got == code
    assert message in err
    if code == 1:
        assert err.startswith("sagemem: ") and err.count("\n") == 1


def test_missing_memory_dir(tmp_path: Path) -> None:
    code, _, err = run(["--dir", str(tmp_path / "none"), "list"])
    assert code == 1 and "run `sagemem init`" in err


def test_bad_input_changes_nothing_on_disk(mem: str, tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in Path(mem).rglob("*") if p.is_file()}
    code, _, err = run(
        ["--dir", mem, "write", "new.md"], input="---\ntags: [" + ",".join(["t"] * 30) + "]\n---\n"
    )
    assert code == 1 and "tags: at most 20" in err
    code, _, err = run(
        ["--dir", mem, "new", "--type", "user", "--name", "x", "--description", "d", "--file", "a/b.md"]
    )
    assert code == 1 and "single path segment" in err
    latin1 = tmp_path / "latin1.md"
    latin1.write_bytes("---\ndescription: caf\xe9\n---\n".encode("latin-1"))
    code, _, err = run(["--dir", mem, "write", "new.md", "--content-file", str(latin1)])
    assert code == 1 and err == f"sagemem: {latin1}: is not valid UTF-8 (byte 20)\n"
    code, _, err = run(
        ["--dir", mem, "new", "--type", "user", "--name", "a\nb", "--description", "d", "--file", "x\ny.md"]
    )
    assert code == 1 and err.count("\n") == 1
    assert {p: p.read_bytes() for p in Path(mem).rglob("*") if p.is_file()} == before


def test_lines_past_the_end(mem: str) -> None:
    run(["--dir", mem, "new", "--type", "user", "--name", "u", "--description", "d", "--body", "b"])
    code, _, err = run(["--dir", mem, "read", "user_u.md", "--lines", "20-30", "--json"])
    assert code == 1 and "has 8 lines" in err


def test_write_still_succeeds_when_the_index_cannot_be_updated(mem: str) -> None:
    Path(mem, "MEMORY.md").write_bytes(b"# \xff not utf-8\n")
    code, out, err = run(["--dir", mem, "new", "--type", "user", "--name", "u", "--description", "d"])
    assert code == 0 and out.startswith("user_u.md ")
    assert err.startswith("sagemem: warning: user_u.md was written") and "MEMORY.md" in err
    assert Path(mem, "user_u.md").is_file()


def test_init_json(tmp_path: Path) -> None:
    data = json.loads(run(["--dir", str(tmp_path / "m"), "init", "--json"])[1])
    assert data["memory_dir"] == str(tmp_path / "m") and len(data["changed"]) == 4
    assert json.loads(run(["--dir", str(tmp_path / "m"), "init", "--json"])[1])["changed"] == []


def test_demo_directory_lists(tmp_path: Path) -> None:
    code, out, err = run(["--dir", str(DEMO), "--state-dir", str(tmp_path / "s"), "list"])
    assert code == 0 and err == ""
    assert len(out.splitlines()) == 8
    assert run(["--dir", str(DEMO), "--state-dir", str(tmp_path / "s"), "index", "--check"])[0] == 0


def test_real_processes_console_script_and_module(tmp_path: Path) -> None:
    script = shutil.which("sagemem") or str(Path(sys.executable).with_name("sagemem"))
    for command in ([script], [sys.executable, "-m", "sagemem"]):
        done = subprocess.run([*command, "--version"], capture_output=True, text=True)
        assert done.returncode == 0 and __version__ in done.stdout
    folder = tmp_path / "m"
    subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", str(folder), "init"], check=True, capture_output=True
    )
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagemem",
            "--dir",
            str(folder),
            "new",
            "--type",
            "user",
            "--name",
            "x",
            "--description",
            "d",
        ],
        input="body\n",
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0
    file, version = made.stdout.split()
    stale = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagemem",
            "--dir",
            str(folder),
            "write",
            file,
            "--expected-version",
            "0" * 64,
        ],
        input="---\ndescription: d\n---\n",
        capture_output=True,
        text=True,
    )
    assert stale.returncode == 3 and "version conflict" in stale.stderr


def test_hook_help_in_a_real_process(tmp_path: Path) -> None:
    """`sagemem hook` skips click to answer fast (`__main__.py`), and would answer `--help`
    with a hook's silence: asked for help, anywhere on the line, it prints the command's."""
    script = shutil.which("sagemem") or str(Path(sys.executable).with_name("sagemem"))
    env = {**os.environ, "SAGEMEM_DAEMON": "off"}  # were it run as a hook, it starts nothing
    for command in ([script], [sys.executable, "-m", "sagemem"]):
        for asked in (["--help"], ["-h"], ["claude-code", "--help"], ["gemini", "BeforeAgent", "-h"]):
            done = subprocess.run(
                [*command, "hook", *asked], input="", capture_output=True, text=True, cwd=tmp_path, env=env
            )
            assert done.returncode == 0, (asked, done.stderr)
            assert done.stdout.startswith("Usage: sagemem hook [OPTIONS] {claude-code|"), asked
            assert "HARNESS" in done.stdout and "EVENT" in done.stdout and "-h, --help" in done.stdout
            assert done.stderr == ""


def test_search_and_inject_commands(tmp_path: Path) -> None:
    code, out, _ = run(
        [
            "--dir",
            str(DEMO),
            "--state-dir",
            str(tmp_path / "s"),
            "search",
            "how do we deploy to production",
            "--json",
        ]
    )
    assert code == 0
    hits = json.loads(out)
    assert hits[0]["file"] == "project_deploy_flow.md" and len(hits[0]["version"]) == 64
    assert hits[0]["snippet"] and hits[0]["lines"][0] <= hits[0]["lines"][1]
    # Asked for on purpose, a message that shares one common word gets that weak match, and
    # nothing in it is marked as what the hook would inject; one that shares none gets nothing.
    where = ["--dir", str(DEMO), "--state-dir", str(tmp_path / "s")]
    code, out, _ = run([*where, "search", "write a haiku about autumn", "--json"])
    assert code == 0 and json.loads(out) and not any(h["strong"] for h in json.loads(out))
    code, out, _ = run([*where, "search", "haiku autumn leaves"])
    assert code == 0 and out == ""
    code, out, _ = run(
        [
            "--dir",
            str(DEMO),
            "--state-dir",
            str(tmp_path / "s"),
            "inject",
            "--query",
            "上线前数据库迁移要注意什么",
        ]
    )
    assert code == 0 and "### project_数据库迁移.md:" in out
    code, out, _ = run(
        ["--dir", str(DEMO), "--state-dir", str(tmp_path / "s"), "inject", "--query", "今天天气怎么样"]
    )
    assert code == 0 and out == ""
    data = json.loads(
        run(
            [
                "--dir",
                str(DEMO),
                "--state-dir",
                str(tmp_path / "s"),
                "inject",
                "-q",
                "how do we roll back a release",
                "--format",
                "json",
            ]
        )[1]
    )
    assert data["snippets"][0]["file"] == "project_deploy_flow.md"
    assert (
        run(["--dir", str(DEMO), "--state-dir", str(tmp_path / "s"), "inject", "-q", "x", "--reset"])[0] == 2
    )


def test_search_and_inject_do_not_touch_memory_files(mem: str) -> None:
    run(["--dir", mem, "new", "--type", "user", "--name", "u", "--description", "prefers tea over coffee"])
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in Path(mem).glob("*.md")}
    run(["--dir", mem, "search", "tea or coffee"])
    run(["--dir", mem, "inject", "-q", "tea or coffee", "--session", "s"])
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in Path(mem).glob("*.md")} == before


def test_bench_command_small() -> None:
    code, out, _ = run(["bench", "--memories", "20", "--lang", "mixed", "--repeat", "3", "--json"])
    assert code == 0
    report = json.loads(out)
    assert report["memories"] == 20 and report["warm_inject"]["median"] > 0
    assert report["warm_inject_ratio"] > 0 and report["search"]["min"] <= report["search"]["median"]
    assert report["warm_hook"]["min"] <= report["warm_hook"]["median"] <= report["warm_hook"]["max"]
    assert report["bare_python"]["median"] > 0 and report["peak_rss_mb"]["hook"] > 0
    start = report["session_start"]
    assert start["min"] <= start["median"] <= start["max"] and report["peak_rss_mb"]["start"] > 0
    assert report["session_start_ratio"] == start["median"] / report["bare_python"]["median"]
    hook, grep, jieba = report["warm_hook"], report["grep"], report["jieba_alone"]
    assert report["warm_hook_grep_ratio"] == hook["median"] / grep["median"] and grep["min"] > 0
    assert report["cold_build_jieba_ratio"] == report["cold_build"]["median"] / jieba["median"]
    resident = report["resident"]
    if sys.platform == "linux":  # every timed hook handed over, whatever this process's setting
        assert resident["resident_ran"] == resident["resident_timed"] == 6
        ratio = resident["warm_hook_resident"]["median"] / report["bare_python"]["median"]
        assert resident["warm_hook_resident_ratio"] == ratio
        assert not _bench_residents()  # stopped after the bench
    else:
        assert resident is None


def _bench_residents() -> list[str]:
    """Processes still running with a bench's private folder in their environment."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if (
                b"/sagemem-bench-" in environ.read_bytes()
                and b"daemon" in environ.with_name("cmdline").read_bytes()
            ):
                found.append(environ.parent.name)
        except OSError:
            continue
    return found


BAD = b"bad\xff".decode("utf-8", "surrogateescape")  # what the system makes of `$'bad\xff'`


@pytest.mark.parametrize(
    "args, option",
    [
        (["update", "project_deploy.md", "--expected-version", "0" * 12, "--reason", BAD], "'--reason'"),
        (["write", "project_deploy.md", "--expected-version", "0" * 12, "--reason", BAD], "'--reason'"),
        (["update", "project_deploy.md", "--expected-version", "0" * 12, "--writer", BAD], "'--writer'"),
        (["new", "--type", "project", "--name", BAD, "--description", "d", "--body", "b"], "'--name'"),
        (["archive", "project_deploy.md", "--reason", BAD], "'--reason'"),
        (["cite", "project_deploy.md", "--receipt", BAD], "'--receipt'"),
        (["search", BAD], "'QUERY'"),
        (["read", BAD], "'FILE'"),
        (["snapshot", "create", "--label", BAD], "'--label'"),
    ],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error_and_changes_nothing(
    mem: str, args: list[str], option: str
) -> None:
    MemoryStore(Path(mem)).create(type="project", name="deploy", description="d", body="b")
    folder = Path(mem)
    before = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "locks" not in p.parts}
    code, out, err = run(["--dir", mem, *args], "new content")
    assert code == 2 and f"Invalid value for {option}: is not UTF-8 text (character 4" in err, err
    assert "Traceback" not in err and "\udcff" not in err
    after = {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and "locks" not in p.parts}
    assert after == before


def test_a_refusal_kept_from_any_caller_holds_text_every_reader_can_print(mem: str) -> None:
    """The library is called with whatever a caller has: a lone surrogate in a writer's words
    is kept as U+FFFD, and the queue still reads and prints."""
    from sagemem import VersionConflict

    store = MemoryStore(Path(mem))
    memory = store.create(type="project", name="deploy", description="d", body="b")
    with pytest.raises(VersionConflict) as refused:
        store.update(memory.file, expected_version="0" * 64, reason=BAD, writer=BAD, description="e")
    assert refused.value.kept
    [kept] = store.conflicts()
    assert kept.reason == kept.writer == "bad\ufffd"
    code, out, _ = run(["--dir", mem, "conflicts", "--json"])
    assert code == 0 and json.loads(out)[0]["reason"] == "bad\ufffd"


def test_json_output_of_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    """A path is taken as the system gives it; JSON output spells it with escapes."""
    folder = str(tmp_path / "x") + BAD
    done = subprocess.run(
        [sys.executable, "-m", "sagemem", "--dir", folder, "path", "--json"],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"},  # a UTF-8 terminal's stdout
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memory_dir"] == folder


def test_an_empty_session_id_is_refused(mem: str) -> None:
    """An unset `$SESSION_ID` in `--session "$SESSION_ID"`: refused, not a session named ""."""
    run(["--dir", mem, "new", "--type", "project", "--name", "d", "--description", "how we deploy"])
    for empty in ("", "  "):
        code, out, err = run(["--dir", mem, "inject", "--query", "how do we deploy?", "--session", empty])
        assert code == 2 and out == "" and "--session" in err and "is empty" in err
    sessions = Path(mem, ".sagemem", "sessions")
    assert not sessions.exists() or list(sessions.iterdir()) == []  # no ledger for a session ""


def test_update_body_keeps_the_blank_line_and_ends_with_a_newline(mem: str) -> None:
    run(["--dir", mem, "new", "--type", "project", "--name", "d", "--description", "x", "--body", "first"])
    path = Path(mem, "project_d.md")
    for body, eol in (("second body", "\n"), ("third\nbody", "\r\n")):
        if eol == "\r\n":
            path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
        version = json.loads(run(["--dir", mem, "read", "project_d.md", "--json"])[1])["version"]
        code, _, err = run(
            ["--dir", mem, "update", "project_d.md", "--expected-version", version, "--body", body]
        )
        assert code == 0, err
        text = path.read_bytes().decode()
        assert text.endswith(f"---{eol}{eol}{body.replace(chr(10), eol)}{eol}"), repr(text)
