"""An operator's player at the table, as found playing it: the Bet Record's balance, the
players-online count, KWD on a phone, the rules page's limits, and the end of a session."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from layout import overlaps
from playwright.sync_api import Browser, BrowserContext, Page, expect
from round_dealer import P1_WINS, Dealer
from table_page import Bet, TablePage, wait_until
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from liveserver import LiveServer
from walletserver import OperatorServer, launch, seamless_deployment, signed_post

pytestmark = pytest.mark.browser

Deployment = tuple[OperatorServer, LiveServer]


@pytest.fixture(scope="module")
def seamless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with seamless_deployment(tmp_path_factory.mktemp("operator-player"),
                             {"initial_balance": 100_000}, betting_seconds=6,
                             reveal_interval=0.3) as deployment:
        yield deployment


def opened(context: BrowserContext, server: LiveServer, player: str, **fields: object) -> Page:
    session = launch(server, player, **fields)  # type: ignore[arg-type]  # the launch's own fields
    page = context.new_page()
    page.goto(session["url"])
    page.evaluate("(s) => { window.__session = s; }", session["session_id"])
    TablePage(page, server.http + "/").wait_online()
    return page


def test_the_bet_record_shows_no_ledger_balance_for_an_operators_player(
        context: BrowserContext, seamless: Deployment) -> None:
    """The ledger's balance_after is not the operator's wallet (it came out as the round's
    returned amount): no "Balance after" column, and the API gives none."""
    _, server = seamless
    page = opened(context, server, "rec-1", currency="THB", language="en")
    table = TablePage(page, server.http + "/")
    table.bet([Bet("P1", 100)])
    page.goto(server.http + "/records.html")
    wait_until(lambda: (page.reload() or True) and page.get_by_test_id("bet-row").first
               .get_attribute("data-returned") not in (None, ""), timeout=40)
    row = page.get_by_test_id("bet-row").first
    expect(row).to_have_attribute("data-balance-after", "")
    expect(page.locator('th[data-i18n="records.balance_after"]')).to_be_hidden()
    assert row.locator("td").count() == page.locator("thead th:visible").count()
    assert "Balance after" not in page.locator("table").first.inner_text()


@pytest.mark.parametrize(("currency", "lang"), [("THB", "th"), ("KWD", "en")])
def test_players_online_is_a_count_not_money(context: BrowserContext, seamless: Deployment,
                                             currency: str, lang: str) -> None:
    _, server = seamless
    page = opened(context, server, f"online-{currency.lower()}", currency=currency,
                  language=lang)
    online = page.get_by_test_id("online")
    expect(online).to_be_visible()
    n = online.get_attribute("data-online")
    assert n and int(n) >= 1
    text = online.inner_text()
    assert n in text.split(), text  # "1 online", never "฿0.01 online"
    assert "฿" not in text and "KWD" not in text and "." not in text


def test_kwd_chips_and_stakes_fit_on_a_phone(browser: Browser, seamless: Deployment) -> None:
    _, server = seamless
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                              has_touch=True, locale="en-US")
    try:
        page = opened(ctx, server, "kwd-phone", currency="KWD", language="en")
        table = TablePage(page, server.http + "/")
        table.wait_betting()
        chips = page.locator("#chips .chip")
        assert chips.count() >= 3
        cut = page.evaluate("""() => [...document.querySelectorAll('#chips .chip span')]
            .filter((s) => s.scrollWidth > s.parentElement.clientWidth)
            .map((s) => s.textContent)""")
        assert cut == [], cut
        value = int(chips.first.get_attribute("data-value") or 0)
        chips.first.tap()
        for _ in range(3):
            page.get_by_test_id("spot-P1").tap()
        stake = page.locator("[data-testid=stake-P1] .stake").first
        expect(stake).to_be_visible()
        lines = page.evaluate("""(el) => { const r = document.createRange();
            r.selectNodeContents(el);  // one box per line of text
            return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; }""",
                              stake.element_handle())
        assert lines == 1, (stake.inner_text(), lines)  # one line, not "KWD 1.00 / 0"
        assert "KWD" not in stake.inner_text() and value > 0
    finally:
        ctx.close()


def test_the_rules_page_shows_the_sessions_currency_and_limits(
        context: BrowserContext, seamless: Deployment) -> None:
    _, server = seamless
    page = opened(context, server, "rules-kwd", currency="KWD", language="en")
    limits = page.get_by_test_id("limits").inner_text()
    page.goto(server.http + "/rules.html#limits")
    cells = page.locator("table.limits [data-key]")
    # filled once the session is read ("…" until then): wait for the last cell
    expect(cells.last).to_contain_text("KWD")
    texts = cells.all_inner_texts()
    assert all("KWD" in x for x in texts), texts
    # the same figures as the table page showed this player
    assert texts[0].replace("\u00a0", " ") in limits.replace("\u00a0", " "), (texts, limits)


@pytest.mark.parametrize(("lang", "words"), [
    ("en", "excluded yourself"), ("th", "ระงับการเล่น"), ("hi", "स्वयं को खेल से अलग")])
def test_an_ended_session_says_why_offers_the_way_back_and_stays_ended(
        context: BrowserContext, seamless: Deployment, lang: str, words: str) -> None:
    _, server = seamless
    back = "https://operator.example/lobby?from=livetable"
    session = launch(server, f"end-{lang}", currency="THB", language=lang, return_url=back)
    page = context.new_page()
    page.goto(session["url"])
    TablePage(page, server.http + "/").wait_online()
    ended = signed_post(server, f"/api/operator/sessions/{session['session_id']}/end",
                        {"reason": "self_exclusion"})
    assert ended.status_code == 200, ended.text
    for attempt in ("at once", "after a reload"):
        banner = page.get_by_test_id("banner-session-ended")
        expect(banner).to_be_visible(timeout=10_000)
        expect(banner).to_contain_text(words)
        assert "self_exclusion" not in banner.inner_text(), attempt
        expect(page.get_by_test_id("session-return")).to_have_attribute("href", back)
        expect(page.get_by_test_id("phase")).to_have_attribute("data-phase", "ended")
        # no demo guest took the player's place
        assert page.evaluate("localStorage.getItem('livetable.guest')") is None, attempt
        expect(page.get_by_test_id("confirm")).to_be_disabled()
        page.reload()
    page.close()


def test_a_refusal_clears_when_a_later_bet_is_taken_and_never_covers_the_hands(
        browser: Browser, seamless: Deployment) -> None:
    """A refusal goes once a later bet is taken; one still up when the cards come out stands
    off the hands. The round is a scripted dealer's (manual mode): betting stays open while
    the page is read, and the cards come out only once the refusal is on screen, however
    slow the machine."""
    _, server = seamless
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                              has_touch=True, locale="en-US")
    with connect(server.ws_dealer) as ws:
        dealer = Dealer(ws, server, "t1")
        try:
            dealer.manual_round_open()
            page = opened(ctx, server, "toast-1", currency="THB", language="en",
                          limits={"max_stake_per_round": 250})
            table = TablePage(page, server.http + "/")
            error = page.get_by_test_id("bet-error")
            table.wait_betting()
            table.place(Bet("P1", 100))
            table.place(Bet("P2", 100))
            page.get_by_test_id("confirm").tap()
            expect(error).to_be_visible()  # 400 staked (withholding counts): past 250
            table.place(Bet("P3", 100))
            table.confirm([Bet("P3", 100)])
            expect(error).to_be_hidden()  # a later bet was taken: the refusal no longer stands
            # A refusal still up when the cards come out: off the hands.
            table.place(Bet("P1", 100))
            table.place(Bet("P2", 100))
            page.get_by_test_id("confirm").tap()
            expect(error).to_be_visible()  # 200 taken and 400 more: past 250
            dealer.deal_and_reveal(P1_WINS)
            table.wait_hand("BANKER", timeout=30_000)
            expect(page.get_by_test_id("result-P1")).not_to_be_empty()
            expect(error).to_be_visible()
            assert overlaps(page, "bet-error", ["[data-testid^=hand-]", ".result", "#win"]) == []
        finally:
            ctx.close()
            dealer.back_to_auto()
