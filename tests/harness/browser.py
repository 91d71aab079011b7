"""A page opened in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which
``make deps`` installs), driven by selenium: what its console said, what it requested, what its
plotly charts hold, and a screenshot."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = os.environ.get("EPOCHAL_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("EPOCHAL_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(os.environ.get("EPOCHAL_TEST_ARTIFACTS", "build/test-artifacts"))
LOAD_TIMEOUT_S = 60
WIDTH_PX = 1400

# Each plotly chart of the page: its id and how many data points its traces hold (not null).
CHART_POINTS = """
return Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
  id: gd.id,
  points: (gd.data || []).reduce((n, t) => n + (
    t.y || t.value || (t.link && t.link.value) || []
  ).filter(v => v !== null && v !== undefined).length, 0),
}));
"""


@dataclass(frozen=True, slots=True)
class PageReport:
    console_errors: list[str]
    requested: list[str]  # every URL the page asked for, itself included
    chart_points: dict[str, int]  # chart id -> data points
    screenshot: Path


def available() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    return (
        f"missing {', '.join(missing)}: `make deps` installs chromium and chromium-driver"
        if missing
        else ""
    )


@contextlib.contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    """A headless Chromium that logs its console and its network requests; quit whatever
    happens."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WIDTH_PX},1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def open_page(page: Path, screenshot_name: str) -> PageReport:
    """Open ``page`` (a file), wait until its charts are drawn, and report."""
    with chromium() as driver:
        driver.get(page.resolve().as_uri())
        WebDriverWait(driver, LOAD_TIMEOUT_S).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        charts = driver.execute_script(CHART_POINTS)
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(WIDTH_PX, min(int(height) + 100, 16_000))
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        screenshot = ARTIFACTS / screenshot_name
        driver.save_screenshot(str(screenshot))
        console = [
            entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"
        ]
        requested = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                requested.append(message["params"]["request"]["url"])
    return PageReport(
        console_errors=console,
        requested=requested,
        chart_points={c["id"]: int(c["points"]) for c in charts},
        screenshot=screenshot,
    )
