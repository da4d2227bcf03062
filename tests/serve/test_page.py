"""The web page at `/` in headless Chromium (Debian's, driven by Playwright):
it loads, a schema-constrained answer streams in and validates, and check mode
marks where a bad input leaves the grammar. A screenshot is kept as an artifact
($STENCIL_ARTIFACTS, else target/ci-artifacts)."""

import json
import os
import shutil

import jsonschema
import pytest

CHROMIUM = os.environ.get("STENCIL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = os.environ.get("STENCIL_ARTIFACTS", "target/ci-artifacts")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("STENCIL_REQUIRE_CHROMIUM"),
    reason="no chromium on this machine (.ci/run installs Debian's)",
)


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(server.url + "/")
        yield page
        browser.close()


def test_page_streams_a_schema_constrained_answer(page):
    assert page.title() == "stencil"
    page.wait_for_function("document.getElementById('model').textContent.length > 1")
    page.select_option("#kind", "schema")
    schema = json.loads(page.input_value("#constraint"))
    page.fill("#max-tokens", "80")
    page.fill("#prompt", "Describe Paris.")
    page.click("#send")
    answer = page.locator(".msg.assistant").last
    page.wait_for_selector(".msg.assistant[data-state=done]", timeout=120_000)
    jsonschema.validate(json.loads(answer.locator("span").inner_text()), schema)
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, "page-chat.png"), full_page=True)


def test_check_mode_marks_the_offset(page):
    page.click("#mode-check")
    page.select_option("#kind", "regex")
    page.fill("#constraint", "[A-Z][a-z]+ (is|was) [0-9]{1,4}")
    page.fill("#check-text", "Paris is 2O25")
    page.click("#check")
    page.wait_for_selector("#verdict-head")
    head = page.inner_text("#verdict-head")
    assert "rejected at byte offset 10 (line 1, column 11)" in head, head
    assert page.inner_text("#verdict-mark") == "O"
    page.screenshot(path=os.path.join(ARTIFACTS, "page-check.png"), full_page=True)
    page.fill("#check-text", "Paris is 2025")
    page.click("#check")
    page.wait_for_selector("#verdict .ok")
