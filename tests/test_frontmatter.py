from __future__ import annotations

import time

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sagemem.store.errors import InvalidMemory
from sagemem.store.frontmatter import DELETE, parse, render_key, set_keys, set_nested, split

DOC = """---
# who wrote this
name: deploy flow
description: "How we deploy: staging first"   # inline comment
tags:
  - deploy
  - ci

metadata:
  node_type: memory
  type: project
originSessionId: abc-123
---

Body line one.
  indented body line

last line without newline"""


def test_split_is_exact() -> None:
    parts = split(DOC, "x.md")
    assert parts.head + parts.matter + parts.tail + parts.body == DOC
    assert parts.body.startswith("\nBody line one.")
    assert parts.body_line == 14
    assert parts.eol == "\n"


def test_no_frontmatter_is_all_body() -> None:
    parts = split("# Title\n\ntext\n", "x.md")
    assert not parts.has_frontmatter
    assert parts.body == "# Title\n\ntext\n"
    assert parts.body_line == 1


def test_unclosed_frontmatter_is_invalid() -> None:
    with pytest.raises(InvalidMemory, match="no closing '---'"):
        split("---\nname: x\n\nbody\n", "x.md")


def test_crlf_file_is_read() -> None:
    text = DOC.replace("\n", "\r\n")
    parts = split(text, "x.md")
    assert parts.eol == "\r\n"
    meta = parse(parts.matter, "x.md")
    assert meta["description"] == "How we deploy: staging first"
    assert meta["tags"] == ["deploy", "ci"]


@pytest.mark.parametrize("matter", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_is_invalid(matter: str) -> None:
    with pytest.raises(InvalidMemory, match="must be a YAML mapping"):
        parse(matter, "x.md")


def test_empty_frontmatter_is_an_empty_mapping() -> None:
    assert parse("", "x.md") == {}
    assert parse("# only a comment\n", "x.md") == {}


def test_invalid_yaml_names_the_line() -> None:
    with pytest.raises(InvalidMemory, match=r"not valid YAML at line 4: .* at line 3") as caught:
        parse("name: x\ndescription: [unclosed\n", "bad.md")
    assert caught.value.file == "bad.md"


def test_python_tags_are_refused() -> None:
    with pytest.raises(InvalidMemory, match="not valid YAML"):
        parse("x: !!python/object/apply:os.system ['true']\n", "x.md")


def test_yaml_bomb_is_refused_quickly() -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{','.join(['*' + prev] * 9)}]")
    started = time.monotonic()
    with pytest.raises(InvalidMemory, match="aliases"):
        parse("\n".join(lines) + "\n", "bomb.md")
    assert time.monotonic() - started < 5  # generous: a real expansion would take minutes and GBs


def test_single_alias_is_refused() -> None:
    with pytest.raises(InvalidMemory, match="aliases"):
        parse("a: &x 1\nb: *x\n", "x.md")


def test_star_in_a_value_is_not_an_alias() -> None:
    assert parse("description: 'use *args and **kwargs'\n", "x.md") == {
        "description": "use *args and **kwargs"
    }


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="needs libyaml, which accepts these tabs")
@pytest.mark.parametrize("matter", ["name: x\t\nb: y\n", "name: x\n \t\nb: y\n"])
def test_a_star_elsewhere_does_not_change_whether_a_block_parses(matter: str) -> None:
    expected = {"name": "x", "b": "y"}
    assert parse(matter, "x.md") == expected
    assert parse(matter + "c: 'use *args'\n", "x.md") == {**expected, "c": "use *args"}


def test_deep_nesting_is_invalid_not_a_crash() -> None:
    with pytest.raises(InvalidMemory):
        parse("a: " + "[" * 20000 + "]" * 20000 + "\n", "x.md")


def test_oversize_frontmatter_is_invalid() -> None:
    matter = "".join(f"k{i}: {'v' * 60}\n" for i in range(1200))
    with pytest.raises(InvalidMemory, match="larger than 64 KiB"):
        parse(matter, "x.md")


def test_set_key_changes_only_that_key() -> None:
    new = set_keys(DOC, {"description": "How we deploy to prod"}, "x.md")
    old_lines, new_lines = DOC.split("\n"), new.split("\n")
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=False) if a != b]
    assert changed == [
        (
            'description: "How we deploy: staging first"   # inline comment',
            "description: How we deploy to prod",
        )
    ]
    assert len(old_lines) == len(new_lines)


def test_set_multiline_key_replaces_its_whole_block() -> None:
    new = set_keys(DOC, {"tags": ["a", "b c"]}, "x.md")
    assert "tags: [a, b c]\n\nmetadata:" in new
    assert "  - deploy" not in new
    meta = parse(split(new, "x.md").matter, "x.md")
    assert meta["tags"] == ["a", "b c"]
    assert meta["metadata"] == {"node_type": "memory", "type": "project"}
    assert new.endswith(split(DOC, "x.md").body)


def test_new_key_is_appended_and_delete_removes() -> None:
    new = set_keys(DOC, {"baseline": True, "originSessionId": DELETE}, "x.md")
    matter = split(new, "x.md").matter
    assert matter.endswith("baseline: true\n")
    assert "originSessionId" not in matter
    assert "# who wrote this" in matter


def test_set_keys_keeps_crlf() -> None:
    text = DOC.replace("\n", "\r\n")
    new = set_keys(text, {"description": "x", "aliases": ["迁移"]}, "x.md")
    assert "\n" not in new.replace("\r\n", "")
    assert "description: x\r\n" in new
    assert "aliases: [迁移]\r\n" in new


def test_set_keys_adds_frontmatter_to_a_plain_file() -> None:
    new = set_keys("# Notes\nbody\n", {"description": "d"}, "x.md")
    assert new == "---\ndescription: d\n---\n# Notes\nbody\n"


def test_set_nested_type_in_place() -> None:
    new = set_nested(DOC, "metadata", "type", "reference", "x.md")
    assert new == DOC.replace("  type: project", "  type: reference")


def test_values_that_need_quotes_are_quoted() -> None:
    for value in ["a: b", "#hash", "- dash", "yes", "2026-01-01", "'q'", "x # y", "多行\n文本", "", "null"]:
        line = render_key("description", value)
        assert yaml.safe_load(line) == {"description": value}


# -- property tests --------------------------------------------------------------------------

keys = st.one_of(
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,12}", fullmatch=True),
    st.text(st.characters(whitelist_categories=("L",)), min_size=1, max_size=6),
)
scalars = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(10**9), max_value=10**9),
    st.booleans(),
    st.none(),
)
values = st.one_of(scalars, st.lists(st.text(max_size=15), max_size=4))
bodies = st.text(max_size=200)


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, dict[str, object], str, list[tuple[str | None, str]]]:
    """A frontmatter document with comments between keys, its values, EOL, and its pieces."""
    meta = draw(st.dictionaries(keys, values, max_size=6))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    pieces: list[tuple[str | None, str]] = []
    for key, value in meta.items():
        if draw(st.booleans()):
            pieces.append((None, "# a comment" + eol))
        pieces.append((key, render_key(key, value, eol)))
    body = draw(bodies)
    return f"---{eol}{''.join(p for _, p in pieces)}---{eol}{body}", meta, eol, pieces


Doc = tuple[str, dict[str, object], str, list[tuple[str | None, str]]]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), keys, values)
def test_round_trip_changes_one_key_and_nothing_else(doc: Doc, key: str, value: object) -> None:
    text, meta, eol, pieces = doc
    new = set_keys(text, {key: value}, "x.md")
    before, after = split(text, "x.md"), split(new, "x.md")
    assert after.body == before.body  # byte for byte
    assert parse(after.matter, "x.md") == {**meta, key: value}
    # Every other key's lines and every comment survive byte for byte, in order.
    position = 0
    for owner, piece in pieces:
        if owner != key:
            found = after.matter.find(piece, position)
            assert found >= 0, piece
            position = found + len(piece)
    if eol == "\r\n":
        assert "\n" not in (after.head + after.matter + after.tail).replace("\r\n", "")


@settings(max_examples=200)
@given(documents())
def test_parse_of_rendered_document_gives_back_the_values(doc: Doc) -> None:
    text, meta, _, _ = doc
    assert parse(split(text, "x.md").matter, "x.md") == meta


@settings(max_examples=200)
@given(documents(), keys)
def test_setting_the_same_value_twice_is_stable(doc: Doc, key: str) -> None:
    once = set_keys(doc[0], {key: "v"}, "x.md")
    assert set_keys(once, {key: "v"}, "x.md") == once


@pytest.mark.parametrize("value", ["a\n---\nb", "a\n...\nb", "---", "x\n\n\n  y\n"])
def test_values_that_look_like_fences_stay_inside(value: str) -> None:
    text = "---\nname: n\n---\nbody\n"
    new = set_keys(text, {"description": value}, "x.md")
    parts = split(new, "x.md")
    assert parse(parts.matter, "x.md") == {"name": "n", "description": value}
    assert parts.body == "body\n"


HAND_WRITTEN = """---
name: deploy   # short name
tags:
  - deploy   # why this tag
  # - retired-tag
  - ci
aliases: [ship, release]
description: >-
  folded text
  over lines
---
body
"""


def test_unchanged_values_keep_their_hand_written_lines() -> None:
    new = set_keys(
        HAND_WRITTEN, {"tags": ["deploy", "ci"], "aliases": ["ship", "release"], "name": "x"}, "x.md"
    )
    assert new == HAND_WRITTEN.replace("name: deploy   # short name", "name: x")
    assert (
        set_keys(HAND_WRITTEN, {"gone": DELETE, "description": "folded text over lines"}, "x.md")
        == HAND_WRITTEN
    )


def test_new_frontmatter_follows_the_files_line_endings_and_bom() -> None:
    assert (
        set_keys("\ufeffbody\r\nmore\r\n", {"name": "n"}, "x.md")
        == "\ufeff---\r\nname: n\r\n---\r\nbody\r\nmore\r\n"
    )
