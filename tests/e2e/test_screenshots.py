"""Screenshots of the pages, for docs/screenshots and for a person to look at.

They are written to a temporary directory, or to the directory named by
``LIVETABLE_SCREENSHOTS`` (``LIVETABLE_SCREENSHOTS=docs/screenshots pytest -m browser
tests/e2e/test_screenshots.py`` refreshes the ones in the repository).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Page, expect
from table_page import Bet, Server, TablePage, wait_until
from tcpproxy import TcpProxy

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    target = os.environ.get("LIVETABLE_SCREENSHOTS")
    out = (ROOT / target) if target and not Path(target).is_absolute() else Path(target or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _table_with_rounds(server: Server, rounds: int) -> str:
    def ready() -> bool:
        tables = server.api("/api/tables")["tables"]
        return any(t["mode"] == "auto" and len(t["roadmap"]) >= rounds for t in tables)

    wait_until(ready, timeout=120)
    tables = server.api("/api/tables")["tables"]
    return str(next(t["id"] for t in tables if t["mode"] == "auto" and len(t["roadmap"]) >= rounds))


def _saved(path: Path) -> None:
    assert path.exists() and path.stat().st_size > 5_000, path


def test_screenshots(server: Server, browser: Browser, shots: Path) -> None:
    table = _table_with_rounds(server, 3)
    # Reduced motion: no card caught half-way through its flip.
    ctx = browser.new_context(viewport={"width": 1440, "height": 900}, locale="en-US",
                              reduced_motion="reduce")
    page: Page = ctx.new_page()
    try:
        page.goto(server.url)
        lobby_roadmap = page.get_by_test_id(f"lobby-table-{table}").get_by_test_id("rm-cell")
        expect(lobby_roadmap.first).to_be_visible()
        page.screenshot(path=shots / "lobby.png", full_page=True)
        _saved(shots / "lobby.png")

        tp = TablePage(page, server.url).open(table)
        tp.wait_betting(at_least_ms=3_000)
        bets = [Bet("P1", 100), Bet("P3_PAIR", 50)]
        for b in bets:
            tp.place(b)
        tp.confirm(bets)
        tp.wait_hand("P3")
        assert page.get_by_test_id("hand-BANKER").get_attribute("data-revealed") == "0"
        page.screenshot(path=shots / "table-reveal.png", full_page=False)
        _saved(shots / "table-reveal.png")

        payout_items = page.get_by_test_id("payout").get_by_test_id("payout-item")
        expect(payout_items).to_have_count(2, timeout=30_000)
        expect(page.get_by_test_id("win")).to_be_visible()  # the result on the felt
        page.screenshot(path=shots / "table-win.png")
        _saved(shots / "table-win.png")
        roadmap = page.locator("section.panel", has=page.get_by_test_id("roadmap"))
        roadmap.screenshot(path=shots / "roadmap.png")
        _saved(shots / "roadmap.png")
        page.screenshot(path=shots / "table-settled.png")

        page.goto(f"{server.url}records.html")
        expect(page.get_by_test_id("bet-row")).to_have_count(2)
        page.screenshot(path=shots / "bet-record.png", full_page=True)
        _saved(shots / "bet-record.png")
    finally:
        ctx.close()

    # The connection lost without a word (a proxy that stops forwarding): the overlay.
    port = urlparse(server.url).port
    assert port
    with TcpProxy(port) as proxy:
        ctx = browser.new_context(viewport={"width": 1440, "height": 900}, locale="en-US",
                                  reduced_motion="reduce")
        page = ctx.new_page()
        try:
            tp = TablePage(page, proxy.url).open(table)
            tp.bet([Bet("P2", 100)])
            tp.place(Bet("P4_PAIR", 50))
            proxy.stall()
            expect(page.locator("body")).to_have_attribute("data-connection", "reconnecting",
                                                           timeout=10_000)
            page.screenshot(path=shots / "table-reconnecting.png")
            _saved(shots / "table-reconnecting.png")
        finally:
            proxy.restore()
            ctx.close()

    # A phone (390×844), in Thai and in Hindi.
    for lang in ("th", "hi"):
        phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                    is_mobile=True, has_touch=True, reduced_motion="reduce")
        phone.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
        page = phone.new_page()
        try:
            tp = TablePage(page, server.url).open(table)
            expect(page.locator("html")).to_have_attribute("lang", lang)
            page.wait_for_function(
                """() => document.querySelector('[data-testid=phase]').dataset.phase === 'revealing'
                    && document.querySelector('[data-testid=hand-P2]').dataset.revealed === '1'""",
                timeout=60_000,
            )
            page.screenshot(path=shots / f"table-phone-{lang}.png", full_page=True)
            _saved(shots / f"table-phone-{lang}.png")
        finally:
            phone.close()


def _rules_page(page: Page, server: Server, lang: str) -> None:
    page.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
    page.goto(f"{server.url}rules.html")
    expect(page.get_by_test_id("sheet")).to_have_attribute("data-lang", lang)
    expect(page.get_by_test_id("limits").locator("[data-key=max]")).to_have_attribute(
        "data-value", re.compile(r"\d+"))


def test_rules_screenshots(server: Server, browser: Browser, shots: Path) -> None:
    """The rules sheet on a desktop (English) and on a 390×844 phone (Thai, Hindi)."""
    desk = browser.new_context(viewport={"width": 1440, "height": 900}, locale="en-US",
                               reduced_motion="reduce")
    try:
        page = desk.new_page()
        _rules_page(page, server, "en")
        page.screenshot(path=shots / "rules-desktop-en.png")
        _saved(shots / "rules-desktop-en.png")
        page.locator("#example-3").scroll_into_view_if_needed()
        page.evaluate("document.getElementById('examples').scrollIntoView()")
        page.screenshot(path=shots / "rules-examples-en.png")
        _saved(shots / "rules-examples-en.png")
    finally:
        desk.close()
    for lang in ("th", "hi"):
        phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2,
                                    is_mobile=True, has_touch=True, reduced_motion="reduce")
        try:
            page = phone.new_page()
            _rules_page(page, server, lang)
            # The worked examples: the cards, the amounts and the scripts' typography.
            page.evaluate("document.getElementById('example-3').scrollIntoView()")
            page.screenshot(path=shots / f"rules-phone-{lang}.png")
            _saved(shots / f"rules-phone-{lang}.png")
        finally:
            phone.close()
