"""The console in a real browser: headless Debian Chromium driven by Selenium against a real
``airlock serve`` (process backend, scripted provider). It logs in, submits a job from the
Jobs page and watches its timeline grow live, approves a gated call on the Approvals page and
sees that job succeed, sees an agent's ``<script>`` shown as text (no alert), and a denied
egress decision in the job's ledger with the allow rule that would permit it (the process
backend runs no egress proxy: the decision is written to the job's events as one would be). Screenshots
are saved under the test's tmp dir (``AIRLOCK_CONSOLE_SHOT``: where to copy the job page's)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.controller import SqliteJobStore
from airlock.jobs import SandboxActivity
from airlock.proxy import EgressEvent
from airlock.testing import text_step, tool_step

from .world import process_agent

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
XSS = "<script>alert(1)</script>"

pytestmark = [
    pytest.mark.timeout(180),
    # CI sets AIRLOCK_REQUIRE_BROWSER=1: there a missing browser fails instead of skipping.
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()) and not os.environ.get("AIRLOCK_REQUIRE_BROWSER"),
        reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
    ),
]

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import NoAlertPresentException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


def agents() -> dict[str, Any]:
    slow = [
        tool_step("bash", {"command": "sleep 2; echo working"}, id="w"),
        text_step(f"done {XSS}", usage=(1200, 300), cost="0.0125"),
    ]
    gated = [tool_step("bash", {"command": "echo approved"}, id="g"), text_step("gate passed")]
    return {
        "a": process_agent(slow, ("bash",)),
        "gated": process_agent(gated, ("bash",), approval={"tools": ["bash"], "approvers": ["admin"]}),
    }


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """``airlock serve`` with an HTTP address; its startup document."""
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps({"version": 1, "agents": agents()}))
    args = [sys.executable, "-m", "airlock", "serve", "--config", str(config)]
    args += ["--data-dir", str(tmp_path / "data"), "--address", "127.0.0.1:0"]
    args += ["--http-address", "127.0.0.1:0", "--json"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        yield json.loads(line)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1700"):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_text(driver: Any, css: str, text: str) -> None:
    try:
        WebDriverWait(driver, 60).until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    except TimeoutException:
        shown = driver.find_element(By.TAG_NAME, "main").text
        raise AssertionError(f"{text!r} not in {css}: {shown} {driver.get_log('browser')}") from None


def timeline(driver: Any) -> list[str]:
    return [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#timeline li")]


def submit(driver: Any, agent: str, message: str) -> str:
    """Submit from the Jobs page; the job page it opens, its id."""
    WebDriverWait(driver, 30).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f"option[value='{agent}'], #submit-agent option"))
    )
    Select(driver.find_element(By.ID, "submit-agent")).select_by_visible_text(agent)
    driver.find_element(By.ID, "submit-message").send_keys(message)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 30).until(ec.url_contains("/jobs/"))
    return str(driver.current_url.rsplit("/", 1)[1])


DENIED = EgressEvent(
    phase="decision",
    client="10.0.0.2:40000",
    method="CONNECT",
    host="evil.example",
    port=443,
    allowed=False,
    rule="default deny",
    reason="no allow rule matches evil.example:443",
)


async def deny(data_dir: Path, job_id: str) -> None:
    """Record a denied egress decision in the job's events, as its proxy's would be."""
    async with SqliteJobStore(data_dir / "jobs.db") as store:
        await store.append(job_id, SandboxActivity(event=DENIED))


def test_console_in_a_browser(served: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    url = served["http_address"]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    browser.get(url + "/")
    WebDriverWait(browser, 30).until(ec.url_contains("/login"))
    browser.find_element(By.ID, "token").send_keys(served["token"])
    browser.save_screenshot(str(shots / "login.png"))
    browser.find_element(By.ID, "login").click()
    WebDriverWait(browser, 30).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#submit-agent option"))
    )

    first = submit(browser, "a", "go")
    wait_text(browser, "#timeline", "tool call bash")  # live, while the tool still sleeps
    assert not any("succeeded" in item for item in timeline(browser)), timeline(browser)
    wait_text(browser, "#timeline", "state → succeeded")  # the same page, from the stream
    wait_text(browser, "#summary", "succeeded")
    output = browser.find_element(By.ID, "output").text
    assert XSS in output  # the agent's markup, shown as text
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert any("tool result bash" in item and "working" in item for item in timeline(browser))
    asyncio.run(deny(tmp_path / "data", str(browser.current_url.rsplit("/", 1)[1])))
    browser.refresh()
    wait_text(browser, "#egress", "evil.example:443")
    assert "denied" in browser.find_element(By.ID, "egress").text
    rule = browser.find_element(By.CSS_SELECTOR, "#egress code.rule").text
    assert 'destination: "evil.example", port: 443' in rule and "allow:" in rule
    browser.save_screenshot(str(shots / "job.png"))
    if os.environ.get("AIRLOCK_CONSOLE_SHOT"):
        shutil.copy(shots / "job.png", os.environ["AIRLOCK_CONSOLE_SHOT"])

    browser.get(url + "/")
    gated = submit(browser, "gated", "needs a yes")
    wait_text(browser, "#summary", "awaiting_approval")
    browser.get(url + "/approvals")
    WebDriverWait(browser, 30).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#approvals button.approve"))
    )
    assert gated in browser.find_element(By.ID, "approvals").text
    browser.save_screenshot(str(shots / "approvals.png"))
    browser.find_element(By.CSS_SELECTOR, "#approvals button.approve").click()
    browser.get(f"{url}/jobs/{gated}")
    wait_text(browser, "#summary", "succeeded")
    wait_text(browser, "#timeline", "approval decided")
    assert "gate passed" in browser.find_element(By.ID, "output").text
    browser.save_screenshot(str(shots / "approved.png"))

    browser.get(url + "/")
    wait_text(browser, "#jobs", gated)
    browser.save_screenshot(str(shots / "jobs.png"))
    assert all((shots / f"{name}.png").stat().st_size > 0 for name in ("login", "job", "approvals", "jobs"))
    pages_and_filters(browser, url, first, gated)
    spend_per_agent(browser, url, shots)
    weave_of(browser, url, first, shots)


def pages_and_filters(browser: Any, url: str, first: str, gated: str) -> None:
    """The Jobs table one job a page (newest first), paged both ways, then filtered."""
    browser.get(url + "/?page_size=1")
    wait_text(browser, "#jobs tbody", gated)
    assert first not in browser.find_element(By.CSS_SELECTOR, "#jobs tbody").text
    assert browser.find_element(By.ID, "page-newer").get_attribute("disabled") is not None
    WebDriverWait(browser, 30).until(ec.element_to_be_clickable((By.ID, "page-older"))).click()
    wait_text(browser, "#jobs tbody", first)
    wait_text(browser, "#page-number", "page 2")
    browser.find_element(By.ID, "page-newer").click()
    wait_text(browser, "#jobs tbody", gated)
    Select(browser.find_element(By.ID, "filter-state")).select_by_visible_text("succeeded")
    browser.find_element(By.ID, "filter-agent").send_keys("a\n")
    wait_text(browser, "#jobs tbody", first)
    assert gated not in browser.find_element(By.CSS_SELECTOR, "#jobs tbody").text
    wait_text(browser, "#page-number", "page 1")


def spend_per_agent(browser: Any, url: str, shots: Path) -> None:
    """Each agent's section plots its cost and tokens over time (one finished job each)."""
    browser.get(url + "/agents")
    WebDriverWait(browser, 30).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, ".usage svg.plot rect.cost"))
    )
    sections = {
        s.find_element(By.TAG_NAME, "h2").text: s
        for s in browser.find_elements(By.CSS_SELECTOR, "section.agent")
    }
    assert set(sections) == {"a", "gated"}
    wait_text(browser, "#agents", "$0.0125 · 1200 tokens in, 300 out")
    for section in sections.values():
        wait_text(browser, "#agents", "1 jobs")
        assert len(section.find_elements(By.CSS_SELECTOR, "svg.plot rect.cost")) >= 7
        assert section.find_elements(By.CSS_SELECTOR, "svg.plot polyline.tokens")
    browser.save_screenshot(str(shots / "agents.png"))


def weave_of(browser: Any, url: str, job_id: str, shots: Path) -> None:
    """The job's record graph from its page's link: verified, one node per record, the agent's
    markup in a record shown as text."""
    browser.get(f"{url}/jobs/{job_id}")
    WebDriverWait(browser, 30).until(ec.element_to_be_clickable((By.ID, "weave-link"))).click()
    wait_text(browser, "#verification", "verified:")
    nodes = browser.find_elements(By.CSS_SELECTOR, "svg.weave g.record")
    assert len(nodes) >= 3
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    browser.save_screenshot(str(shots / "weave.png"))
