"""Many tables, on a phone: the lobby shows each table's picture — a still of its live video,
grabbed by the server and refreshed, or the table drawn when there is no picture — with who
deals, players online and the limits in the player's currency; the table switches to another
table from inside the game. (The video is the test studio's: tests/e2e/test_video.py.)"""

from __future__ import annotations

from playwright.sync_api import BrowserContext, expect
from table_page import Server
from test_video import studio  # noqa: F401  # the fixture: a live HLS stream on t1

from livetable.cli.media import MediaServer


def test_the_lobby_shows_each_tables_picture_and_the_table_switches(
        studio: tuple[Server, MediaServer], phone: BrowserContext) -> None:  # noqa: F811
    server, _ = studio
    page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # what a table page of a launched THB session kept for this tab
    phone.add_init_script("""sessionStorage.setItem('livetable.terms', JSON.stringify(
        {currency: 'THB', limits: {min: 1000, max: 500000, pair_min: 1000, pair_max: 100000,
                                   round_max: 2000000}}))""")
    page.goto(f"{server.url}index.html")
    still = page.get_by_test_id("lobby-still-t1")
    expect(still).to_be_visible(timeout=30_000)  # the server grabbed a frame of t1's video
    assert page.evaluate("() => document.querySelector('[data-testid=lobby-still-t1]')"
                         ".naturalWidth") == 320
    first = still.get_attribute("src")
    expect(page.get_by_test_id("lobby-drawn-t1")).to_be_hidden()
    # t2's stream leads nowhere: no still, the table is drawn from its state
    drawn = page.get_by_test_id("lobby-drawn-t2")
    expect(drawn).to_be_visible()
    expect(drawn.locator(".mini-hand")).to_have_count(6)
    expect(page.get_by_test_id("lobby-still-t2")).to_be_hidden()
    card = page.get_by_test_id("lobby-table-t1")
    expect(card).to_contain_text("Bets ฿10.00–฿5,000.00")  # the session's currency and limits
    expect(page.get_by_test_id("lobby-dealer-t1")).to_have_text("Dealt by the server")
    expect(page.get_by_test_id("lobby-online-t1")).to_be_visible()
    # refreshed: a new still is asked for every 10 s
    page.wait_for_function("(first) => document.querySelector('[data-testid=lobby-still-t1]')"
                           ".getAttribute('src') !== first", arg=first, timeout=20_000)
    for lang, words in (("th", "ภาพโต๊ะขณะนี้"), ("hi", "टेबल अभी")):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(still).to_have_attribute("alt", f"Pok Deng T1: {words}")

    # from inside the game: t1 → t2, the same guest
    page.get_by_test_id("lang-switch").select_option("en")
    page.goto(f"{server.url}table.html?table=t1")
    expect(page.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
    guest = page.evaluate("() => localStorage.getItem('livetable.guest')")
    switch = page.get_by_test_id("table-switch")
    expect(switch).to_have_attribute("aria-label", "Switch table")
    expect(switch.locator("option")).to_have_count(2)
    switch.select_option("t2")
    page.wait_for_url(f"{server.url}table.html?table=t2")
    expect(page.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
    expect(page.get_by_test_id("table-name")).to_have_text("Pok Deng T2")
    assert page.evaluate("() => localStorage.getItem('livetable.guest')") == guest
    expect(page.get_by_test_id("table-switch")).to_have_value("t2")
    for lang, words in (("th", "เปลี่ยนโต๊ะ"), ("hi", "टेबल बदलें")):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(page.get_by_test_id("table-switch")).to_have_attribute("aria-label", words)
    assert not errors, errors
