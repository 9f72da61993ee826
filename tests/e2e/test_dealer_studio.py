"""A studio's dealer console: what a dealer at a physical shoe needs.

One manual round, driven the way a studio does: a new shoe ("shuffling — new shoe" on the
player's page until its opening card is read), the round dealt face down while betting is
open, a card scanned twice in a row (a warning), that mis-scan voided with a supervisor's
approval (refused without it), the console reloaded mid-round (every card entered so far is
back, from the server, to the dealer console only), and the hotkeys Alt+O / Alt+C / Alt+R /
Alt+P with the focus in the card field. Disabled buttons must look disabled.

With ``LIVETABLE_SCREENSHOTS`` set, the screenshots of docs/dealer.md are written there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from table_page import Server, TablePage
from test_dealer import back_to_auto, set_mode, sign_in, type_card

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
OPENING = "7d"
# burn, P1 … P5, Banker, twice; the scanner reads P3's first card (4H) as a second KS
BEFORE_RELOAD = ["2C", "9H", "KS"]
AFTER_FIX = ["4H", "5D", "6C", "7H"]
REST = ["8S", "3C", "QD", "JH", "10C", "AS"]


def shot(page: Page, name: str) -> None:
    target = os.environ.get("LIVETABLE_SCREENSHOTS")
    if not target:
        return
    out = ROOT / target if not Path(target).is_absolute() else Path(target)
    out.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header stays on top of a full page
    page.screenshot(path=out / name, full_page=True)


def entered(dealer: Page) -> list[str]:
    return [str(x) for x in dealer.get_by_test_id("dealer-entered-card").evaluate_all(
        "els => els.map(e => e.dataset.slot + ':' + e.dataset.card)")]


def face_up_cards(page: Page) -> int:
    """Cards shown face up on a player's page (a face-down card is a .card--back)."""
    return page.locator("[data-testid^='cards-'] .card:not(.card--back)").count()


def without_names(page: Page) -> str:
    """The page's HTML less the names it shows, each in a <bdi>: a guest's name is random
    letters and digits, and once was "Guest UB9H" (a card's code, to a look for it)."""
    html: str = page.evaluate("""() => {
        const copy = document.documentElement.cloneNode(true);
        for (const name of copy.querySelectorAll('bdi')) name.remove();
        return copy.outerHTML; }""")
    return html


def style(page: Page, test_id: str) -> dict[str, str]:
    return dict(page.get_by_test_id(test_id).evaluate(
        "el => { const s = getComputedStyle(el); "
        "return {opacity: s.opacity, border: s.borderTopStyle, cursor: s.cursor}; }"))


def test_a_studio_round_with_a_correction_a_reload_and_hotkeys(  # noqa: PLR0915 -- one studio round, told in order
    server: Server, context: BrowserContext, page_errors: list[str]
) -> None:
    table = server.api("/api/tables")["tables"][-1]["id"]
    dealer = context.new_page()
    dealer.set_viewport_size({"width": 1280, "height": 1000})
    sign_in(dealer, server, table)
    set_mode(dealer, auto=False)
    try:
        player = TablePage(context.new_page(), server.url).open(table)
        page = player.page

        # A new shoe: the players see it being shuffled until its opening card is read.
        dealer.get_by_test_id("dealer-start-shoe").click()
        expect(page.get_by_test_id("banner-shoe")).to_contain_text("Shuffling — new shoe")
        shot(dealer, "dealer-new-shoe.png")
        shot(page, "table-new-shoe.png")
        type_card(dealer, OPENING)
        expect(dealer.get_by_test_id("dealer-card-placed")).to_contain_text("Shoe opening card")
        expect(page.get_by_test_id("banner-shoe")).to_be_hidden(timeout=10_000)

        # Alt+O opens betting, with the focus still in the card field.
        dealer.get_by_test_id("dealer-betting-seconds").fill("120")
        dealer.get_by_test_id("dealer-card-input").focus()
        expect(dealer.get_by_test_id("dealer-open")).to_be_enabled()
        dealer.keyboard.press("Alt+KeyO")
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")
        # the console's own round_opened too: it starts the round's scan afresh (a card
        # typed before it would be forgotten, and its repeat not flagged)
        expect(dealer.get_by_test_id("dealer-phase")).to_have_attribute("data-phase", "betting")

        # Dealt face down while betting is open; the same card twice in a row is flagged.
        for card in BEFORE_RELOAD:
            type_card(dealer, card)
        expect(dealer.get_by_test_id("dealer-entered-card")).to_have_count(3)
        expect(dealer.get_by_test_id("dealer-card-warning")).to_be_hidden()
        type_card(dealer, "KS")
        expect(dealer.get_by_test_id("dealer-card-warning")).to_contain_text(
            "KS scanned twice in a row")
        expect(dealer.get_by_test_id("dealer-entered-card")).to_have_count(4)
        shot(dealer, "dealer-twice.png")

        # The correction needs a supervisor: refused without, refused with their token (a
        # login is not an approval), done with the one-time code their console issues.
        dealer.get_by_test_id("dealer-correct").click()
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text(
            "A supervisor must approve a correction")
        assert len(entered(dealer)) == 4
        dealer.get_by_test_id("dealer-approval").fill(
            server.dealer_token("supervisor", table, name="Sue"))
        dealer.get_by_test_id("dealer-correct").click()
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text(
            "That approval is not valid for this correction")
        assert len(entered(dealer)) == 4
        supervisor = context.new_page()
        supervisor.goto(f"{server.url}dealer.html")
        supervisor.get_by_test_id("dealer-token").fill(
            server.dealer_token("supervisor", "*", name="Sue"))  # the table picker shows
        supervisor.get_by_test_id("dealer-login").click()
        supervisor.get_by_test_id("dealer-table").select_option(table)
        expect(supervisor.get_by_test_id("conn-state")).to_have_attribute("data-state",
                                                                          "online")
        expect(supervisor.get_by_test_id("dealer-approval-field")).to_be_hidden()
        supervisor.get_by_test_id("dealer-correction-count").fill("1")
        supervisor.get_by_test_id("dealer-approve").click()
        code = supervisor.get_by_test_id("dealer-approval-code")
        expect(code).to_have_text(re.compile(r"^A\."))
        expect(supervisor.get_by_test_id("dealer-log")).to_contain_text("Approval for 1 card")
        dealer.get_by_test_id("dealer-approval").fill(code.text_content() or "")
        supervisor.close()
        dealer.get_by_test_id("dealer-correct").click()
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text("Voided: KS (Player 3")
        expect(dealer.get_by_test_id("dealer-entered-card")).to_have_count(3)
        expect(dealer.get_by_test_id("dealer-approval")).to_have_value("")  # never kept
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text(
            "1 card(s) voided by Dee, approved by Sue")
        expect(page.get_by_test_id("hand-P3")).to_have_attribute("data-dealt", "0")
        shot(dealer, "dealer-correction.png")

        for card in AFTER_FIX:
            type_card(dealer, card)
        expect(dealer.get_by_test_id("dealer-entered-card")).to_have_count(7)

        # A reload mid-round: every card entered so far comes back, in dealing order.
        dealer.reload()
        expect(dealer.get_by_test_id("dealer-console")).to_be_visible()
        expect(dealer.get_by_test_id("dealer-entered-card")).to_have_count(7)
        assert entered(dealer) == ["burn:2C", "P1:9H", "P2:KS", "P3:4H", "P4:5D", "P5:6C",
                                   "BANKER:7H"]
        expect(dealer.get_by_test_id("dealer-slot-P1")).to_contain_text("9")
        shot(dealer, "dealer-after-reload.png")
        # ... to the dealer console only: the player's page shows them face down.
        expect(page.get_by_test_id("hand-BANKER")).to_have_attribute("data-dealt", "1")
        assert face_up_cards(page) == 0
        shown = without_names(page)
        assert "4H" not in shown and "9H" not in shown

        for card in REST:
            type_card(dealer, card)
        expect(page.get_by_test_id("hand-BANKER")).to_have_attribute("data-dealt", "2")
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")
        shot(dealer, "dealer-console.png")

        # Alt+C closes (every card out: the reveals may begin), Alt+P pauses and resumes,
        # Alt+R reveals the hands one by one.
        dealer.get_by_test_id("dealer-card-input").focus()
        expect(dealer.get_by_test_id("dealer-close")).to_be_enabled()
        dealer.keyboard.press("Alt+KeyC")
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "revealing")
        expect(dealer.get_by_test_id("dealer-pause")).to_be_enabled()
        dealer.keyboard.press("Alt+KeyP")
        expect(page.get_by_test_id("banner-paused")).to_be_visible()
        expect(dealer.get_by_test_id("dealer-correct")).to_be_disabled()
        expect(dealer.get_by_test_id("dealer-resume")).to_be_enabled()
        dealer.keyboard.press("Alt+KeyP")
        expect(page.get_by_test_id("banner-paused")).to_be_hidden()
        for hand in ("P1", "P2", "P3", "P4", "P5", "BANKER"):
            # (the console hears table_resumed on its own connection, maybe after the page)
            expect(dealer.get_by_test_id("dealer-reveal")).to_be_enabled()
            dealer.keyboard.press("Alt+KeyR")
            player.wait_hand(hand, timeout=10_000)
        expect(dealer.get_by_test_id("dealer-phase")).to_have_attribute("data-phase", "settled")
        assert player.cards("P3") == ["4H", "QD"]

        # A hotkey whose button is disabled sends nothing.
        sent = dealer.get_by_test_id("dealer-log").locator("li").count()
        dealer.keyboard.press("Alt+KeyR")
        dealer.wait_for_timeout(300)
        assert dealer.get_by_test_id("dealer-log").locator("li").count() == sent

        # Disabled buttons look disabled: faded, dashed, not-allowed; enabled ones do not.
        expect(dealer.get_by_test_id("dealer-reveal")).to_be_disabled()
        expect(dealer.get_by_test_id("dealer-open")).to_be_enabled()
        off, on = style(dealer, "dealer-reveal"), style(dealer, "dealer-open")
        assert float(off["opacity"]) < 0.7 and off["border"] == "dashed", off
        assert off["cursor"] == "not-allowed"
        assert float(on["opacity"]) == 1 and on["border"] == "solid", on
    finally:
        back_to_auto(dealer, server, table)
    assert not page_errors, page_errors
