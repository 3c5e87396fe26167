from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagemem.store.errors import InvalidName
from sagemem.store.names import (
    check_name,
    check_stored_name,
    is_memory_name,
    is_stored_name,
    name_key,
    new_file_name,
    slugify,
)


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
    for check in (check_name, check_stored_name):  # a kept record's name passes the same path rule
        with pytest.raises(InvalidName) as caught:
            check(name)
        assert rule in str(caught.value)
        assert not is_stored_name(name)


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


TOKEN = "ghp_" + "Q7w" * 12  # a GitHub token's shape


@pytest.mark.parametrize(
    "name",
    [f"{TOKEN}.md", f"reference_{TOKEN}.md", f"project_AKIA{'Q7W3' * 4}.md", "db_password=Tr0ub4dor3x.md"],
)
def test_a_name_holding_a_secret_is_refused_without_repeating_it(name: str) -> None:
    with pytest.raises(InvalidName) as caught:
        check_name(name)
    assert "keep secrets out of file names" in str(caught.value)
    assert "[REDACTED by sagemem]" in str(caught.value) and name[:-3] not in str(caught.value)
    assert not is_memory_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "project_api_key_rotation.md",
        "user_password_policy.md",
        "reference_token_budget.md",
        "feedback_secret_santa.md",
        "reference_internationalization_checklist.md",
        "project_3f2a9c1d4b5e6f708192a3b4c5d6e7f8.md",  # a hash is no secret
        "密码策略.md",
    ],
)
def test_names_that_only_talk_about_secrets_pass(name: str) -> None:
    assert check_name(name) == name and is_memory_name(name)


@given(
    st.lists(
        st.sampled_from([TOKEN, "Q7w", "ghp_", "AKIA", "password", "=", "是", "Tr0ub4dor3", "_", "-", "x"]),
        max_size=6,
    ).map(lambda parts: "".join(parts) + ".md")
)
def test_the_fast_listing_test_agrees_with_check_name_on_secrets(name: str) -> None:
    assert is_memory_name(name) == _accepted(name)


@given(
    st.one_of(
        st.text(alphabet=st.sampled_from("aZ09._-: \\/\t\x7fé.mdMD部"), max_size=12).map(lambda s: s + ".md"),
        st.text(max_size=12),
        st.sampled_from(["MEMORY.md", "Session-Log.md", ".md", "a..b.md", "x" * 198 + ".md", f"{TOKEN}.md"]),
    )
)
def test_the_fast_stored_name_test_agrees_with_the_path_rule(name: str) -> None:
    try:
        check_stored_name(name)
        accepted = True
    except InvalidName:
        accepted = False
    assert is_stored_name(name) == accepted


@pytest.mark.parametrize("name", ["project_token=abcdef1234567890abcd.md", f"reference_{TOKEN}.md"])
def test_a_name_kept_in_a_record_needs_only_the_path_rule(name: str) -> None:
    """A snapshot, a conflict record or the ledger may hold a name that was a memory's before
    the secret rule refused it: it is still a name a file can have, read and put back."""
    with pytest.raises(InvalidName, match="keep secrets out of file names"):
        check_name(name)
    assert check_stored_name(name) == name and is_stored_name(name)
