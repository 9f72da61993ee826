"""The dealer console's answers where the dealer looks, and its betting time kept.

A refused command and a correction's answer were only in the event log, below the fold; the
betting time went back to 15 s on every reload.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, expect
from table_page import Server
from test_dealer import back_to_auto, set_mode, sign_in

pytestmark = pytest.mark.browser


def test_answers_show_next_to_the_controls_and_the_betting_time_is_kept(
        server: Server, context: BrowserContext) -> None:
    table = server.api("/api/tables")["tables"][-1]["id"]
    dealer = context.new_page()
    sign_in(dealer, server, table)
    seconds = dealer.get_by_test_id("dealer-betting-seconds")
    seconds.fill("25")
    seconds.dispatch_event("change")
    dealer.reload()
    expect(dealer.get_by_test_id("dealer-console")).to_be_visible()
    expect(seconds).to_have_value("25")
    try:
        set_mode(dealer, auto=False)
        dealer.get_by_test_id("dealer-start-shoe").click()
        near = dealer.get_by_test_id("dealer-feedback")
        expect(near).to_have_attribute("data-kind", "ack")  # shuffling: scan the opening card
        dealer.get_by_test_id("dealer-card-input").fill("5S")  # the opening card
        dealer.get_by_test_id("dealer-card-input").press("Enter")
        seconds.fill("700")  # longer than the server allows: refused
        dealer.get_by_test_id("dealer-open").click()
        expect(near).to_have_attribute("data-kind", "error")
        expect(near).to_contain_text("refused")
        dealer.get_by_test_id("dealer-open").scroll_into_view_if_needed()
        expect(near).to_be_in_viewport()  # under the buttons, not in the log below
        seconds.fill("25")
        dealer.get_by_test_id("dealer-open").click()
        expect(dealer.get_by_test_id("dealer-phase")).to_have_attribute("data-phase", "betting")
        dealer.get_by_test_id("dealer-card-input").fill("2C")  # the burn
        dealer.get_by_test_id("dealer-card-input").press("Enter")
        expect(dealer.get_by_test_id("dealer-entered")).to_contain_text("2")
        dealer.get_by_test_id("dealer-correct").click()  # a dealer alone: approval needed
        answer = dealer.get_by_test_id("dealer-correction-feedback")
        expect(answer).to_have_attribute("data-kind", "error")
        expect(answer).to_contain_text("refused")
        dealer.get_by_test_id("dealer-correct").scroll_into_view_if_needed()
        expect(answer).to_be_in_viewport()
    finally:
        back_to_auto(dealer, server, table)
