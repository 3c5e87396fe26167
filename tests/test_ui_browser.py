"""`sagemem ui` in a real browser: headless Chromium (Debian's `chromium` and `chromium-driver`)
driven by selenium. `.ci/run` installs both; where they are missing these tests are skipped.

A screenshot of each main page is saved in UI_SCREENSHOTS (default: a `ui-shots` folder in
the test's temp dir), as `docs/ui.md`'s pictures are.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sagemem import MemorySet, MemoryStore
from sagemem.store.errors import VersionConflict
from sagemem.ui.server import Server

from .memories import DANCE, MUSIC, OLD_PLAN, make
from .test_git import git
from .test_ui import propose_archiving_the_old_plan

webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="needs chromium and chromedriver")

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ready  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return make(tmp_path / "mem", {**DANCE, "project_old_plan.md": OLD_PLAN, "reference_music.md": MUSIC})


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("UI_SCREENSHOTS") or tmp_path / "ui-shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def page(store: MemoryStore | MemorySet, size: str = "1200,900", lang: str = "en-US") -> Iterator[Any]:
    """A headless Chromium showing the list of a `sagemem ui` server over `store` (or a set)."""
    server = Server(store)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--window-size={size}",
        f"--lang={lang}",
    ):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"intl.accept_languages": lang})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    try:
        driver.get(server.url)
        WebDriverWait(driver, 20).until(
            ready.presence_of_element_located((By.CSS_SELECTOR, "#memory-list li"))
        )
        yield driver
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser(store: MemoryStore) -> Iterator[Any]:
    with page(store) as driver:
        driver.execute_script("window.confirm = () => true")  # the page confirms before it moves anything
        yield driver


def wait(driver: Any, condition: Any, seconds: float = 20) -> Any:
    return WebDriverWait(driver, seconds).until(condition)


def listed(driver: Any) -> list[str]:
    return [li.get_attribute("data-file") for li in driver.find_elements(By.CSS_SELECTOR, "#memory-list li")]


def open_memory(driver: Any, file: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'#memory-list li[data-file="{file}"]').click()
    wait(driver, ready.presence_of_element_located((By.ID, "raw")))


def test_the_list_filters_by_tag_and_opens_a_memory(browser: Any, shots: Path) -> None:
    assert "project_old_plan.md" in listed(browser) and "reference_music.md" in listed(browser)
    assert not browser.find_elements(By.ID, "scope-chips")  # one scope: no scope to choose
    browser.save_screenshot(str(shots / "ui-list.png"))
    browser.find_element(By.CSS_SELECTOR, '.chip[data-tag="music"]').click()
    wait(browser, lambda d: listed(d) == ["reference_music.md"])
    open_memory(browser, "reference_music.md")
    assert [li.text for li in browser.find_elements(By.CSS_SELECTOR, ".rendered li")] == ["salsa", "tango"]
    assert "tags: [music]" in browser.find_element(By.ID, "raw").text
    browser.save_screenshot(str(shots / "ui-memory.png"))


def test_edit_and_save_then_a_change_behind_the_page_shows_both_versions(
    browser: Any, store: MemoryStore, shots: Path
) -> None:
    open_memory(browser, "project_old_plan.md")
    browser.find_element(By.ID, "edit").click()
    editor = wait(browser, ready.presence_of_element_located((By.ID, "editor")))
    editor.send_keys("\nSaved from the page.")
    browser.find_element(By.ID, "save").click()
    wait(browser, lambda d: "Saved from the page." in d.find_element(By.ID, "raw").text)
    assert store.read("project_old_plan.md").text.endswith("Saved from the page.")
    # The file changes on disk while the page has it open for editing.
    browser.find_element(By.ID, "edit").click()
    editor = wait(browser, ready.presence_of_element_located((By.ID, "editor")))
    path = store.memory_dir / "project_old_plan.md"
    path.write_text(path.read_text() + "\nChanged by someone else.\n")
    editor.send_keys("\nMy second change.")
    browser.find_element(By.ID, "save").click()
    compare = wait(browser, ready.presence_of_element_located((By.ID, "compare")))
    assert "Changed by someone else." in browser.find_element(By.ID, "theirs").text
    assert "My second change." in browser.find_element(By.ID, "mine").text
    assert "Changed by someone else." in path.read_text() and "My second change." not in path.read_text()
    assert len(store.conflicts()) == 1
    browser.save_screenshot(str(shots / "ui-conflict.png"))
    assert compare.is_displayed()
    # The conflicts page lists it; keeping the refused write puts it on disk.
    badge = wait(browser, lambda d: d.find_element(By.ID, "badge-conflicts"))
    wait(browser, lambda d: badge.text.startswith("1 "))
    badge.click()
    keep = wait(browser, ready.element_to_be_clickable((By.CSS_SELECTOR, "button[data-keep='proposed']")))
    browser.save_screenshot(str(shots / "ui-conflicts.png"))
    keep.click()
    wait(browser, lambda d: not store.conflicts())
    assert "My second change." in path.read_text()


def test_a_duplicate_name_says_how_it_ends_and_closing_it_clears_the_count(store: MemoryStore) -> None:
    with pytest.raises(VersionConflict):
        store.create(type="reference", name="music", description="Another music note")
    with page(store) as browser:
        badge = wait(browser, lambda d: d.find_element(By.ID, "badge-conflicts"))
        wait(browser, lambda d: badge.text.startswith("1 "))
        badge.click()
        said = wait(
            browser, ready.presence_of_element_located((By.CSS_SELECTOR, "p.kind[data-kind='duplicate']"))
        )
        assert "name of one that exists" in said.text
        keep = browser.find_element(By.CSS_SELECTOR, "button[data-keep='disk']")
        assert keep.text == "Keep the existing memory"
        keep.click()
        wait(browser, lambda d: not store.conflicts())
        wait(browser, lambda d: d.find_element(By.ID, "badge-conflicts").text.startswith("0 "))
    assert store.get("reference_music.md").description != "Another music note"


def test_archive_and_restore(browser: Any, store: MemoryStore) -> None:
    open_memory(browser, "reference_music.md")
    browser.find_element(By.ID, "archive").click()
    wait(browser, ready.presence_of_element_located((By.ID, "restore")))
    assert not (store.memory_dir / "reference_music.md").exists()
    assert (store.memory_dir / "archive" / "reference_music.md").is_file()
    browser.find_element(By.ID, "restore").click()
    wait(browser, ready.presence_of_element_located((By.ID, "archive")))
    assert (store.memory_dir / "reference_music.md").is_file()


def test_the_other_pages_and_the_star_map(browser: Any, shots: Path) -> None:
    for tab, shown in (
        ("candidates", "archive-candidates"),
        ("health", "fix"),
        ("snapshots", "snapshots-none"),
        ("stars", "stars"),
    ):
        browser.find_element(By.CSS_SELECTOR, f'#tabs button[data-tab="{tab}"]').click()
        wait(browser, ready.presence_of_element_located((By.ID, shown)))
        time.sleep(0.2)
        browser.save_screenshot(str(shots / f"ui-{tab}.png"))
    # The star map drew something: some pixel of the canvas is not the background.
    lit = browser.execute_script(
        "const c = document.getElementById('stars'); const d = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data;"
        "for (let i = 0; i < d.length; i += 4) if (d[i] > 60 || d[i + 1] > 60 || d[i + 2] > 60) return true;"
        "return false;"
    )
    assert lit


def test_keyboard_chinese_labels_and_a_narrow_window(store: MemoryStore, shots: Path) -> None:
    with page(store, size="390,844", lang="zh-CN") as driver:
        labels = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#tabs button")]
        assert labels[0] == "记忆" and "星图" in labels
        # Nothing wider than the window: the layout reflows instead.
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        driver.save_screenshot(str(shots / "ui-narrow-zh.png"))
        # Keyboard only: focus the first memory and press Enter.
        first = driver.find_element(By.CSS_SELECTOR, "#memory-list li")
        driver.execute_script("arguments[0].focus()", first)
        first.send_keys("\n")
        wait(driver, ready.presence_of_element_located((By.ID, "raw")))


def star_position(browser: Any, file: str) -> tuple[float, float]:
    """Where the page drew `file`'s star, as the page itself keeps it."""
    script = "const s = starsPage.stars.find((s) => s.m.file === arguments[0]); return [s.x, s.y];"
    x, y = browser.execute_script(script, file)
    return x, y


def test_a_star_names_its_memory_on_hover_and_opens_it_on_click(browser: Any) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="stars"]').click()
    canvas = wait(browser, ready.presence_of_element_located((By.ID, "stars")))
    width, height = canvas.size["width"], canvas.size["height"]
    x, y = star_position(browser, "reference_music.md")
    actions = ActionChains(browser).move_to_element_with_offset(
        canvas, int(x - width / 2), int(y - height / 2)
    )
    actions.perform()
    tip = browser.find_element(By.ID, "star-tip")
    wait(browser, lambda d: tip.is_displayed() and "reference_music.md" in tip.text)
    ActionChains(browser).click().perform()
    wait(browser, lambda d: "tags: [music]" in d.find_element(By.ID, "raw").text)


def test_one_archive_candidate_is_archived_when_chosen(browser: Any, store: MemoryStore) -> None:
    browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="candidates"]').click()
    box = wait(
        browser, ready.element_to_be_clickable((By.CSS_SELECTOR, 'input[value="project_old_plan.md"]'))
    )
    assert not box.is_selected()  # nothing is chosen for the person
    box.click()
    browser.find_element(By.ID, "archive-candidates").click()
    wait(browser, lambda d: (store.memory_dir / "archive" / "project_old_plan.md").is_file())
    assert (store.memory_dir / "project_studio_opening.md").is_file()  # not chosen, not moved


def test_arrow_keys_move_between_tabs(browser: Any) -> None:
    from selenium.webdriver.common.keys import Keys

    first = browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="memories"]')
    first.send_keys(Keys.ARROW_RIGHT)
    wait(
        browser,
        ready.presence_of_element_located(
            (By.CSS_SELECTOR, '#tabs button[data-tab="candidates"][aria-selected="true"]')
        ),
    )
    focused = browser.switch_to.active_element
    assert focused.get_attribute("data-tab") == "candidates"


def test_the_scope_chips_show_every_scope_and_filter_the_list(tmp_path: Path, shots: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    make(root / ".sagemem" / "memory", {**DANCE, "reference_music.md": MUSIC})
    pnpm = "---\nname: pnpm\ndescription: The user prefers pnpm over npm\ntype: user\n---\n\nUse pnpm.\n"
    user = make(Path(os.environ["HOME"]) / ".sagemem" / "memory", {"user_pnpm.md": pnpm})
    with page(MemorySet.locate(cwd=root)) as driver:
        chips = driver.find_elements(By.CSS_SELECTOR, "#scope-chips .chip[data-scope]")
        assert [c.get_attribute("data-scope") for c in chips] == ["project", "user"]
        assert {"project:reference_music.md", "user:user_pnpm.md"} <= set(listed(driver))
        header = driver.find_element(By.ID, "where").text
        assert "project: " in header and f"user: {user.memory_dir}" in header
        driver.find_element(By.CSS_SELECTOR, '.chip[data-scope="user"]').click()
        wait(driver, lambda d: listed(d) == ["user:user_pnpm.md"])
        driver.save_screenshot(str(shots / "ui-scopes.png"))
        driver.find_element(By.CSS_SELECTOR, '.chip[data-scope="user"]').click()  # off again: every scope
        wait(driver, lambda d: "project:reference_music.md" in listed(d))
        # A new memory goes to the scope chosen in the form, whatever its type.
        driver.find_element(By.CSS_SELECTOR, ".toolbar .primary").click()
        scope = wait(driver, ready.presence_of_element_located((By.ID, "new-scope")))
        scope.find_element(By.CSS_SELECTOR, 'option[value="user"]').click()
        driver.find_element(By.CSS_SELECTOR, '#new-type option[value="reference"]').click()
        driver.find_element(By.ID, "new-name").send_keys("registry")
        driver.find_element(By.ID, "new-description").send_keys("Which npm registry the user points pnpm at")
        driver.find_element(By.ID, "create").click()
        wait(driver, ready.presence_of_element_located((By.ID, "raw")))
        assert (user.memory_dir / "reference_registry.md").is_file()
        assert not (root / ".sagemem" / "memory" / "reference_registry.md").exists()


def test_the_dream_page_shows_a_run_s_report_and_applies_its_proposals(
    store: MemoryStore, shots: Path
) -> None:
    run = propose_archiving_the_old_plan(store)
    with page(store) as browser:
        browser.execute_script("window.confirm = () => true")
        browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="dream"]').click()
        row = wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, "#dream-runs tbody tr")))
        assert run["id"] in row.text and "report" in row.text
        row.find_element(By.XPATH, ".//button[text()='Report']").click()
        wait(browser, lambda d: "the plan was replaced" in d.find_element(By.ID, "dream-report").text)
        browser.save_screenshot(str(shots / "ui-dream.png"))
        row.find_element(By.XPATH, ".//button[text()='Apply the proposals']").click()
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#dream-runs tbody tr")) == 2)
    assert not (store.memory_dir / "project_old_plan.md").exists()
    assert (store.memory_dir / "archive" / "project_old_plan.md").is_file()


def test_the_dream_table_has_headers_and_a_rolled_back_run_offers_no_second_roll_back(
    store: MemoryStore,
) -> None:
    from sagemem.dream import apply_proposals

    applied = apply_proposals(store, propose_archiving_the_old_plan(store)["id"])
    with page(store) as browser:
        browser.execute_script("window.confirm = () => true")
        browser.find_element(By.CSS_SELECTOR, '#tabs button[data-tab="dream"]').click()
        wait(browser, ready.presence_of_element_located((By.CSS_SELECTOR, "#dream-runs tbody tr")))
        headers = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#dream-runs thead th")]
        assert headers == ["Run", "Started", "Mode · status", "Changes / proposals", "Model", "Actions"]

        def row() -> Any:  # the page draws the table anew after a roll back
            return browser.find_element(
                By.XPATH, f"//table[@id='dream-runs']/tbody/tr[td[1]='{applied['id']}']"
            )

        assert "apply · done" in row().text
        row().find_element(By.XPATH, ".//button[text()='Roll back']").click()
        WebDriverWait(browser, 20, ignored_exceptions=[StaleElementReferenceException]).until(
            lambda _: "apply · rolled back" in row().text
        )
        assert not row().find_elements(By.XPATH, ".//button[text()='Roll back']")
        assert not row().find_elements(By.TAG_NAME, "select")
    assert (store.memory_dir / "project_old_plan.md").is_file()
