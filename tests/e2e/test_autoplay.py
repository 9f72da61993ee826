"""Autoplay on a phone: the same layout for N rounds, confirmed at each opening, ending by
itself when the rounds are played or a stop is reached (here: the balance under a limit),
in English, Thai and Hindi."""

from __future__ import annotations

from playwright.sync_api import BrowserContext, Page, expect
from table_page import Bet, Server, TablePage, get_json


def start(page: Page, rounds: int, balance_under: str = "") -> None:
    page.get_by_test_id("autoplay-open").tap()
    expect(page.get_by_test_id("autoplay-layout")).to_contain_text("Player 1 10")
    page.get_by_test_id("autoplay-rounds").fill(str(rounds))
    page.get_by_test_id("autoplay-balance").fill(balance_under)
    page.get_by_test_id("autoplay-start").tap()


def test_autoplay_plays_its_rounds_then_stops_at_the_balance_limit(
        server: Server, phone: BrowserContext) -> None:
    page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    table = TablePage(page, server.url).open("t1")
    for lang, words in (("th", "เล่นอัตโนมัติ"), ("hi", "ऑटोप्ले"), ("en", "Autoplay")):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(page.get_by_test_id("autoplay-open")).to_have_text(words)
    table.wait_betting(at_least_ms=4_000)
    table.place(Bet("P1", 10), chip=10)
    start(page, 2)
    status = page.get_by_test_id("autoplay-status")
    expect(status).to_have_attribute("data-state", "running")
    expect(status).to_have_attribute("data-played", "1")  # this round, at once
    expect(status).to_have_attribute("data-state", "done", timeout=90_000)
    expect(status).to_contain_text("Autoplay ended: all rounds played")
    bets = get_json(server.url + "api/bets?limit=5", token=table.token())["bets"]
    mine = [b for b in bets if b["spot"] == "P1" and b["amount"] == 10]
    assert len(mine) == 2 and mine[0]["round_id"] != mine[1]["round_id"], bets

    # a stop: the balance is under the limit at the next opening, so nothing is placed
    table.wait_betting(at_least_ms=1_000)
    page.wait_for_function("() => document.querySelector('[data-testid=phase]')"
                           ".dataset.phase !== 'betting'", timeout=30_000)
    start(page, 5, balance_under="1000000")
    expect(status).to_have_attribute("data-state", "balance", timeout=60_000)
    expect(status).to_contain_text("your balance fell under your limit")
    after = get_json(server.url + "api/bets?limit=5", token=table.token())["bets"]
    assert after[0]["bet_id"] == bets[0]["bet_id"]  # no bet since
    assert not errors, errors
