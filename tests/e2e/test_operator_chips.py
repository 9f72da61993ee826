"""Chips and limits per operator and currency, in the browser: a launched player's chip
rail and limits are their operator's for the session's currency, shown in that currency
(JPY without decimals, THB with), and a bet past the operator's maximum is refused with
that maximum shown."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from table_page import Bet, TablePage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from operators_platform import Platform

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    running = Platform(tmp_path_factory.mktemp("chips"), betting_seconds=8,
                       reveal_interval=0.3)
    try:
        yield running
    finally:
        running.stop()


def open_launched(context: BrowserContext, platform: Platform, currency: str) -> Page:
    session = platform.launch("acme", currency, f"chips-{currency.lower()}")
    page = context.new_page()
    page.goto(session["url"] + "&lang=en")
    TablePage(page, platform.server.http + "/").wait_online()
    return page


def chip_faces(page: Page) -> list[tuple[str, str]]:
    chips = page.locator("#chips .chip")
    return [(chips.nth(i).get_attribute("data-value") or "", chips.nth(i).inner_text())
            for i in range(chips.count())]


def test_a_jpy_player_sees_yen_chips_without_decimals_and_a_thb_player_baht(
        context: BrowserContext, platform: Platform) -> None:
    jpy = open_launched(context, platform, "JPY")
    # acme's JPY chips (100, 500, 1000 yen: JPY has no minor unit)
    expect(jpy.locator("#chips .chip")).to_have_count(3)
    assert chip_faces(jpy) == [("100", "¥100"), ("500", "¥500"), ("1000", "¥1K")]
    expect(jpy.get_by_test_id("limit-player")).to_have_text("Player ¥100–¥5,000")
    expect(jpy.get_by_test_id("chip-1000")).to_have_attribute("aria-label", "Chip ¥1,000")
    jpy.close()

    thb = open_launched(context, platform, "THB")
    # acme's THB chips, in satang: 1000 is ฿10
    expect(thb.locator("#chips .chip")).to_have_count(3)
    assert chip_faces(thb) == [("1000", "฿10"), ("5000", "฿50"), ("10000", "฿100")]
    expect(thb.get_by_test_id("limit-player")).to_have_text("Player ฿10.00–฿500.00")
    thb.close()


def test_a_bet_past_the_operators_maximum_is_refused_with_that_maximum_shown(
        context: BrowserContext, platform: Platform) -> None:
    page = open_launched(context, platform, "JPY")
    table = TablePage(page, platform.server.http + "/")
    table.wait_betting(at_least_ms=4_000)
    table.place(Bet("P1", 5000), chip=1000)  # acme's JPY maximum on a spot: ¥5,000
    table.choose_chip(100)
    page.get_by_test_id("spot-P1").click()  # one chip more: ¥5,100
    expect(page.get_by_test_id("bet-warning")).to_have_text(
        "The most you can bet on Player 1 is ¥5,000.")
    expect(page.get_by_test_id("stake-P1")).to_contain_text("¥5,000")
    bet = Bet("P1", 5000)
    table.confirm([bet])  # the maximum itself is taken
    page.close()
