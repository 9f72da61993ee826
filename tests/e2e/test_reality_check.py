"""An operator's session on a phone. The reality check: "Keep playing", "View history" (the
Bet Record in a tab of its own, the table left as it is) and "Quit" (to the operator's
return_url, else the lobby), in English, Thai and Hindi. Autoplay ends with the session."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from table_page import Bet, TablePage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from liveserver import LiveServer
from walletserver import OperatorServer, launch, seamless_deployment, signed_post

pytestmark = pytest.mark.browser
RETURN = "https://casino.example/lobby?p=1"


@pytest.fixture(scope="module")
def seamless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OperatorServer,
                                                                          LiveServer]]:
    with seamless_deployment(tmp_path_factory.mktemp("reality"), {"initial_balance": 50_000},
                             betting_seconds=6, reveal_interval=0.3) as deployment:
        yield deployment




def checked_at_once(server: LiveServer, player: str, url_tail: str, page: Page) -> None:
    """Launch ``player`` with a check due at once, open its table on ``page``."""
    session = launch(server, player, currency="THB", language="en",
                     limits={"reality_check_minutes": 1})
    with sqlite3.connect(server.data_dir / "livetable.sqlite3", timeout=10) as db:
        assert db.execute(
            "UPDATE sessions SET started_at = started_at - 60000, checked_at = checked_at - "
            "60000 WHERE session_id = ?", (session["session_id"],)).rowcount == 1
    page.goto(session["url"] + url_tail)
    TablePage(page, server.http + "/").wait_online()
    expect(page.get_by_test_id("reality-check")).to_be_visible(timeout=10_000)


def test_view_history_then_quit_to_the_operators_return_url(
        seamless: tuple[OperatorServer, LiveServer], phone: BrowserContext) -> None:
    _, server = seamless
    page = phone.new_page()
    page.route("https://casino.example/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<title>casino</title>back home"))
    checked_at_once(server, "rc-quit", f"&return_url={quote(RETURN, safe='')}", page)
    assert "return_url" not in page.url  # the fragment is dropped with the token
    dialog = page.get_by_test_id("reality-check")
    expect(page.get_by_test_id("reality-ack")).to_have_text("Keep playing")
    for lang, words in (("th", ("เล่นต่อ", "ดูประวัติ", "ออก")),
                        ("hi", ("खेलते रहें", "इतिहास देखें", "बाहर निकलें")),
                        ("en", ("Keep playing", "View history", "Quit"))):
        page.get_by_test_id("lang-switch").select_option(lang)
        for testid, text in zip(("reality-ack", "reality-history", "reality-quit"), words,
                                strict=True):
            expect(page.get_by_test_id(testid)).to_have_text(text)
    with phone.expect_page() as opened:
        page.get_by_test_id("reality-history").tap()
    record = opened.value
    record.wait_for_load_state()
    assert record.url.endswith("/records.html")
    expect(record.get_by_test_id("records-player")).to_contain_text("Rc-Quit")
    record.close()
    expect(dialog).to_be_visible()  # the table is as it was: the check still waits
    page.get_by_test_id("reality-quit").tap()
    page.wait_for_url(RETURN)
    expect(page.locator("body")).to_have_text("back home")


def test_quit_without_a_return_url_goes_to_the_lobby_and_keep_playing_goes_on(
        seamless: tuple[OperatorServer, LiveServer], phone: BrowserContext) -> None:
    _, server = seamless
    page = phone.new_page()
    checked_at_once(server, "rc-lobby", "&return_url=javascript%3Aalert(1)", page)  # not followed
    page.get_by_test_id("reality-ack").tap()  # Keep playing
    expect(page.get_by_test_id("reality-check")).to_be_hidden()
    page.evaluate("() => { document.getElementById('reality-check').hidden = false; }")
    page.get_by_test_id("reality-quit").tap()
    page.wait_for_url(f"{server.http}/index.html")




def test_autoplay_ends_when_the_operator_ends_the_session(
        seamless: tuple[OperatorServer, LiveServer], phone: BrowserContext) -> None:
    _, server = seamless
    session = launch(server, "ap-1", currency="THB", language="en")
    page = phone.new_page()
    page.goto(session["url"])
    table = TablePage(page, server.http + "/")
    table.wait_online()
    table.wait_betting(at_least_ms=3_000)
    table.place(Bet("P1", 100))
    page.get_by_test_id("autoplay-open").tap()
    page.get_by_test_id("autoplay-rounds").fill("50")
    page.get_by_test_id("autoplay-start").tap()
    status = page.get_by_test_id("autoplay-status")
    expect(status).to_have_attribute("data-played", "1")
    ended = signed_post(server, f"/api/operator/sessions/{session['session_id']}/end",
                        {"reason": "self_exclusion"})
    assert ended.status_code == 200, ended.text
    expect(status).to_have_attribute("data-state", "session_ended", timeout=10_000)
    expect(status).to_contain_text("Autoplay ended: the session ended")
