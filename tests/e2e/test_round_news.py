"""On a phone: the bets' spread on the spots at the close of betting (``bet_stats``), and the
round's biggest wins once it is settled (``round_winners``), in English, Thai and Hindi —
from a real round whose cards a scripted dealer chose (P1 wins).
"""

from __future__ import annotations

import re

from layout import overlaps
from playwright.sync_api import BrowserContext, Page, expect
from round_dealer import P1_WINS, Dealer, dealer_url
from table_page import Bet, Server, TablePage
from websockets.sync.client import connect


def test_a_phone_sees_the_spread_then_the_winners_in_each_language(
        server: Server, phone: BrowserContext) -> None:
    page: Page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    with connect(dealer_url(server)) as ws:
        dealer = Dealer(ws, server, "t2")
        try:
            play_a_round(page, server, dealer)
        finally:
            dealer.back_to_auto()
    assert not errors, errors


def play_a_round(page: Page, server: Server, dealer: Dealer) -> None:
    """P1 and P3 bet, P1 wins: the spread on the felt, then the winners, in three languages."""
    dealer.manual_round_open()
    table = TablePage(page, server.url).open("t2")
    table.wait_betting()
    table.place(Bet("P1", 100), chip=100)
    table.place(Bet("P3", 50), chip=50)
    table.confirm([Bet("P1", 100), Bet("P3", 50)])
    expect(page.get_by_test_id("stake-P1")).to_have_attribute("data-confirmed", "100")
    expect(page.get_by_test_id("share-P1")).to_have_count(0)  # nothing before the close
    dealer.deal_and_reveal(P1_WINS)

    # the spread: one player, on P1 and P3; two thirds of the money on P1
    share = page.get_by_test_id("share-P1")
    expect(share).to_have_attribute("data-players", "100")
    expect(share).to_have_attribute("data-money", "67")
    expect(share).to_contain_text("100% · 67%")
    expect(page.get_by_test_id("share-P3")).to_have_attribute("data-money", "33")
    expect(page.get_by_test_id("share-P2")).to_have_attribute("data-players", "0")
    caption = page.get_by_test_id("bet-stats")
    expect(caption).to_contain_text("Bets of 1 player")
    assert overlaps(page, "bet-stats", ["[data-testid^=hand-]", "[data-testid^=spot-]"]) == []

    # the winners: the guest's name masked (no operator: "Gu***"), what P1 paid over
    # both stakes, standing in the Banker's row beside no hand
    board = page.get_by_test_id("winners")
    expect(board).to_be_visible()
    expect(board).to_contain_text("Biggest wins")
    name = page.evaluate("() => JSON.parse(localStorage.getItem('livetable.guest'))"
                         ".player.name")
    expect(board.locator(".winners__name")).to_have_text([name[:2] + "***"])
    amount = int(board.locator("li").first.get_attribute("data-amount") or 0)
    assert amount > 0
    assert overlaps(page, "winners", ["[data-testid^=hand-]", "[data-testid^=spot-]",
                                      "[data-testid=win]"]) == []

    for lang, words in (("th", ("ผู้ชนะสูงสุด", "ผู้เล่นวางเดิมพัน 1 คน")),
                        ("hi", ("सबसे बड़ी जीत", "1 खिलाड़ी का दांव"))):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(board).to_contain_text(words[0])
        expect(caption).to_have_text(re.compile(re.escape(words[1])))  # hidden: the winners
    # and gone when the next round opens
    dealer.command("open_betting", betting_ms=600_000)
    expect(page.get_by_test_id("share-P1")).to_have_count(0)
    expect(board).to_be_hidden()
    expect(caption).to_be_hidden()
    dealer.command("cancel_round", reason="end of the test")
