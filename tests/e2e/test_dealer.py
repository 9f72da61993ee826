"""The dealer console drives a manual round, card by card, while a player's page follows.

The dealer types cards as a scanner would ("KH", "10D", "T♠", lower case too) while betting
is open (the rules sheet's order); the console shows where each went from the server's ack,
and the player's page shows them face down while the countdown runs, then revealed after the
close, then settled — paid exactly as ``livetable.rules.settle_bet`` says.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from table_page import Bet, Server, TablePage, deducted, expected_returned

pytestmark = pytest.mark.browser

# The 13 cards of a round in dealing order: the burn, then P1 … P5, Banker twice.
ROUND = ["2c", "KH", "9h", "10D", "T♠", "5C", "3D", "kd", "9C", "JS", "5S", "QC", "4H"]
WHERE = ["Burn"] + [f"{h} · card {n}" for n in (1, 2)
                    for h in ("Player 1", "Player 2", "Player 3", "Player 4", "Player 5", "Banker")]
HANDS = {  # what each hand holds, in the wire's notation
    "P1": ["KH", "KD"], "P2": ["9H", "9C"], "P3": ["10D", "JS"], "P4": ["10S", "5S"],
    "P5": ["5C", "QC"], "BANKER": ["3D", "4H"],
}


def sign_in(dealer: Page, server: Server, table: str) -> None:
    dealer.goto(f"{server.url}dealer.html")
    dealer.get_by_test_id("dealer-token").fill(server.dealer_token())
    dealer.get_by_test_id("dealer-login").click()
    expect(dealer.get_by_test_id("dealer-console")).to_be_visible()
    dealer.get_by_test_id("dealer-table").select_option(table)
    expect(dealer.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")


def set_mode(dealer: Page, auto: bool) -> None:
    """Switch between rounds (the server refuses it during one): retry until it takes."""
    box = dealer.get_by_test_id("dealer-mode")
    text = "Automatic dealing" if auto else "Dealer's shoe"
    for _ in range(12):
        expect(box).to_be_enabled(timeout=60_000)
        if box.is_checked() != auto:
            # a click, not set_checked: the console puts the box back when the server refuses
            # (a round in play), and set_checked raised on that instead of trying again. A
            # short click: the box is enabled between rounds only, and a loaded run's click
            # came as the next round disabled it, then waited 30 s for a window it missed
            # (centred first: scrolled to the top edge, the console's sticky header took
            # the click, and a loaded run's attempts all met it)
            box.evaluate("(e) => e.scrollIntoView({block: 'center'})")
            try:
                box.click(timeout=2_000)
            except PlaywrightTimeoutError:
                continue
        try:
            expect(dealer.get_by_test_id("dealer-mode-text")).to_have_text(text, timeout=3_000)
            return
        except AssertionError:
            continue
    # what the console heard (its log: the commands sent, each ack or refusal) and shows,
    # for the next time this happens (a loaded full run once saw 12 tries in a row fail)
    shown = dealer.get_by_test_id("dealer-mode-text").inner_text()
    heard = dealer.get_by_test_id("dealer-log").inner_text()[-800:]
    raise AssertionError(f"the table did not switch to {text} (it shows {shown!r}, the box "
                         f"is {'on' if box.is_checked() else 'off'}); the console's log:\n{heard}")


def back_to_auto(dealer: Page, server: Server, table: str) -> None:
    """A dealer test's last step, passed or failed: a round it left in play is cancelled
    (no mode change during a round), and the table deals by itself again for the tests
    that follow — one test's failure is not the next one's. (The server says whether a
    round is in play: the console may not have heard yet of the test's last command.)"""
    if server.api(f"/api/tables/{table}")["phase"] not in ("idle", "settled", "cancelled"):
        dealer.get_by_test_id("dealer-reason").fill("test cleanup")
        dealer.get_by_test_id("dealer-cancel").click()
        dealer.get_by_test_id("dealer-cancel-confirm").click()
    set_mode(dealer, auto=True)


def type_card(dealer: Page, card: str) -> None:
    field = dealer.get_by_test_id("dealer-card-input")
    field.fill(card)
    field.press("Enter")


def test_dealer_runs_a_manual_round_while_a_player_follows(
    server: Server, context: BrowserContext, page_errors: list[str]
) -> None:
    table = server.api("/api/tables")["tables"][-1]["id"]
    dealer = context.new_page()
    sign_in(dealer, server, table)
    set_mode(dealer, auto=False)
    try:
        # A new shoe: its opening card is read face up and decides the burn.
        dealer.get_by_test_id("dealer-start-shoe").click()
        type_card(dealer, "5s")
        expect(dealer.get_by_test_id("dealer-card-placed")).to_contain_text("Shoe opening card")
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text("5 cards burned")

        player = TablePage(context.new_page(), server.url).open(table)
        page = player.page
        start = player.balance()

        dealer.get_by_test_id("dealer-betting-seconds").fill("30")
        dealer.get_by_test_id("dealer-open").click()
        player.wait_betting(at_least_ms=10_000, timeout=15_000)
        bets = [Bet("P1", 100), Bet("P1_PAIR", 50)]
        for bet in bets:
            player.place(bet)
        player.confirm(bets)

        # A pause shows on the player's page with its reason, and goes away on resume.
        dealer.get_by_test_id("dealer-reason").fill("Card jam in the shoe")
        dealer.get_by_test_id("dealer-pause").click()
        expect(page.get_by_test_id("banner-paused")).to_contain_text("Card jam in the shoe")
        dealer.get_by_test_id("dealer-resume").click()
        expect(page.get_by_test_id("banner-paused")).to_be_hidden()
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")

        # Scanner input while the countdown runs: a typo is caught here, before the server
        # sees it; the cards go face down on the player's page, and betting stays open.
        type_card(dealer, "ZZ")
        expect(dealer.get_by_test_id("dealer-card-error")).to_contain_text("not a card")
        for card, where in zip(ROUND, WHERE, strict=True):
            type_card(dealer, card)
            expect(dealer.get_by_test_id("dealer-card-placed")).to_contain_text(where)
        expect(page.get_by_test_id("hand-BANKER")).to_have_attribute("data-dealt", "2")
        expect(page.get_by_test_id("cards-P3").locator(".card--back")).to_have_count(2)
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")
        expect(dealer.get_by_test_id("dealer-reveal")).to_be_disabled()  # not before the close

        # Every card is out: the close starts the reveals.
        dealer.get_by_test_id("dealer-close").click()
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "revealing")

        for hand, cards in HANDS.items():
            dealer.get_by_test_id("dealer-reveal").click()
            player.wait_hand(hand, timeout=10_000)
            assert player.cards(hand) == cards
        expect(page.get_by_test_id("value-P1")).to_contain_text("Face-card Combo (rank 7.3)")
        expect(page.get_by_test_id("result-P1")).to_have_text("Win 2:1")

        returned = expected_returned(bets, HANDS)
        taken = sum(deducted(b.spot, b.amount) for b in bets)
        expect(page.get_by_test_id("payout")).to_have_attribute("data-returned", str(returned))
        expect(page.get_by_test_id("balance")).to_have_attribute(
            "data-value", str(start - taken + returned))
        expect(dealer.get_by_test_id("dealer-phase")).to_have_attribute("data-phase", "settled")
        if os.environ.get("LIVETABLE_SCREENSHOTS"):
            out = Path(os.environ["LIVETABLE_SCREENSHOTS"])
            out.mkdir(parents=True, exist_ok=True)
            dealer.evaluate("window.scrollTo(0, 0)")  # the sticky header stays on top
            dealer.screenshot(path=out / "dealer.png", full_page=True)

        # A cancelled round: the banner, and every bet refunded in full.
        before = player.balance()
        dealer.get_by_test_id("dealer-open").click()
        player.wait_betting(at_least_ms=10_000, timeout=15_000)
        bet = Bet("P2", 100)
        player.place(bet)
        player.confirm([bet])
        expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before - 200))
        dealer.get_by_test_id("dealer-reason").fill("Shoe dropped")
        dealer.get_by_test_id("dealer-cancel").click()
        dealer.get_by_test_id("dealer-cancel-confirm").click()
        expect(page.get_by_test_id("banner-cancelled")).to_contain_text("Shoe dropped")
        expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before))
        expect(page.get_by_test_id("payout")).to_contain_text("Refunded")
    finally:
        back_to_auto(dealer, server, table)
    assert not page_errors, page_errors


def test_a_mode_switch_the_console_could_not_send_leaves_the_box_as_the_table_is(
        server: Server, browser: Browser) -> None:
    """Offline, the console cannot send the switch: it says so, and the box goes back to the
    mode the table is in. It stayed switched — showing a mode the table was not in, and a
    click on it again would have sent nothing (the box already said so)."""
    table = server.api("/api/tables")["tables"][-1]["id"]
    ctx = browser.new_context(locale="en-US")
    dealer = ctx.new_page()
    try:
        sign_in(dealer, server, table)
        box = dealer.get_by_test_id("dealer-mode")
        expect(box).to_be_enabled(timeout=60_000)
        was = box.is_checked()
        ctx.set_offline(True)
        expect(dealer.get_by_test_id("conn-state")).not_to_have_attribute("data-state", "online")
        box.evaluate("(e) => e.scrollIntoView({block: 'center'})")
        box.click()
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text("Not connected")
        assert box.is_checked() == was
    finally:
        ctx.set_offline(False)
        ctx.close()
