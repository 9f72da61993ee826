"""A session an operator launched, in the browser: the launch URL opens the table logged in
as that player, in the session's language, with the operator's balance and currency; a bet
is paid by the operator's wallet and the balance after the round is the operator's."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect
from table_page import Bet, TablePage, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from liveserver import LiveServer
from walletserver import OperatorServer, launch, seamless_deployment, signed_post

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def seamless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OperatorServer,
                                                                          LiveServer]]:
    with seamless_deployment(tmp_path_factory.mktemp("launch"),
                             {"initial_balance": 50_000}, betting_seconds=6,
                             reveal_interval=0.3) as deployment:
        yield deployment


def test_the_launch_url_opens_the_table_as_the_player_with_the_operators_money(
        context: BrowserContext, seamless: tuple[OperatorServer, LiveServer]) -> None:
    operator, server = seamless
    session = launch(server, "op-7781", currency="THB", language="th")
    page = context.new_page()
    page.goto(session["url"])
    table = TablePage(page, server.http + "/")
    table.wait_online()
    assert "#" not in page.url and "token" not in page.url  # the fragment is dropped
    # (the Thai strings load as the page connects: on a loaded run the page was online a
    # moment before they had come)
    expect(page.locator("html")).to_have_attribute("lang", "th")
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", "50000")
    # 50000 in THB's minor unit (satang) is ฿500.00, not "50,000 THB"
    expect(page.get_by_test_id("balance")).to_have_text("฿500.00")

    table.bet([Bet("P1", 100)])
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", "49800")
    wait_until(lambda: any(c["method"] == "credit"
                           for c in operator.state()["applied"].values()), timeout=60)
    after = operator.state()["balances"]["op-7781"]
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(after),
                                                             timeout=10_000)

    page.reload()  # the session is kept for the tab
    table.wait_online()
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(after))

    # the Bet Record of a launched player is theirs (the session of this tab), never "play
    # as a guest": the rules' disconnection policy sends players there
    page.goto(server.http + "/records.html")
    expect(page.locator("#records-player")).to_contain_text("Op-7781")
    expect(page.locator("#records-status")).not_to_contain_text("ผู้เยี่ยมชม")  # "guest"
    expect(page.locator("[data-bet-id]").first).to_be_visible(timeout=10_000)


#: Every language the page sets on <html lang>, in order, from its first script on.
LANGS_SET = """
window.__langs = [];
new MutationObserver((records) => {
  for (const r of records) {
    if (r.target === document.documentElement) window.__langs.push(r.target.lang);
  }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ["lang"] });
"""


def test_a_launched_page_opens_in_the_sessions_language_from_its_first_paint(
        context: BrowserContext, seamless: tuple[OperatorServer, LiveServer]) -> None:
    """The launch's language was switched to once the page had drawn itself in the
    browser's: English first, then the Thai strings, which had to load after the page's
    own. Now the page loads the launch's language before its first paint."""
    _, server = seamless
    session = launch(server, "lang-1", currency="THB", language="th")
    context.add_init_script(LANGS_SET)
    page = context.new_page()  # the context's locale is English
    page.goto(session["url"])
    TablePage(page, server.http + "/").wait_online()
    expect(page.locator("html")).to_have_attribute("lang", "th")
    langs = page.evaluate("window.__langs")
    assert langs and set(langs) == {"th"}, langs


@pytest.mark.parametrize(("currency", "language", "shown"), [
    ("THB", "th", "฿500.00"), ("JPY", "en", "¥50,000"), ("INR", "hi", "₹500.00")])
def test_money_is_shown_in_the_sessions_currency_with_its_decimals(
        context: BrowserContext, seamless: tuple[OperatorServer, LiveServer],
        currency: str, language: str, shown: str) -> None:
    """The operator's amounts are minor units: THB and INR have two decimals, JPY none."""
    _, server = seamless
    session = launch(server, f"cur-{currency.lower()}", currency=currency, language=language)
    page = context.new_page()
    page.goto(session["url"])
    TablePage(page, server.http + "/").wait_online()
    expect(page.get_by_test_id("balance")).to_have_text(shown)
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", "50000")
    page.close()


def _shift_start(server: LiveServer, session_id: str, ms: int) -> None:
    """Move the session's start and last reality check ``ms`` into the past (a test cannot
    wait a real minute)."""
    with sqlite3.connect(server.data_dir / "livetable.sqlite3", timeout=10) as db:
        assert db.execute(
            "UPDATE sessions SET started_at = started_at - ?, checked_at = checked_at - ? "
            "WHERE session_id = ?", (ms, ms, session_id)).rowcount == 1


def test_the_reality_check_holds_betting_until_acknowledged_then_the_session_ends(
        context: BrowserContext, seamless: tuple[OperatorServer, LiveServer]) -> None:
    _, server = seamless
    session = launch(server, "rc-1", currency="THB", language="en",
                     limits={"reality_check_minutes": 1})
    _shift_start(server, session["session_id"], 60_000)  # a check is due at once
    page = context.new_page()
    page.goto(session["url"])
    table = TablePage(page, server.http + "/")
    table.wait_online()
    dialog = page.get_by_test_id("reality-check")
    expect(dialog).to_be_visible(timeout=10_000)
    expect(page.get_by_test_id("reality-figures")).to_have_text(
        "You have played 1 min. Staked ฿0.00, returned ฿0.00: net ฿0.00.")
    table.wait_betting(at_least_ms=3_000)
    table.place(Bet("P1", 100))
    page.get_by_test_id("confirm").click()
    expect(page.get_by_test_id("bet-error")).to_contain_text("Answer the reality check first")
    page.get_by_test_id("reality-ack").click()
    expect(dialog).to_be_hidden()
    table.bet([Bet("P2", 100)])
    # the operator ends the session: the page says so and does not reconnect
    ended = signed_post(server, f"/api/operator/sessions/{session['session_id']}/end",
                        {"reason": "self_exclusion"})
    assert ended.status_code == 200, ended.text
    banner = page.get_by_test_id("banner-session-ended")
    expect(banner).to_be_visible(timeout=10_000)
    expect(banner).to_contain_text("you have excluded yourself from play")
    page.wait_for_timeout(2_000)  # no reconnect: no "reconnecting" overlay, the banner stays
    expect(page.get_by_test_id("conn-overlay")).to_be_hidden()
    expect(banner).to_be_visible()
    page.close()


def test_a_bet_past_a_session_limit_is_refused_with_the_limit_in_the_currency(
        context: BrowserContext, seamless: tuple[OperatorServer, LiveServer]) -> None:
    _, server = seamless
    session = launch(server, "rg-1", currency="THB", language="en",
                     limits={"max_stake_per_round": 150})
    page = context.new_page()
    page.goto(session["url"])
    table = TablePage(page, server.http + "/")
    table.wait_online()
    table.wait_betting(at_least_ms=3_000)
    table.place(Bet("P1", 100))  # stakes 200 (its withholding counts): past 150
    page.get_by_test_id("confirm").click()
    expect(page.get_by_test_id("bet-error")).to_contain_text(
        "your stake limit per round — ฿1.50 left of ฿1.50 this round")
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", "50000")
    page.close()
