"""End-to-end fixtures: the real server in a subprocess, and Debian's chromium.

The server is started once per session with ``livetable serve`` on a free port, with a
temporary data directory and short betting and reveal times so that a full round takes a
few seconds. Set ``LIVETABLE_E2E_URL`` to run the tests against a server that is already
running instead (then the dealer test needs ``LIVETABLE_E2E_DEALER_TOKEN``).

Chromium is the system's (``/usr/bin/chromium``); these tests never download a browser.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
from procutil import free_port
from table_page import Server, get_json, livetable_command
from timings import FAST_ENV

CHROMIUM = os.environ.get("LIVETABLE_E2E_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Short rounds: a player still has time to click, a whole round takes well under 20 s.
#: Betting, reveals and the pause between rounds are longer than the tests' fast profile
#: (:mod:`timings`): a browser clicks its bets, and a test reads the settled round's page
#: before the next round's opening clears it. The close grace is the profile's.
BETTING_SECONDS = 6
REVEAL_INTERVAL = 0.5
SECRET = "e2e-signing-secret-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]




@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    given = os.environ.get("LIVETABLE_E2E_URL")
    if given:
        yield Server(url=given.rstrip("/") + "/", env=dict(os.environ), data=None, process=None)
        return
    data = tmp_path_factory.mktemp("livetable-e2e")
    port = free_port()
    env = dict(os.environ)
    env.update({
        "LIVETABLE_SECRET": SECRET,
        "LIVETABLE_DATA_DIR": str(data),
        "LIVETABLE_BETWEEN_ROUNDS": "2",
        "LIVETABLE_DEAL_INTERVAL": "0.05",
        "LIVETABLE_CLOSE_GRACE": FAST_ENV["LIVETABLE_CLOSE_GRACE"],
        "LIVETABLE_DEMO": "1",
        "PYTHONUNBUFFERED": "1",
    })
    log = (data / "server.log").open("wb")
    cmd = [
        *livetable_command(), "serve",
        "--host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data),
        "--db", str(data / "livetable.sqlite3"),
        "--tables", "2",                  # t1 stays automatic; the dealer test takes t2
        "--betting-seconds", str(BETTING_SECONDS),
        "--reveal-interval", str(REVEAL_INTERVAL),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            log.close()
            raise RuntimeError(
                f"livetable serve exited with {proc.returncode}:\n"
                + (data / "server.log").read_text(errors="replace")[-4000:]
            )
        try:
            tables = get_json(url + "api/tables", timeout=2.0)
            if isinstance(tables, dict) and tables.get("tables"):
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("livetable serve did not come up in 30 s")
        time.sleep(0.2)
    try:
        yield Server(url=url, env=env, data=data, process=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Module scope: Playwright's sync API keeps an event loop running in this thread while
    # it is open, which the asyncio tests that follow cannot share.
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: bin/test installs Debian's chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class PageErrors(list[str]):
    """Uncaught errors and console errors of the pages of one test."""

    def watch(self, page: Page) -> None:
        page.on("pageerror", lambda e: self.append(f"pageerror: {e}"))
        page.on("console",
                lambda m: self.append(f"console: {m.text}") if m.type == "error" else None)


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


@pytest.fixture
def context(browser: Browser, page_errors: PageErrors) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    ctx.set_default_timeout(15_000)
    ctx.on("page", page_errors.watch)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def phone(browser: Browser) -> Iterator[BrowserContext]:
    """A phone held upright (390x844, touch, English), as the phone-first tests use it."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                              is_mobile=True, has_touch=True, locale="en-US")
    ctx.set_default_timeout(20_000)
    try:
        yield ctx
    finally:
        ctx.close()
