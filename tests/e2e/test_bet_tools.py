"""On a phone: the chip on all five Players in one tap, up to five favourite layouts kept in
the browser for the session's currency, and Rebet/Double beside them — in English, Thai and
Hindi.
"""

from __future__ import annotations

import json

from playwright.sync_api import BrowserContext, Page, expect
from table_page import Server, TablePage

PLAYERS = ["P1", "P2", "P3", "P4", "P5"]




def stakes(page: Page, kind: str) -> list[int]:
    return [int(page.get_by_test_id(f"stake-{s}").get_attribute(f"data-{kind}") or 0)
            for s in PLAYERS]


def test_all_players_favourites_and_double_on_a_phone(server: Server,
                                                      phone: BrowserContext) -> None:
    page = phone.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    table = TablePage(page, server.url).open("t1")
    table.wait_betting(at_least_ms=4_500)
    table.choose_chip(50)
    page.get_by_test_id("all-players").tap()
    assert stakes(page, "draft") == [50] * 5
    page.get_by_test_id("save-layout").tap()
    fav = page.get_by_test_id("favourite-0")
    expect(fav).to_contain_text("P1–P5 50")
    page.get_by_test_id("clear").tap()
    assert stakes(page, "draft") == [0] * 5
    fav.locator(".fav__use").tap()  # the favourite, back as the draft
    assert stakes(page, "draft") == [50] * 5
    page.get_by_test_id("double").tap()  # Rebet and Double are kept
    assert stakes(page, "draft") == [100] * 5
    page.get_by_test_id("confirm").tap()
    expect(page.get_by_test_id("stake-P5")).to_have_attribute("data-confirmed", "100")
    assert stakes(page, "confirmed") == [100] * 5

    # kept across a reload, for this currency; five at most
    page.reload()
    table.wait_online()
    expect(page.get_by_test_id("favourites")).to_have_attribute("data-count", "1")
    five = [{f"P{n}": 10} for n in range(1, 6)]
    page.evaluate("(v) => localStorage.setItem('livetable.favourites', v)",
                  json.dumps({"-": five}))
    page.reload()
    table.wait_online()
    expect(page.get_by_test_id("favourites")).to_have_attribute("data-count", "5")
    save = page.get_by_test_id("save-layout")
    expect(save).to_be_disabled()
    expect(save).to_have_attribute("title", "5 favourites saved: delete one first")
    page.get_by_test_id("forget-0").tap()
    expect(page.get_by_test_id("favourites")).to_have_attribute("data-count", "4")
    kept = json.loads(page.evaluate("() => localStorage.getItem('livetable.favourites')"))
    assert kept["-"] == five[1:]

    for lang, words in (("th", "ลงทุกเพลย์เยอร์"), ("hi", "सभी 5 प्लेयर")):
        page.get_by_test_id("lang-switch").select_option(lang)
        expect(page.get_by_test_id("all-players")).to_have_text(words)
    assert not errors, errors
