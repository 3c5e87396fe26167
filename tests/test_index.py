from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from sagemem import MemoryStore
from sagemem.store import index as index_module
from sagemem.store.index import check, entries, entry_line, parse_entry, rebuild, upsert
from sagemem.store.memory import parse_memory
from sagemem.store.names import RESERVED, name_key

from .conftest import write_file


def mem(file: str, name: str = "", description: str = "") -> object:
    text = f"---\nname: {name}\ndescription: {description}\n---\n" if name or description else ""
    return parse_memory(file, text.encode())


def test_entry_line_format() -> None:
    assert entry_line("project_x.md", "X", "does x") == "- [X](project_x.md) — does x"
    assert entry_line("a.md", "a", "") == "- [a](a.md)"
    long = "w" * 200
    line = entry_line("a.md", "a", long)
    assert line.endswith("…") and len(line.split(" — ", 1)[1]) == 120
    assert entry_line("my file.md", "t [1]", "d") == "- [t \\[1\\]](my%20file.md) — d"


def test_parse_entry_variants() -> None:
    assert parse_entry("- [X](x.md) — hi").target == "x.md"
    assert parse_entry("* [X]( x.md ) - hi").description == "hi"
    assert parse_entry("  + [T](<my file.md>)").target == "my file.md"
    assert parse_entry("- [T](my%20file.md)").target == "my file.md"
    assert parse_entry("- [X](x.md) — -v flag").description == "-v flag"
    for not_entry in [
        "See [X](x.md).",
        "- [site](https://x.md)",
        "- [A](archive/a.md)",
        "- [T](t.txt)",
        "- [Setup](readme.md#setup)",
        "- [Log](session-log.md)",
    ]:
        assert parse_entry(not_entry) is None


def test_upsert_appends_then_updates_in_place() -> None:
    text = "# Memory\n\nMy notes about this project.\n\n## Team\n- [Other](other.md) — keep me\n"
    a = mem("project_a.md", "A", "first")
    once = upsert(text, a)
    assert once == text + "- [A](project_a.md) — first\n"
    assert upsert(once, a) == once
    changed = upsert(once, mem("project_a.md", "A", "second"))
    assert changed == text + "- [A](project_a.md) — second\n"


def test_upsert_on_empty_index_adds_heading() -> None:
    assert upsert("", mem("a.md", "A", "d")) == "# Memory\n\n- [A](a.md) — d\n"


def test_upsert_keeps_crlf_and_missing_final_newline() -> None:
    text = "# Memory\r\n- [B](b.md) — b"
    out = upsert(text, mem("a.md", "A", "d"))
    assert out == "# Memory\r\n- [B](b.md) — b\r\n- [A](a.md) — d\r\n"


def test_check_and_rebuild() -> None:
    memories = {
        "a.md": mem("a.md", "A", "alpha"),
        "b.md": mem("b.md", "B", "beta"),
        "c.md": mem("c.md", "C", "gamma"),
    }
    text = (
        "# Memory\n\nnotes stay\n"
        "- [A](a.md) — alpha\n"
        "- [Gone](gone.md) — deleted file\n"
        "- [B](b.md) — old beta\n"
        "- [A](A.md) — alpha\n"
        "## More\n"
    )
    report = check(text, memories.keys(), memories)
    assert [e.target for e in report.dangling] == ["gone.md"]
    assert [e.line for e in report.duplicates] == [7]
    assert [e.target for e in report.stale] == ["b.md"]
    assert report.unlisted == ("c.md",)
    assert not report.ok
    fixed = rebuild(text, memories.keys(), memories)
    assert fixed == (
        "# Memory\n\nnotes stay\n- [A](a.md) — alpha\n- [B](b.md) — beta\n## More\n- [C](c.md) — gamma\n"
    )
    assert rebuild(fixed, memories.keys(), memories) == fixed
    assert check(fixed, memories.keys(), memories).ok


def test_rebuild_keeps_lines_of_unparseable_files_and_lists_them() -> None:
    text = "- [Broken](broken.md) — whatever the person wrote\n"
    out = rebuild(text, ["broken.md", "new.md"], {})
    assert out == text + "- [new](new.md)\n"


def test_rebuild_keeps_the_persons_own_lines() -> None:
    memories = {"a.md": mem("a.md", "A", "alpha")}
    text = (
        "# Memory\n"
        "- [A](a.md) — alpha\n"
        "## My notes\n"
        "- [the session log](session-log.md) — where the journal is\n"
        "- [A, setup part](a.md#setup) — read this first\n"
        "- [deploy caveat](a.md) — see the second paragraph\n"
    )
    report = check(text, memories.keys(), memories)
    assert report.ok
    assert rebuild(text, memories.keys(), memories) == text


def test_annotation_before_the_entry_is_not_mistaken_for_it() -> None:
    memories = {"a.md": mem("a.md", "A", "alpha v2")}
    text = "- [read me first](a.md) — my note\n- [A](a.md) — alpha\n- [A](a.md) — alpha, old merge side\n"
    report = check(text, memories.keys(), memories)
    assert [e.line for e in report.stale] == [2]
    assert [e.line for e in report.duplicates] == [3]
    assert (
        rebuild(text, memories.keys(), memories)
        == "- [read me first](a.md) — my note\n- [A](a.md) — alpha v2\n"
    )


file_names = (
    st.text(
        st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\:"), min_size=1, max_size=20
    )
    .map(lambda s: s.strip(".") + ".md")
    .filter(lambda s: len(s) > 3 and ".." not in s)
)
titles = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)


@settings(max_examples=300)
@given(file_names, titles, titles)
def test_entry_lines_round_trip(file: str, title: str, description: str) -> None:
    line = entry_line(file, title, description)
    entry = parse_entry(line)
    if name_key(file) in RESERVED:
        assert entry is None
        return
    assert entry is not None
    assert entry.target == file
    assert entry.title == " ".join(title.split())
    said = " ".join(description.split())
    cap = index_module.MAX_DESCRIPTION_CHARS
    assert entry.description == (said if len(said) <= cap else said[: cap - 1] + "…")


def test_entries_line_numbers() -> None:
    assert [(e.line, e.target) for e in entries("# M\n\n- [a](a.md)\ntext\n- [b](b.md)\n")] == [
        (3, "a.md"),
        (5, "b.md"),
    ]


def test_rebuild_only_rewrites_when_bytes_change(store: MemoryStore) -> None:
    store.create(type="project", name="a", description="alpha")
    index_path = store.memory_dir / "MEMORY.md"
    os.utime(index_path, (1_000_000, 1_000_000))
    assert store.rebuild_index() is False
    assert index_path.stat().st_mtime == 1_000_000
    write_file(store, "project_b.md", "---\ndescription: beta\n---\n")
    assert store.rebuild_index() is True
    assert "- [project_b](project_b.md) — beta" in index_path.read_text()
