from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemem.store.errors import InvalidName
from sagemem.store.names import check_name, is_memory_name, name_key, new_file_name, slugify


@pytest.mark.parametrize(
    "name, rule",
    [
        ("", "non-empty"),
        ("a/b.md", "single path segment"),
        ("a\\b.md", "single path segment"),
        ("../x.md", "single path segment"),
        ("a..b.md", "'..'"),
        ("c:x.md", "':'"),
        ("bad\x00.md", "control characters"),
        ("line\nbreak.md", "control characters"),
        (".hidden.md", "start with '.'"),
        ("notes.txt", "end in '.md'"),
        (".md", "start with '.'"),
        ("MEMORY.md", "reserved"),
        ("memory.MD", "reserved"),
        ("Session-Log.md", "reserved"),
        ("x" * 198 + ".md", "bytes long"),
    ],
)
def test_bad_names_are_refused_with_the_rule(name: str, rule: str) -> None:
    with pytest.raises(InvalidName) as caught:
        check_name(name)
    assert rule in str(caught.value)


@pytest.mark.parametrize("name", ["project_x.md", "user_偏好.md", "Notes.MD", "a-b c.md", "ü.md"])
def test_good_names_pass_unchanged(name: str) -> None:
    assert check_name(name) == name


def test_names_compare_nfc_normalised_and_case_insensitively() -> None:
    nfd = "Cafe\u0301.md"
    nfc = "café.md"
    assert name_key(nfd) == name_key(nfc) == name_key("CAFÉ.MD")
    assert name_key("a.md") != name_key("b.md")


@pytest.mark.parametrize(
    "type_, name, expected",
    [
        ("project", "Deploy flow", "project_deploy_flow.md"),
        ("project", "project deploy-flow!", "project_deploy_flow.md"),
        ("user", "偏好 设置", "user_偏好_设置.md"),
        ("reference", "  ", "reference_note.md"),
        ("feedback", "v2.3 API: ERR_42", "feedback_v2_3_api_err_42.md"),
    ],
)
def test_new_file_names(type_: str, name: str, expected: str) -> None:
    assert new_file_name(type_, name) == expected
    check_name(expected)


def test_slug_is_bounded() -> None:
    assert len(slugify("word " * 100)) <= 60


def _accepted(name: str) -> bool:
    try:
        check_name(name)
    except InvalidName:
        return False
    return True


@given(
    st.one_of(
        st.text(alphabet=st.sampled_from("aZ09._-: \\/\t\x7fé.mdMD部"), max_size=12).map(lambda s: s + ".md"),
        st.text(max_size=12),
        st.sampled_from(["MEMORY.md", "memory.MD", "Session-Log.md", ".md", "a..b.md", "x" * 198 + ".md"]),
    )
)
def test_the_fast_listing_test_agrees_with_check_name(name: str) -> None:
    assert is_memory_name(name) == _accepted(name)


def test_a_name_that_is_not_utf8_is_refused_not_a_crash() -> None:
    name = b"caf\xe9.md".decode("utf-8", "surrogateescape")  # a Latin-1 name from an old archive
    with pytest.raises(InvalidName, match="UTF-8"):
        check_name(name)
    assert not is_memory_name(name)
