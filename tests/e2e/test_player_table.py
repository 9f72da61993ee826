"""The demo player's table, as found playing it: what the page says when the guest's token
has expired, guests' names in the page's language, and the layout with and without video at
every common screen size."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from procutil import stop
from table_page import Server, TablePage, get_json
from test_dealer import back_to_auto, set_mode, sign_in
from test_video import start_livetable

from livetable.auth import mint, new_guest_id

pytestmark = pytest.mark.browser

GUEST_EXPIRED = {
    "en": "Your guest session expired",
    "th": "เซสชันผู้เยี่ยมชมของคุณหมดอายุแล้ว",
    "hi": "आपका अतिथि सत्र समाप्त हो गया",
}
GUEST = {"en": "Guest ", "th": "ผู้เยี่ยมชม ", "hi": "अतिथि "}


@pytest.mark.parametrize("lang", ["th", "hi", "en"])
def test_an_expired_guest_is_told_in_the_pages_language_before_becoming_a_new_one(
        server: Server, browser: Browser, lang: str) -> None:
    old = new_guest_id()
    expired = mint(server.env["LIVETABLE_SECRET"].encode(), "guest", old, "Guest OLD1", -60)
    kept = json.dumps({"token": expired, "player": {"id": old, "name": "Guest OLD1"}})
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    ctx.add_init_script(f"""if (!sessionStorage.getItem('seeded')) {{
        sessionStorage.setItem('seeded', '1');
        localStorage.setItem('livetable.lang', '{lang}');
        localStorage.setItem('livetable.guest', {json.dumps(kept)}); }}""")
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}table.html?table=t1")
        notice = page.get_by_test_id("bet-notice")
        expect(notice).to_be_visible(timeout=15_000)
        expect(notice).to_contain_text(GUEST_EXPIRED[lang])
        TablePage(page, server.url).wait_online()
        new = json.loads(page.evaluate("localStorage.getItem('livetable.guest')"))
        assert new["player"]["id"] != old
        # the new guest's name, in the page's language ("Guest 7QX2" from the server)
        name = page.locator("#player-name")
        expect(name).to_have_text(GUEST[lang] + new["player"]["name"].split()[-1])
    finally:
        ctx.close()


def test_a_refused_chat_line_stays_in_the_input_and_a_typed_dealer_name_is_capitalised(
        server: Server, browser: Browser) -> None:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        # the dealer tests' table: the automatic one's lobby card says "Dealt by the server"
        table = server.api("/api/tables")["tables"][-1]["id"]
        player = ctx.new_page()
        TablePage(player, server.url).open(table)
        field = player.get_by_test_id("chat-input")
        expect(field).to_be_enabled()
        field.fill("first line")
        field.press("Enter")
        expect(field).to_have_value("")
        field.fill("too soon after the first")  # one line per 2 s: refused
        field.press("Enter")
        expect(player.get_by_test_id("chat-status")).not_to_be_empty()
        expect(field).to_have_value("too soon after the first")  # kept, to send again
        # the dealer typed their name in lower case at the console
        dealer = ctx.new_page()
        dealer.goto(f"{server.url}dealer.html")
        dealer.get_by_test_id("dealer-token").fill(server.dealer_token())
        dealer.get_by_test_id("dealer-login").click()
        dealer.get_by_test_id("dealer-table").select_option(table)
        expect(dealer.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
        dealer.get_by_test_id("dealer-presenter-name").fill("anna")
        dealer.get_by_test_id("dealer-presenter-sign-in").click()
        expect(player.get_by_test_id("presenter-name")).to_have_text("Dealer: Anna")
        late = ctx.new_page()
        TablePage(late, server.url).open(table)
        expect(late.get_by_test_id("presenter-name")).to_have_text("Dealer: Anna")
    finally:
        ctx.close()


@pytest.mark.parametrize("size", [(390, 844), (844, 390)])
def test_a_phones_betting_controls_are_44_px_touch_targets(
        server: Server, browser: Browser, size: tuple[int, int]) -> None:
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]}, is_mobile=True,
                              has_touch=True, locale="en-US")
    try:
        page = ctx.new_page()
        TablePage(page, server.url).open("t1")
        small = page.evaluate("""() => [...document.querySelectorAll(
              '#chips .chip, #betbar .actions .btn')].map((el) => {
                const r = el.getBoundingClientRect();
                return [el.dataset.testid || el.id, Math.round(r.width), Math.round(r.height)];
              }).filter(([, w, h]) => w < 44 || h < 44)""")
        assert small == [], small
    finally:
        ctx.close()


def test_a_special_hand_reads_as_its_name_not_a_points_value(server: Server,
                                                              browser: Browser) -> None:
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}rules.html")
        label = page.evaluate("async () => (await import('/js/common.js')).handLabel('7.1')")
        assert label == "Flush with No Point (rank 7.1)", label
    finally:
        ctx.close()


def test_hindi_says_returned_with_one_word() -> None:
    """"Returned" (the amount given back) was "वापस", "वापसी" and "रिटर्न" on one page."""
    hindi = (Path(__file__).resolve().parents[2] / "static/js/i18n/hi.js").read_text()
    english = (Path(__file__).resolve().parents[2] / "static/js/i18n/en.js").read_text()
    keys = [k for k, v in re.findall(r'"([\w.]+)": "([^"]*)"', english)
            if re.search(r"\{returned\}|[Rr]eturned \{", v) or k.endswith(".returned")]
    said = dict(re.findall(r'"([\w.]+)": "([^"]*)"', hindi))
    assert keys
    for key in keys:
        assert "वापस" not in said[key] and "रिटर्न" in said[key], (key, said[key])


def test_the_presenters_photo_is_a_face_not_a_dot_on_a_phone(server: Server,
                                                             browser: Browser) -> None:
    """21 × 21 px was too small to know the dealer by: the photo is 32 px upright."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                              has_touch=True, locale="en-US")
    try:
        page = ctx.new_page()
        TablePage(page, server.url).open("t1")
        size = page.evaluate("""() => {
            const img = document.createElement('img');
            img.className = 'presenter__photo';
            const box = document.querySelector('#presenter');
            box.hidden = false;
            box.append(img);
            const r = img.getBoundingClientRect();
            return [r.width, r.height]; }""")
        assert min(size) >= 32, size
    finally:
        ctx.close()


def test_a_phone_held_sideways_without_video_has_no_empty_band(server: Server,
                                                               browser: Browser) -> None:
    """The table used to sit at the screen's foot with 130 px of nothing above it."""
    ctx = browser.new_context(viewport={"width": 844, "height": 390}, is_mobile=True,
                              has_touch=True, locale="en-US")
    try:
        page = ctx.new_page()
        TablePage(page, server.url).open("t1")
        expect(page.get_by_test_id("stage")).to_have_attribute("data-video", "off")
        gap = page.evaluate("""() => document.querySelector('#felt').getBoundingClientRect().top
            - document.querySelector('.tablebar').getBoundingClientRect().bottom""")
        assert gap <= 16, gap
    finally:
        ctx.close()


@pytest.mark.parametrize(("lang", "pattern", "typed", "iso"), [
    ("th", "dd/mm/yyyy", "4/12/2569", "2026-12-04"),   # the Buddhist era, day first
    ("hi", "dd/mm/yyyy", "4/12/2026", "2026-12-04"),
    ("en", "mm/dd/yyyy", "12/4/2026", "2026-12-04"),
])
def test_the_bet_records_date_filters_are_in_the_pages_locale(
        server: Server, browser: Browser, lang: str, pattern: str, typed: str,
        iso: str) -> None:
    ctx = browser.new_context(locale="en-US")  # the browser's locale is not the page's
    ctx.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}records.html")
        field = page.get_by_test_id("records-from")
        expect(field).to_have_attribute("placeholder", pattern)
        field.fill(typed)
        field.dispatch_event("change")
        expect(field).to_have_attribute("data-iso", iso)
        expect(field).to_have_value(typed)  # shown back as the page's locale writes it
    finally:
        ctx.close()


def test_the_console_mutes_for_a_chosen_time_the_player_is_told_how_long_and_unmute_lifts_it(
        server: Server, browser: Browser) -> None:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        player = ctx.new_page()
        TablePage(player, server.url).open("t1")
        dealer = ctx.new_page()
        dealer.goto(f"{server.url}dealer.html")
        dealer.get_by_test_id("dealer-token").fill(server.dealer_token())
        dealer.get_by_test_id("dealer-login").click()
        dealer.get_by_test_id("dealer-table").select_option("t1")
        expect(dealer.get_by_test_id("conn-state")).to_have_attribute("data-state", "online")
        field = player.get_by_test_id("chat-input")
        field.fill("a line to mute me for")
        field.press("Enter")
        line = dealer.get_by_test_id("chat-line").filter(has_text="a line to mute me for")
        line.get_by_test_id("chat-mute-minutes").select_option("15")
        line.get_by_test_id("chat-mute").click()
        expect(player.get_by_test_id("chat-line").filter(
            has_text="A player was muted for 15 min.")).to_have_count(1)
        player.wait_for_timeout(2_100)  # one line per 2 s
        field.fill("still muted?")
        field.press("Enter")
        expect(player.get_by_test_id("chat-status")).to_have_text(
            "The dealer has muted you for 15 more min.")
        line.get_by_test_id("chat-unmute").click()
        expect(dealer.get_by_test_id("dealer-log")).to_contain_text("0 min")
        field.fill("free again")
        field.press("Enter")
        expect(field).to_have_value("")
        expect(player.get_by_test_id("chat-text").filter(has_text="free again")).to_have_count(1)
    finally:
        ctx.close()


def test_the_dealer_leaves_the_table_page_when_auto_dealing_resumes(
        server: Server, browser: Browser) -> None:
    table = server.api("/api/tables")["tables"][-1]["id"]  # the dealer tests' table
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    dealer = ctx.new_page()
    try:
        player = ctx.new_page()
        TablePage(player, server.url).open(table)
        sign_in(dealer, server, table)
        set_mode(dealer, auto=False)
        dealer.get_by_test_id("dealer-presenter-name").fill("Bee")
        dealer.get_by_test_id("dealer-presenter-sign-in").click()
        expect(player.get_by_test_id("presenter-name")).to_have_text("Dealer: Bee")
        set_mode(dealer, auto=True)
        expect(player.get_by_test_id("presenter")).to_be_hidden()
    finally:
        back_to_auto(dealer, server, table)
        ctx.close()


def test_a_console_refusal_is_said_once(server: Server, browser: Browser) -> None:
    """"Cards are typed only in manual mode. (cards are fed only in manual mode)": once."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        dealer = ctx.new_page()
        sign_in(dealer, server, "t1")  # t1 deals by itself: a typed card is refused
        # ... for its mode while betting (in another phase the phase is refused first)
        deadline = time.monotonic() + 60
        while get_json(server.url + "api/tables/t1")["phase"] != "betting":
            assert time.monotonic() < deadline, "t1 never opened betting"
            time.sleep(0.05)
        field = dealer.get_by_test_id("dealer-card-input")
        field.fill("7H")
        field.press("Enter")
        refused = dealer.get_by_test_id("dealer-log").locator("li[data-kind=error]").first
        expect(refused).to_contain_text("manual mode")
        assert refused.inner_text().lower().count("manual mode") == 1, refused.inner_text()
    finally:
        ctx.close()


def test_the_chat_is_still_there_after_the_server_restarts(browser: Browser,
                                                            tmp_path: Path) -> None:
    data = tmp_path / "restart"
    data.mkdir()
    ctx = browser.new_context(locale="en-US")
    try:
        for line in ("said before the restart", None):
            server = start_livetable(data, "--tables", "1")
            try:
                page = ctx.new_page()
                TablePage(page, server.url).open("t1")
                if line:
                    field = page.get_by_test_id("chat-input")
                    field.fill(line)
                    field.press("Enter")
                    expect(field).to_have_value("")
                kept = page.get_by_test_id("chat-text").filter(has_text="said before the restart")
                expect(kept).to_have_count(1)
                page.close()
            finally:
                stop(server.process)
    finally:
        ctx.close()
