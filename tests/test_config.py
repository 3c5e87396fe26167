from __future__ import annotations

from pathlib import Path

from sagemem.store.config import locate


def test_explicit_dir_wins(tmp_path: Path) -> None:
    env = {"SAGEMEM_DIR": str(tmp_path / "env"), "HOME": str(tmp_path)}
    loc = locate(tmp_path / "explicit", env=env, cwd=tmp_path)
    assert loc.memory_dir == tmp_path / "explicit"
    assert loc.rule == "--dir"
    assert loc.state_dir == tmp_path / "explicit" / ".sagemem"


def test_relative_dir_is_taken_from_cwd(tmp_path: Path) -> None:
    loc = locate("mem", env={"HOME": str(tmp_path)}, cwd=tmp_path / "work")
    assert loc.memory_dir == tmp_path / "work" / "mem"


def test_env_order(tmp_path: Path) -> None:
    both = {"SAGEMEM_DIR": "/a", "SAGE_MEM_DIR": "/b", "HOME": str(tmp_path)}
    assert locate(env=both, cwd=tmp_path).rule == "SAGEMEM_DIR"
    assert locate(env=both, cwd=tmp_path).memory_dir == Path("/a")
    legacy = {"SAGE_MEM_DIR": "/b", "HOME": str(tmp_path)}
    assert locate(env=legacy, cwd=tmp_path).memory_dir == Path("/b")
    assert locate(env=legacy, cwd=tmp_path).rule == "SAGE_MEM_DIR"


def test_empty_env_values_are_ignored(tmp_path: Path) -> None:
    loc = locate(env={"SAGEMEM_DIR": "", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert loc.rule.startswith("user memory")


def test_project_memory_is_found_walking_up(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".sagemem" / "memory").mkdir(parents=True)
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    loc = locate(env={"HOME": str(tmp_path / "home")}, cwd=deep)
    assert loc.memory_dir == project / ".sagemem" / "memory"
    assert loc.rule.startswith("project memory")


def test_nearest_project_memory_wins(tmp_path: Path) -> None:
    (tmp_path / ".sagemem" / "memory").mkdir(parents=True)
    inner = tmp_path / "inner"
    (inner / ".sagemem" / "memory").mkdir(parents=True)
    assert locate(env={"HOME": "/nowhere"}, cwd=inner).memory_dir == inner / ".sagemem" / "memory"


def test_user_memory_is_the_fallback_and_not_mistaken_for_project(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".sagemem" / "memory").mkdir(parents=True)
    work = home / "code"
    work.mkdir()
    loc = locate(env={"HOME": str(home)}, cwd=work)
    assert loc.memory_dir == home / ".sagemem" / "memory"
    assert loc.rule.startswith("user memory")


def test_state_dir_order(tmp_path: Path) -> None:
    env = {"SAGEMEM_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path)}
    assert locate("m", env=env, cwd=tmp_path).state_dir == tmp_path / "state"
    assert locate("m", "s2", env=env, cwd=tmp_path).state_dir == tmp_path / "s2"
    assert locate("m", env=env, cwd=tmp_path).state_rule == "SAGEMEM_STATE_DIR"


def test_settings_file_then_environment_take_effect_on_the_next_call(tmp_path: Path) -> None:
    from sagemem.store.config import Settings, load_settings

    state = tmp_path / "state"
    state.mkdir()
    assert load_settings(state, {}) == Settings()
    (state / "settings.json").write_text('{"budget": 8192, "limit": 3, "gate": 0.6, "lang": "zh"}')
    loaded = load_settings(state, {})
    assert (loaded.budget, loaded.limit, loaded.gate, loaded.lang) == (8192, 3, 0.6, "zh")
    env = {"SAGEMEM_BUDGET": "16384", "SAGEMEM_LIMIT": "7", "SAGEMEM_LANG": "en", "SAGEMEM_DEBUG": "1"}
    loaded = load_settings(state, env)
    assert (loaded.budget, loaded.limit, loaded.gate, loaded.lang, loaded.debug) == (
        16384,
        7,
        0.6,
        "en",
        True,
    )


def test_bad_settings_are_ignored(tmp_path: Path) -> None:
    from sagemem.store.config import Settings, load_settings

    (tmp_path / "settings.json").write_text('{"budget": 10, "limit": "many", "gate": 2.5, "cut": null}')
    assert load_settings(tmp_path, {"SAGEMEM_CANDIDATES": "nan", "SAGEMEM_LIMIT": "2.5"}) == Settings()
    (tmp_path / "settings.json").write_text("not json")
    assert load_settings(tmp_path, {}) == Settings()
