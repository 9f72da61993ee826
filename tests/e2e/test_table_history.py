"""On a phone, without leaving the table: the last 20 results of each position in a strip
over the table's corner, and the player's own bets of this shoe in the Roadmap & stats
panel (from the Bet Record), in English, Thai and Hindi.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from layout import overlaps
from playwright.sync_api import Browser, BrowserContext, ViewportSize, expect
from table_page import Bet, Server, TablePage, get_json

PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture
def phone(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                              has_touch=True, locale="en-US")
    ctx.set_default_timeout(30_000)
    try:
        yield ctx
    finally:
        ctx.close()


def test_a_phone_sees_the_last_results_and_its_bets_of_the_shoe(
        server: Server, phone: BrowserContext) -> None:
    page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    table = TablePage(page, server.url).open("t1")
    table.wait_betting()
    table.place(Bet("P2", 50), chip=50)
    table.confirm([Bet("P2", 50)])
    expect(page.get_by_test_id("stake-P2")).to_have_attribute("data-confirmed", "50")
    expect(page.get_by_test_id("payout")).to_be_visible(timeout=60_000)  # settled

    # the strip: as many rounds as the roadmap holds (at most 20), each position's results
    roadmap = get_json(server.url + "api/tables/t1/roadmap")
    rounds = roadmap["roadmap"][-20:]
    strip = page.get_by_test_id("history-strip")
    expect(strip).to_be_visible()
    expect(strip).to_have_attribute("data-rounds", str(len(rounds)))
    for pos in ("P1", "P5"):
        outcomes = [next(r["outcome"] for r in rnd["results"] if r["hand"] == pos)
                    for rnd in rounds]
        dots = page.get_by_test_id(f"history-{pos}").locator(".dot")
        assert [d.get_attribute("class") for d in dots.all()] == [
            f"dot dot--{o}" for o in outcomes]
    assert overlaps(page, "history-strip",
                    ["[data-testid^=hand-]", "[data-testid^=spot-]"]) == []

    # my bets of this shoe: one tap, the table stays
    page.get_by_test_id("open-roadmap").tap()
    mine = page.get_by_test_id("mybets")
    expect(mine).to_be_in_viewport()
    total = page.get_by_test_id("mybets-total")
    expect(total).to_have_attribute("data-count", "1")
    record = get_json(server.url + "api/bets?limit=1", token=table.token())["bets"][0]
    assert record["spot"] == "P2" and record["amount"] == 50
    expect(total).to_have_attribute("data-net", str(record["net"]))
    line = page.get_by_test_id("mybets-list").locator("li")
    expect(line).to_have_count(1)
    expect(line).to_contain_text("Player 2")
    for lang, title in (("th", "เดิมพันของฉันในขอนแจกไพ่นี้"), ("hi", "इस शू में मेरे दांव")):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(mine.locator("h3")).to_have_text(title)
        expect(strip).to_have_attribute("aria-label", re.compile("^(ผล|पिछले) "))
    assert not errors, errors
