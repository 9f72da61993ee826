"""Tips to the dealer in the browser, phone first: a guest on a phone held upright
(390x844, touch) finds the Tip button on the betting screen, picks an amount from the chips,
confirms, and hears the answer in a toast; the dealer console shows the tip and the
shift's total; the Bet Record lists it. In Thai and Hindi the same, translated. A player of
an operator that keeps the money (a seamless wallet) tips through its wallet; one whose
operator turned tips off sees no Tip button at all."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, WebSocketRoute, expect
from table_page import Server, TablePage
from test_dealer import sign_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from operators_platform import INITIAL, Platform

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def within_reach(target: Locator) -> None:
    """On the phone's first screen, whole, and a touch target of at least 44 x 44 px."""
    box = target.bounding_box()
    assert box is not None
    assert box["width"] >= 44 and box["height"] >= 44, box
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], box


def tip_from_phone(page: Page, chip: int) -> None:
    """Tap Tip, a chip of the sheet, then the sheet's confirmation."""
    page.get_by_test_id("tip").tap()
    sheet = page.get_by_test_id("tip-sheet")
    expect(sheet).to_be_visible()
    send = page.get_by_test_id("tip-send")
    expect(send).to_be_disabled()  # nothing is sent before an amount is chosen
    for chip_button in page.locator("[data-testid=tip-chips] .chip").all():
        within_reach(chip_button)
    page.get_by_test_id(f"tip-chip-{chip}").tap()
    within_reach(send)
    send.tap()
    expect(sheet).to_be_hidden()


def test_a_guest_tips_from_a_phone_and_the_dealer_and_the_bet_record_see_it(
        server: Server, browser: Browser, phone: BrowserContext) -> None:
    dealer_ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        dealer = dealer_ctx.new_page()
        sign_in(dealer, server, "t1")
        page = phone.new_page()
        table = TablePage(page, server.url).open("t1")
        button = page.get_by_test_id("tip")
        expect(button).to_be_visible()
        expect(button).to_have_text("Tip")
        within_reach(button)
        before = table.balance()
        # the sheet offers the chips within the tip's limits (the table's, for a guest)
        page.get_by_test_id("tip").tap()
        expect(page.get_by_test_id("tip-limits")).to_have_text("From 10 to 5,000")
        page.get_by_test_id("tip-cancel").tap()
        expect(page.get_by_test_id("tip-sheet")).to_be_hidden()
        assert table.balance() == before  # cancelled: nothing sent
        tip_from_phone(page, 100)
        expect(page.get_by_test_id("bet-notice")).to_have_text(
            "Thank you! Your tip of 100 went to the dealer.")
        expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before - 100))
        # the dealer's console: the tip as it came, and the shift's total
        expect(dealer.get_by_test_id("dealer-tips-list")).to_contain_text(": 100")
        expect(dealer.get_by_test_id("dealer-tips-total")).to_have_text("This shift: 100 (1 tips)")
        # the Bet Record: the tip beside the bets, all of it deducted
        page.goto(f"{server.url}records.html")
        row = page.get_by_test_id("tip-row")
        expect(row).to_have_count(1)
        expect(row).to_have_attribute("data-amount", "100")
        expect(row).to_have_attribute("data-balance-after", str(before - 100))
    finally:
        dealer_ctx.close()


def test_a_tip_the_server_could_not_record_is_sent_again_with_its_tip_id(
        server: Server, phone: BrowserContext) -> None:
    """``unavailable`` says: not recorded, send it again with the same tip_id (with a
    seamless wallet the operator may have debited already, and only the re-send puts the
    tip in the ledger and before the dealer). The page showed the error and dropped the
    tip. Here the first tip the page sends is answered so, in place of the server."""
    sent: list[dict[str, Any]] = []

    def route(ws: WebSocketRoute) -> None:
        upstream = ws.connect_to_server()

        def from_page(message: str | bytes) -> None:
            frame = json.loads(message)
            if frame.get("type") == "tip":
                sent.append(frame)
                if len(sent) == 1:
                    ws.send(json.dumps({"type": "error", "code": "unavailable",
                                        "message": "The tip could not be recorded now.",
                                        "tip_id": frame["tip_id"]}))
                    return
            upstream.send(message)

        ws.on_message(from_page)
        upstream.on_message(ws.send)

    page = phone.new_page()
    page.route_web_socket("**/ws", route)
    table = TablePage(page, server.url).open("t1")
    before = table.balance()
    tip_from_phone(page, 10)
    expect(page.get_by_test_id("bet-notice")).to_have_text(
        "Thank you! Your tip of 10 went to the dealer.", timeout=15_000)
    assert [f["tip_id"] for f in sent] == [sent[0]["tip_id"]] * 2, sent
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(before - 10))


@pytest.mark.parametrize(("lang", "button", "title", "thanks"), [
    ("th", "ทิป", "ให้ทิปดีลเลอร์", "ขอบคุณ! ทิป 10 ของคุณถึงดีลเลอร์แล้ว"),
    ("hi", "टिप", "डीलर को टिप दें", "धन्यवाद! आपकी 10 की टिप डीलर को मिल गई।"),
])
def test_the_tip_speaks_thai_and_hindi(server: Server, phone: BrowserContext, lang: str,
                                       button: str, title: str, thanks: str) -> None:
    phone.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}');")
    page = phone.new_page()
    TablePage(page, server.url).open("t1")
    expect(page.get_by_test_id("tip")).to_have_text(button)
    within_reach(page.get_by_test_id("tip"))
    page.get_by_test_id("tip").tap()
    expect(page.locator("#tip-title")).to_have_text(title)
    page.get_by_test_id("tip-chip-10").tap()
    page.get_by_test_id("tip-send").tap()
    expect(page.get_by_test_id("bet-notice")).to_have_text(thanks)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    running = Platform(tmp_path_factory.mktemp("tips"), betting_seconds=8, reveal_interval=0.3)
    try:
        yield running
    finally:
        running.stop()


def test_a_seamless_players_tip_is_the_operators_and_tips_turned_off_show_no_button(
        phone: BrowserContext, platform: Platform) -> None:
    acme = platform.launch("acme", "THB", "tipper-acme")
    page = phone.new_page()
    page.goto(acme["url"] + "&lang=en")
    TablePage(page, platform.server.http + "/").wait_online()
    expect(page.get_by_test_id("tip")).to_be_visible()
    tip_from_phone(page, 5000)  # acme's THB chips: 5000 satang, ฿50
    expect(page.get_by_test_id("bet-notice")).to_have_text(
        "Thank you! Your tip of ฿50.00 went to the dealer.")
    # the operator's balance, asked of its wallet after the tip
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(INITIAL - 5000))
    books = platform.state()["operators"]["acme"]["THB"]
    assert books["balances"]["tipper-acme"] == INITIAL - 5000
    [debit] = [c for c in books["applied"].values() if c["method"] == "debit"]
    assert (debit["amount"], debit["round_id"], debit["bets"]) == (5000, "t1.tips", [])
    page.close()
    # bet7 turned tips off: its player has no Tip button, though the page is the same
    bet7 = platform.launch("bet7", "INR", "tipper-bet7")
    other = phone.new_page()
    other.goto(bet7["url"] + "&lang=en")
    TablePage(other, platform.server.http + "/").wait_online()
    expect(other.get_by_test_id("confirm")).to_be_visible()
    expect(other.get_by_test_id("tip")).to_be_hidden()
