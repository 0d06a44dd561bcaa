"""Fixtures of the page's tests: servers on loopback, and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import unavailable
from ui_helpers import CHROMIUM, CHROMIUM_ARGS, TOKEN, served

from agentrl.server.local import serve_in_thread


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve_in_thread(served()) as url:
        yield url


@pytest.fixture(scope="module")
def token_url() -> Iterator[str]:
    with serve_in_thread(served(token=TOKEN)) as url:
        yield url


@pytest.fixture(scope="session")
def shots() -> Path:
    """Where the tests leave their screenshots ($AGENTRL_UI_SHOTS, else tests/ui/output)."""
    folder = Path(os.environ.get("AGENTRL_UI_SHOTS") or Path(__file__).parent / "output")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the page go to {folder}")
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per module, with a fresh profile."""
    if not Path(CHROMIUM).exists():
        unavailable(f"no Chromium at {CHROMIUM} (Debian's chromium package)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the playwright package is not installed")
    profile = tempfile.mkdtemp(prefix="agentrl-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900})
            context.set_default_timeout(15_000)
            yield context
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    """A new tab without the cookies of earlier tests; JavaScript errors fail the test."""
    browser.clear_cookies()
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    tab.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
