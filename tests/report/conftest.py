"""Headless Chromium through Selenium for the report's tests (Debian: chromium and
chromium-driver, which scripts/setup.sh installs)."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_bin):
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh)")
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager download
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600",
                 "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    yield driver
    driver.quit()
