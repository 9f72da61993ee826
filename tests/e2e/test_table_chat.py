"""The table chat in a real browser: two players (a desktop and a phone) talk at the table,
a line of markup stays text, the panel speaks English, Thai and Hindi, and the dealer
console deletes a line, mutes a player and signs a dealer in — whom the table then shows.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect
from table_page import Server

pytestmark = pytest.mark.browser

TABLE = "t1"


def phone_context(browser: Browser) -> BrowserContext:
    """A phone's browser: 390 × 844, touch, English unless the page is told otherwise."""
    return browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                               has_touch=True, device_scale_factor=2, locale="en-US")


#: A line that would run script if it ever became markup.
MARKUP = '<img src=x onerror="window.__chatXss=1"><b>bold</b>'


def open_table(page: Page, server: Server, table: str = TABLE) -> None:
    page.goto(f"{server.url}table.html?table={table}")
    expect(page.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
    expect(page.get_by_test_id("chat-input")).to_be_enabled()


def say(page: Page, text: str) -> None:
    field = page.get_by_test_id("chat-input")
    field.scroll_into_view_if_needed()
    field.fill(text)
    field.press("Enter")
    expect(field).to_have_value("")


def test_a_desktop_and_a_phone_player_chat_and_markup_stays_text(
    server: Server, browser: Browser, context: BrowserContext, page_errors: list[str]
) -> None:
    desktop = context.new_page()
    phone_ctx = phone_context(browser)
    phone_ctx.on("page", page_errors.watch)  # type: ignore[attr-defined, call-overload]  # PageErrors
    try:
        phone = phone_ctx.new_page()
        open_table(desktop, server)
        open_table(phone, server)

        say(desktop, "hello from the desktop")
        expect(phone.get_by_test_id("chat-text").filter(
            has_text="hello from the desktop")).to_have_count(1)
        say(phone, MARKUP)
        for page in (desktop, phone):
            shown = page.get_by_test_id("chat-text").filter(has_text="onerror")
            expect(shown).to_have_text(MARKUP)  # the characters, as typed
            assert page.locator("#chat img, #chat b").count() == 0
            assert page.evaluate("() => window.__chatXss") is None
        # a phone's panel fits its screen: the field and Send are within the width
        box = phone.get_by_test_id("chat-send").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
    finally:
        phone_ctx.close()
    assert page_errors == []


@pytest.mark.parametrize(("lang", "title", "send"), [
    ("en", "Table chat", "Send"), ("th", "แชทโต๊ะ", "ส่ง"), ("hi", "टेबल चैट", "भेजें")])
def test_the_chat_panel_speaks_the_page_s_language(
    server: Server, browser: Browser, lang: str, title: str, send: str,
    page_errors: list[str]
) -> None:
    ctx = phone_context(browser)
    ctx.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
    try:
        page = ctx.new_page()
        open_table(page, server)
        expect(page.get_by_test_id("chat-title")).to_have_text(title)
        expect(page.get_by_test_id("chat-send")).to_have_text(send)
        # and it follows a switch of language without a reload
        page.get_by_test_id("lang-switch").select_option("en")
        expect(page.get_by_test_id("chat-title")).to_have_text("Table chat")
    finally:
        ctx.close()


def test_a_viewer_reads_only(server: Server, browser: Browser) -> None:
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        # no token and no demo guest to fall back on: the page is a viewer's
        page.route("**/api/guest", lambda route: route.fulfill(status=403, body="{}"))
        page.goto(f"{server.url}table.html?table={TABLE}")
        expect(page.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
        expect(page.get_by_test_id("chat-input")).to_be_disabled()
        expect(page.get_by_test_id("chat-input")).to_have_attribute(
            "placeholder", "Viewers read only: sign in as a player to chat")
    finally:
        ctx.close()


def test_the_console_deletes_mutes_and_signs_a_dealer_in(
    server: Server, context: BrowserContext, page_errors: list[str]
) -> None:
    # The dealer tests' table: a dealer signed in stays on its table (no command signs one
    # out), and the automatic table's lobby card must keep saying "Dealt by the server" for
    # the tests that come after this one in any order.
    table = server.api("/api/tables")["tables"][-1]["id"]
    player = context.new_page()
    open_table(player, server, table)
    dealer = context.new_page()
    dealer.goto(f"{server.url}dealer.html")
    dealer.get_by_test_id("dealer-token").fill(server.dealer_token())
    dealer.get_by_test_id("dealer-login").click()
    dealer.get_by_test_id("dealer-table").select_option(table)
    expect(dealer.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")

    say(player, "first line, to delete")
    on_console = dealer.get_by_test_id("chat-line").filter(has_text="first line, to delete")
    expect(on_console).to_have_count(1)
    on_console.get_by_test_id("chat-delete").click()
    expect(player.get_by_test_id("chat-text").filter(
        has_text="first line, to delete")).to_have_count(0)
    expect(on_console).to_have_count(0)

    player.wait_for_timeout(2_100)  # one line per 2 s
    say(player, "second line")
    second = dealer.get_by_test_id("chat-line").filter(has_text="second line")
    second.get_by_test_id("chat-mute").click()
    expect(player.get_by_test_id("chat-line").filter(
        has_text="A player was muted for 5 min.")).to_have_count(1)
    # a system line is said in the page's language (its notice, not its English text)
    player.get_by_test_id("lang-switch").select_option("th")
    expect(player.get_by_test_id("chat-line").filter(
        has_text="ผู้เล่นคนหนึ่งถูกปิดแชท 5 นาที")).to_have_count(1)
    player.get_by_test_id("lang-switch").select_option("en")
    player.wait_for_timeout(2_100)
    field = player.get_by_test_id("chat-input")
    field.fill("am I muted?")
    field.press("Enter")  # not say(): the refusal may put it back before the field is read
    expect(player.get_by_test_id("chat-status")).to_have_text(
        "The dealer has muted you for 5 more min.")  # how long, not "a while"
    expect(field).to_have_value("am I muted?")  # the refused line back, to amend

    lobby = context.new_page()
    lobby.goto(server.url)
    expect(lobby.get_by_test_id(f"lobby-conn-{table}")).to_have_attribute("data-state", "online")
    dealer.get_by_test_id("dealer-presenter-name").fill("Mai")
    dealer.get_by_test_id("dealer-presenter-sign-in").click()
    expect(player.get_by_test_id("presenter-name")).to_have_text("Dealer: Mai")
    expect(lobby.get_by_test_id(f"lobby-dealer-{table}")).to_have_text("Dealer: Mai")  # live
    expect(dealer.get_by_test_id("dealer-presenter-now")).to_contain_text("Mai")
    dealer.get_by_test_id("chat-input").fill("Good luck, everyone")
    dealer.get_by_test_id("chat-input").press("Enter")
    said = player.get_by_test_id("chat-line").filter(has_text="Good luck, everyone")
    expect(said).to_have_attribute("data-role", "dealer")
    expect(said).to_contain_text("Mai")
    # every name shown is isolated (<bdi>): a right-to-left name cannot reorder the line
    expect(said.locator(".chat__from bdi")).to_have_text("Mai")
    expect(player.locator("[data-testid=presenter-name] bdi")).to_have_text("Mai")
    expect(lobby.locator(f"[data-testid=lobby-dealer-{table}] bdi")).to_have_text("Mai")
    expect(dealer.locator("[data-testid=dealer-whoami] bdi")).to_have_text("Dee")
    expect(player.locator("bdi#player-name")).to_have_count(1)
    # a player page opened now learns who deals from its welcome
    late = context.new_page()
    open_table(late, server, table)
    expect(late.get_by_test_id("presenter-name")).to_have_text("Dealer: Mai")
    expect(late.get_by_test_id("chat-line").filter(has_text="Good luck")).to_have_count(1)
    # the moderation's answers reach the console's log too
    expect(dealer.get_by_test_id("dealer-log")).to_contain_text("Dealer sign-in")
    assert page_errors == []


def test_a_phone_held_sideways_opens_the_chat_as_a_sheet(
    server: Server, browser: Browser, page_errors: list[str]
) -> None:
    # sideways the video fills the screen: the chat is a sheet opened by "Chat"
    ctx = browser.new_context(viewport={"width": 844, "height": 390}, is_mobile=True,
                              has_touch=True, device_scale_factor=2, locale="en-US")
    ctx.on("page", page_errors.watch)  # type: ignore[attr-defined, call-overload]  # PageErrors
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}table.html?table={TABLE}")
        expect(page.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
        expect(page.get_by_test_id("chat-input")).to_be_hidden()  # shut: the video shows
        page.get_by_test_id("open-chat").click()
        expect(page.get_by_test_id("open-chat")).to_have_attribute("aria-expanded", "true")
        field = page.get_by_test_id("chat-input")
        expect(field).to_be_visible()
        expect(field).to_be_enabled()
        field.fill("hello sideways")
        field.press("Enter")
        expect(page.get_by_test_id("chat-text").filter(has_text="hello sideways")).to_have_count(1)
        box = page.get_by_test_id("chat-send").bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= 844 and box["y"] + box["height"] <= 390
        page.get_by_test_id("close-chat").click()
        expect(field).to_be_hidden()
    finally:
        ctx.close()
    assert page_errors == []
