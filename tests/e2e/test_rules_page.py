"""The rules page carries the whole rules sheet, and what it says is what livetable pays.

Every worked example and illustration on the page (``[data-settle]``) names its bet and its
cards; this test reads them as shown — the drawn cards, the hand values, the odds, the
amounts deducted and returned, the sum — and settles the same bet with
``livetable.rules.settle_bet``, in English, Thai and Hindi. The three odds tables are checked
against ``spot_result`` over every kind of hand, read with Notes 2–6. The limits come from the
server's table snapshot.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from table_page import Server

from livetable.rules import DECK, BetSpot, Hand, hand_of, parse_cards, settle_bet, spot_result

pytestmark = pytest.mark.browser

LANGS = ("en", "th", "hi")
SECTIONS = [
    "introduction", "how-to-win", "gameplay", "payouts", "special-patterns",
    "special-combinations", "notes", "examples", "limits", "roadmap", "disconnection",
    "error-handling", "supplementary",
]
PLAYER_SPOTS = ["P1", "P2", "P3", "P4", "P5"]
PAIR_SPOTS = [f"{s}_PAIR" for s in PLAYER_SPOTS]


def open_rules(page: Page, server: Server, lang: str) -> None:
    page.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
    page.goto(f"{server.url}rules.html")
    expect(page.get_by_test_id("sheet")).to_have_attribute("data-lang", lang)
    expect(page.locator("html")).to_have_attribute("lang", lang)


def numbers(text: str) -> list[int]:
    """The amounts written in a piece of the sheet: "100 + 100 = 200" → [100, 100, 200]."""
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", text)]


def odds_of(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+):1\s*", text)
    assert m, f"odds written as {text!r}, not k:1"
    return int(m.group(1))


READ_SETTLE = """() => Array.from(document.querySelectorAll('[data-settle]')).map((el) => ({
    id: el.id,
    data: { ...el.dataset },
    hands: Array.from(el.querySelectorAll('[data-hand]')).map((hd) => ({
        hand: hd.dataset.hand,
        listed: hd.dataset.cards,
        drawn: Array.from(hd.querySelectorAll('.card[data-card]')).map((c) => c.dataset.card),
        value: hd.querySelector('[data-field=value]').textContent,
    })),
    fields: Array.from(el.querySelectorAll('[data-field]'))
        .filter((f) => !f.closest('[data-hand]'))
        .map((f) => [f.dataset.field, f.textContent]),
}))"""


def check_settled(item: dict[str, Any]) -> None:
    """One worked example as the page shows it, against the settlement function."""
    where = item["id"]
    data = item["data"]
    spot = BetSpot(data["spot"])
    amount = int(data["amount"])
    fields: dict[str, str] = {}
    for name, text in item["fields"]:
        assert name not in fields, f"{where}: two {name} fields"
        fields[name] = text
    hands: dict[str, Hand] = {}
    for shown in item["hands"]:
        # The cards the reader sees are the drawn ones, and they are the listed ones.
        assert len(shown["drawn"]) == 2, f"{where} {shown['hand']}: {shown['drawn']}"
        assert shown["drawn"] == [str(c) for c in parse_cards(shown["listed"])], where
        hand = hand_of(parse_cards(" ".join(shown["drawn"])))
        assert shown["value"].strip() == hand.value, f"{where} {shown['hand']} value"
        hands[shown["hand"]] = hand
    assert set(hands) == {"BANKER", spot.position.value}, where
    player, banker = hands[spot.position.value], hands["BANKER"]

    bet = settle_bet(spot, amount, player, banker)

    assert numbers(fields["amount"]) == [amount], where
    deducted = numbers(fields["deducted"])
    assert deducted[-1] == bet.deducted, f"{where}: deducted {deducted}, settles {bet.deducted}"
    if len(deducted) > 1:
        assert sum(deducted[:-1]) == deducted[-1], f"{where}: {fields['deducted']}"
    if "withholding" in fields:
        assert numbers(fields["withholding"]) == [bet.deducted - amount], where
    if bet.outcome == "tie":
        assert "odds" not in fields, f"{where}: a tie has no odds"
    else:
        assert odds_of(fields["odds"]) == bet.odds, f"{where}: odds {fields['odds']}"
    if bet.returned:
        assert numbers(fields["returned"]) == [bet.returned], \
            f"{where}: shows {fields['returned']!r}, settles {bet.returned}"
        assert "lost" not in fields, where
    else:
        assert "returned" not in fields, where
        assert numbers(fields["lost"]) == [bet.deducted], f"{where}: {fields['lost']!r}"
    if "breakdown" in fields:
        parts = numbers(fields["breakdown"])
        assert sum(parts[:-1]) == parts[-1] == bet.returned, f"{where}: {fields['breakdown']!r}"
        assert parts[0] == amount, where
        if bet.outcome == "win":
            assert parts[-2] == amount * bet.odds, f"{where}: the win is bet × odds"

    # What the example's data says, for machines, is what it shows, for people.
    for key, value in (("outcome", bet.outcome), ("odds", str(bet.odds)),
                       ("returned", str(bet.returned))):
        if key in data:
            assert data[key] == value, f"{where}: data-{key}={data[key]}, settles {value}"
    # The headline names what wins: Player 1 or the Banker (or a tie), and Player 1 Pair
    # when the Player's cards are a pair.
    position_bet = settle_bet(BetSpot(spot.position.value), amount, player, banker)
    expected = {"win": spot.position.value, "lose": "BANKER", "tie": "TIE"}[position_bet.outcome]
    headline = {expected} | ({f"{spot.position.value}_PAIR"} if player.pair else set())
    assert set(data["headline"].split()) == headline, f"{where}: headline {data['headline']}"


@pytest.mark.parametrize("lang", LANGS)
def test_every_worked_example_on_the_page_is_what_the_settlement_function_pays(
    server: Server, page: Page, lang: str
) -> None:
    open_rules(page, server, lang)
    items = page.evaluate(READ_SETTLE)
    examples = [i for i in items if i["data"].get("example")]
    assert [int(i["data"]["example"]) for i in examples] == list(range(1, 10)), \
        "the sheet's nine worked examples, in order"
    assert {i["id"] for i in items} >= {"illustration-player-flush-loses",
                                        "illustration-banker-7-2"}
    for item in items:
        check_settled(item)
    # Example 9: Note 6 keeps 2:1, so 400 comes back (docs/design.md §1), in every language.
    nine = next(i for i in examples if i["data"]["example"] == "9")
    assert nine["data"]["returned"] == "400"


def test_a_wrong_example_on_the_page_fails_the_check() -> None:
    """The check above can fail: the English sheet's printed Example 9 (300) does."""
    printed = {
        "id": "example-9",
        "data": {"spot": "P1", "amount": "100", "returned": "300", "headline": "P1 P1_PAIR"},
        "hands": [{"hand": "BANKER", "listed": "9D 7C", "drawn": ["9D", "7C"], "value": "6"},
                  {"hand": "P1", "listed": "KH 9H", "drawn": ["KH", "9H"], "value": "9"}],
        "fields": [["amount", "100"], ["deducted", "100 + 100 = 200"], ["odds", "2:1"],
                   ["returned", "300"],
                   ["breakdown", "Bet Amount 100 + Withholding Amount 100 + Win 100 = 300"]],
    }
    with pytest.raises(AssertionError, match="settles 400"):
        check_settled(printed)
    # The old page's claim: a Player with a flush who loses, loses at 2:1.
    flush_loses = {
        "id": "illustration", "data": {"spot": "P1", "amount": "100", "headline": "BANKER"},
        "hands": [{"hand": "BANKER", "listed": "4C 3D", "drawn": ["4C", "3D"], "value": "7"},
                  {"hand": "P1", "listed": "2H 3H", "drawn": ["2H", "3H"], "value": "5"}],
        "fields": [["amount", "100"], ["deducted", "200"], ["odds", "2:1"], ["lost", "200"]],
    }
    with pytest.raises(AssertionError, match="odds"):
        check_settled(flush_loses)


READ_ODDS = """() => Object.fromEntries(Array.from(document.querySelectorAll('[data-odds-table]'))
    .map((t) => [t.dataset.oddsTable, Array.from(t.querySelectorAll('tbody tr')).map((tr) => ({
        spot: tr.dataset.spot, name: tr.querySelector('th').textContent,
        lose: tr.querySelector('[data-odds=lose]').textContent,
        win: tr.querySelector('[data-odds=win]').textContent,
    }))]))"""


def kinds_of_hand() -> list[Hand]:
    """One hand of every kind the settlement can tell apart (value, points, flush, pair)."""
    kinds: dict[tuple[int, int, bool, bool, bool], Hand] = {}
    for a in DECK:
        for b in DECK:
            h = hand_of((a, b))
            kinds.setdefault((h.tenths, h.points, h.flush, h.pair, h.special), h)
    return list(kinds.values())


@pytest.mark.parametrize("lang", LANGS)
def test_the_odds_tables_on_the_page_are_what_the_settlement_function_pays(
    server: Server, page: Page, lang: str
) -> None:
    open_rules(page, server, lang)
    tables = page.evaluate(READ_ODDS)
    assert sorted(tables) == ["basic", "pair", "special"]
    assert [r["spot"] for r in tables["basic"]] == PLAYER_SPOTS
    assert [r["spot"] for r in tables["special"]] == PLAYER_SPOTS
    assert [r["spot"] for r in tables["pair"]] == PAIR_SPOTS
    odds = {name: {r["spot"]: (odds_of(r["lose"]), odds_of(r["win"])) for r in rows}
            for name, rows in tables.items()}

    hands = kinds_of_hand()
    used: set[tuple[str, str]] = set()
    for player in hands:
        for banker in hands:
            for spot in PLAYER_SPOTS:
                r = spot_result(BetSpot(spot), player, banker)
                net = r.returned_multiple - r.deducted_multiple  # in bets: +odds or −odds
                if player.tenths == banker.tenths:
                    assert net == 0, "a tie returns what was deducted"
                    continue
                if player.tenths > banker.tenths:
                    # Notes 4–6: a Player's special pattern pays 2:1, unless the Banker's
                    # hand value is 0 or 6, unless the Player has 8 or 9 with a flush or pair.
                    cut = banker.tenths in (0, 60) and not (
                        player.points in (8, 9) and (player.flush or player.pair))
                    table = "special" if player.special and not cut else "basic"
                    assert net == odds[table][spot][1], (spot, player, banker, table)
                    used.add((table, "win"))
                else:
                    # Note 3: the Banker's special pattern costs 2:1; a Player's does not.
                    table = "special" if banker.special else "basic"
                    assert net == -odds[table][spot][0], (spot, player, banker, table)
                    used.add((table, "lose"))
            for spot in PAIR_SPOTS:
                r = spot_result(BetSpot(spot), player, banker)
                net = r.returned_multiple - r.deducted_multiple
                lose, win = odds["pair"][spot]
                assert net == (win if player.pair else -lose), (spot, player)
                used.add(("pair", "win" if player.pair else "lose"))
    assert used == {(t, o) for t in ("basic", "special", "pair") for o in ("win", "lose")}


@pytest.mark.parametrize("lang", LANGS)
def test_the_whole_sheet_is_on_the_page(server: Server, page: Page, lang: str) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url) if "/sheet/" in r.url else None)
    open_rules(page, server, lang)
    sheet = page.get_by_test_id("sheet")
    ids = sheet.locator("section[id]").evaluate_all("(s) => s.map((x) => x.id)")
    assert ids == SECTIONS
    for section in SECTIONS:     # each section has its heading and words
        expect(sheet.locator(f"section#{section} > h2")).not_to_be_empty()
    expect(sheet.get_by_test_id("notes").locator("li")).to_have_count(6)
    expect(sheet.get_by_test_id("disconnection").locator("p")).not_to_be_empty()
    expect(sheet.locator("[data-toc] a")).to_have_count(len(SECTIONS))
    expect(sheet.get_by_test_id("roadmap-symbols").locator(".rm")).to_have_count(5)
    # The special combinations, each illustrated with hands of exactly that value.
    combos = sheet.get_by_test_id("combos").locator("tbody tr").evaluate_all(
        """(rows) => rows.map((r) => [
            r.dataset.value,
            Array.from(r.querySelectorAll('.cards-inline')).map((c) =>
                Array.from(c.querySelectorAll('.card[data-card]')).map((x) => x.dataset.card)),
        ])""")
    assert [v for v, _ in combos] == ["7.5", "7.4", "7.3", "7.2", "7.1"]
    for value, pairs in combos:
        assert len(pairs) >= 3
        for cards in pairs:
            assert hand_of(parse_cards(" ".join(cards))).value == value, (value, cards)
    # Only this language's sheet was fetched.
    assert [u.rsplit("/", 1)[-1] for u in requested] == [f"{lang}.html"]


def test_the_sheet_follows_the_language_switch(server: Server, page: Page) -> None:
    open_rules(page, server, "en")
    expect(page.get_by_role("heading", level=1)).to_have_text("Pok Deng Game Rules")
    page.get_by_test_id("lang-switch").select_option("th")
    expect(page.get_by_test_id("sheet")).to_have_attribute("data-lang", "th")
    expect(page.get_by_role("heading", level=1)).to_have_text("กติกาเกมป๊อกเด้ง")
    page.get_by_test_id("lang-switch").select_option("hi")
    expect(page.get_by_role("heading", level=1)).to_have_text("पॉक डेंग गेम के नियम")
    expect(page.get_by_test_id("example-9")).to_have_attribute("data-returned", "400")


def test_a_pair_in_thai_is_the_same_rank_not_the_same_points(server: Server, page: Page) -> None:
    open_rules(page, server, "th")
    expect(page.get_by_test_id("pair-definition")).to_contain_text("หน้าไพ่เดียวกัน")
    assert "แต้มเดียวกัน" not in page.get_by_test_id("sheet").inner_text()


def test_the_wrong_special_pattern_sentence_is_gone(server: Server, page: Page) -> None:
    open_rules(page, server, "en")
    text = page.get_by_test_id("sheet").inner_text()
    assert "A win or a loss with a special pattern" not in text
    expect(page.get_by_test_id("special-reading")).to_contain_text("loses at 1:1")


@pytest.mark.parametrize("lang", LANGS)
def test_the_limits_are_the_tables_limits(server: Server, page: Page, lang: str) -> None:
    tables = server.api("/api/tables")["tables"]
    limits = tables[0]["limits"]
    assert all(t["limits"] == limits for t in tables), "the e2e server gives every table one set"
    open_rules(page, server, lang)
    table = page.get_by_test_id("limits")
    expect(table.locator("[data-key=round_max]")).to_have_attribute(
        "data-value", str(limits["round_max"]))
    cells = table.locator("[data-key]").evaluate_all(
        "(cs) => cs.map((c) => [c.dataset.key, c.dataset.value, c.textContent])")
    assert {k for k, _, _ in cells} == {"min", "max", "pair_min", "pair_max", "round_max"}
    for key, value, text in cells:
        assert int(value) == limits[key], key
        assert numbers(text) == [limits[key]], (key, text)
    expect(table.locator("caption")).to_have_text(", ".join(t["name"] for t in tables))
    expect(page.get_by_test_id("limits-error")).to_be_hidden()


def test_limits_that_cannot_be_loaded_say_so(server: Server, page: Page) -> None:
    page.route("**/api/tables", lambda route: route.abort())
    open_rules(page, server, "hi")
    expect(page.get_by_test_id("limits-error")).to_be_visible()
    expect(page.get_by_test_id("limits")).to_be_hidden()
    expect(page.get_by_test_id("example-9")).to_be_visible()   # the rest of the sheet stands


def test_a_sheet_that_cannot_be_loaded_says_so_and_a_switch_retries(
    server: Server, page: Page
) -> None:
    page.route("**/sheet/th.html", lambda route: route.fulfill(status=503, body="down"))
    open_rules(page, server, "en")
    page.get_by_test_id("lang-switch").select_option("th")
    expect(page.get_by_test_id("sheet-error")).to_be_visible()
    expect(page.get_by_test_id("sheet")).to_have_count(0)
    page.unroute("**/sheet/th.html")
    page.get_by_test_id("lang-switch").select_option("en")
    expect(page.get_by_test_id("sheet")).to_have_attribute("data-lang", "en")
    page.get_by_test_id("lang-switch").select_option("th")     # fetched again, not cached
    expect(page.get_by_test_id("sheet")).to_have_attribute("data-lang", "th")


def test_tables_with_different_limits_each_get_their_own(server: Server, page: Page) -> None:
    real = server.api("/api/tables")["tables"]
    fake = [dict(real[0], id="t1", name="Pok Deng T1"),
            dict(real[0], id="vip", name="VIP",
                 limits={"min": 500, "max": 50_000, "pair_min": 100, "pair_max": 5_000,
                         "round_max": 200_000})]
    page.route("**/api/tables", lambda route: route.fulfill(json={"tables": fake}))
    open_rules(page, server, "en")
    tables = page.get_by_test_id("limits")
    expect(tables).to_have_count(2)
    expect(tables.nth(1).locator("caption")).to_have_text("VIP")
    expect(tables.nth(1).locator("[data-key=max]")).to_have_text("50,000")
    expect(tables.nth(0).locator("[data-key=max]")).to_have_text(f"{real[0]['limits']['max']:,}")


SCRIPT_FONTS = {
    "th": {"Noto Sans Thai", "Noto Sans Thai UI", "Sarabun", "Leelawadee UI", "Leelawadee",
           "Thonburi", "Tahoma", "Loma", "Garuda", "Umpush", "Waree", "Kinnari", "Norasi"},
    "hi": {"Noto Sans Devanagari", "Noto Sans Devanagari UI", "Kohinoor Devanagari",
           "Nirmala UI", "Mangal", "Lohit Devanagari"},
}


@pytest.mark.parametrize("lang", LANGS)
def test_the_sheet_fits_a_phone(server: Server, browser: Browser, lang: str) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                              has_touch=True, device_scale_factor=2)
    try:
        page = ctx.new_page()
        open_rules(page, server, lang)
        expect(page.get_by_test_id("limits").locator("[data-key=max]")).to_have_attribute(
            "data-value", re.compile(r"\d+"))
        overflow = page.evaluate("""() => ({
            page: document.documentElement.scrollWidth - window.innerWidth,
            wide: [...document.querySelectorAll(".table-wrap, .example, p, li")]
                .filter((e) => e.scrollWidth > e.clientWidth + 1)
                .map((e) => `${e.id || e.className} ${e.scrollWidth}/${e.clientWidth}`),
        })""")
        assert overflow == {"page": 0, "wide": []}
        # Body text at a readable size, and each script drawn by a font made for it.
        size = page.locator("#introduction p").first.evaluate(
            "(p) => parseFloat(getComputedStyle(p).fontSize)")
        assert size >= 15
        if lang in SCRIPT_FONTS:
            cdp = ctx.new_cdp_session(page)
            cdp.send("DOM.enable")
            cdp.send("CSS.enable")
            root = cdp.send("DOM.getDocument")["root"]["nodeId"]
            node = cdp.send("DOM.querySelector", {"nodeId": root,
                                                  "selector": "#introduction p"})["nodeId"]
            fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
            main = max(fonts, key=lambda f: f["glyphCount"])["familyName"]
            assert main in SCRIPT_FONTS[lang], fonts
    finally:
        ctx.close()
