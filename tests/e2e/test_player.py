"""A player in a real browser against the real server: join, bet, watch, get paid.

Every amount checked here is computed from the cards the page revealed, with the one
settlement function of the project (``livetable.rules.settle_bet``): the page must show
what the rules pay, no more, no less.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from table_page import Bet, Server, TablePage, deducted, expected_returned, get_json, wait_until

from livetable.rules import hand_of, parse_cards, player_odds

pytestmark = pytest.mark.browser


def auto_table(server: Server) -> str:
    tables = server.api("/api/tables")["tables"]
    auto = [t for t in tables if t.get("mode") == "auto"]
    return str((auto or tables)[0]["id"])


def chips(page: Page) -> list[int]:
    return sorted(int(v) for v in page.locator("#chips .chip").evaluate_all(
        "(els) => els.map((e) => e.dataset.value)"))


def test_lobby_join_bet_watch_reveal_and_payout(
    server: Server, page: Page, page_errors: list[str]
) -> None:
    table = auto_table(server)
    sent: list[str] = []  # what the page sends on its websockets
    page.on("websocket", lambda ws: ws.on("framesent", lambda payload: sent.append(
        payload if isinstance(payload, str) else payload.decode())))
    page.goto(server.url)
    card = page.get_by_test_id(f"lobby-table-{table}")
    expect(card).to_be_visible()
    expect(page.get_by_test_id(f"lobby-phase-{table}")).not_to_be_empty()
    # the small roadmap: five rows once a round is played, a sentence before
    small = page.get_by_test_id(f"lobby-roadmap-{table}")
    expect(small.locator(".roadmap__grid, [data-testid=roadmap-empty]")).to_have_count(1)
    if small.locator(".roadmap__grid").count():
        expect(small.locator(".roadmap__row")).to_have_count(5)
    page.get_by_test_id(f"join-{table}").click()
    expect(page).to_have_url(f"{server.url}table.html?table={table}")

    tp = TablePage(page, server.url)
    tp.wait_online()
    start = tp.balance()

    tp.wait_betting(at_least_ms=3_500)
    # The countdown runs on the server's clock and counts down.
    first = tp.remaining_ms()
    time.sleep(1.2)
    second = tp.remaining_ms()
    assert 600 <= first - second <= 2_500, (first, second)
    expect(page.get_by_test_id("countdown")).to_have_text(re.compile(r"\d+"))
    # time enough left for the chips (this round's, or the next's): the look at the
    # countdown took a second and more, and on a loaded run the round closed between the
    # two bets (the first not placed, the second in the next round)
    tp.wait_betting(at_least_ms=4_000)

    available = chips(page)
    a = 100 if 100 in available else available[0]
    b = 50 if 50 in available else available[0]
    bets = [Bet("P1", a), Bet("P3_PAIR", b)]
    for bet in bets:
        tp.place(bet)
    # Before confirming, the page says what the bets really take: 2× for a Player bet.
    summary = page.get_by_test_id("bet-summary")
    expect(summary).to_have_attribute("data-deducted", str(2 * a + b))
    expect(page.get_by_test_id("balance-warning")).to_be_hidden()
    tp.confirm(bets)
    taken = sum(deducted(x.spot, x.amount) for x in bets)
    expect(page.get_by_test_id("balance")).to_have_attribute("data-value", str(start - taken))
    # The Confirm went as one bet slip (docs/design.md §6), holding both bets.
    frames = [json.loads(f) for f in sent]
    slips = [f for f in frames if f.get("type") == "place_bets"]
    assert len(slips) == 1 and not [f for f in frames if f.get("type") == "place_bet"], frames
    assert sorted((b["spot"], b["amount"]) for b in slips[0]["bets"]) == sorted(
        (x.spot, x.amount) for x in bets)

    # Face-down cards as they are dealt, then the reveal P1 … P5, Banker.
    expect(page.get_by_test_id("hand-BANKER")).to_have_attribute("data-dealt", "2", timeout=30_000)
    tp.wait_hand("BANKER")
    felt = tp.results_on_felt()
    cards = {h: shown["cards"] for h, shown in felt.items()}
    assert all(len(cards[h]) == 2 for h in cards), felt

    # Each hand shows its value as the rules read it, and each position its result.
    for hand_name, hand_cards in cards.items():
        hand = hand_of(parse_cards(" ".join(hand_cards)))
        assert felt[hand_name]["value"] == hand.value, (hand_name, felt)
    banker = hand_of(parse_cards(" ".join(cards["BANKER"])))
    for pos in ("P1", "P2", "P3", "P4", "P5"):
        outcome, odds = player_odds(hand_of(parse_cards(" ".join(cards[pos]))), banker)
        assert felt[pos]["outcome"] == outcome, (pos, felt)
        if odds == 2 and outcome != "tie":
            assert "2:1" in felt[pos]["text"], (pos, felt)

    returned = expected_returned(bets, cards)
    payout = page.get_by_test_id("payout")
    expect(payout.get_by_test_id("payout-item")).to_have_count(2, timeout=15_000)
    expect(payout).to_have_attribute("data-returned", str(returned))
    expect(payout).to_have_attribute("data-net", str(returned - taken))
    expect(page.get_by_test_id("balance")).to_have_attribute(
        "data-value", str(start - taken + returned)
    )

    # The Bet Record holds both bets with the round's cards.
    page.get_by_role("link", name="Bet Record").click()
    rows = page.get_by_test_id("bet-row")
    expect(rows).to_have_count(2)       # a fresh guest: only this round's two bets
    expect(rows.get_by_test_id("record-outcome")).to_have_count(2)
    top_two = [rows.nth(i) for i in range(2)]
    assert sum(int(r.get_attribute("data-returned") or 0) for r in top_two) == returned
    assert int(top_two[0].get_attribute("data-balance-after") or 0) == start - taken + returned
    # As the sheet's examples show a bet: the withholding beside it (none for a Pair bet).
    withheld = rows.get_by_test_id("record-withholding").evaluate_all(
        "(els) => els.map((e) => Number(e.dataset.value)).sort((x, y) => x - y)")
    assert withheld == sorted([a, 0])
    # Paged with the server's cursor: one bet a page, then the older one.
    page.goto(f"{server.url}records.html?limit=1")
    expect(rows).to_have_count(1)
    page.get_by_test_id("records-more").click()
    expect(rows).to_have_count(2)
    expect(page.get_by_test_id("records-more")).to_be_hidden()
    # The round's group shows all six hands.
    expect(page.get_by_test_id("record-round")).to_have_count(1)
    expect(page.get_by_test_id("round-hand")).to_have_count(6)
    assert not page_errors, page_errors


def test_connection_cut_mid_round_resumes_and_shows_the_settlement(
    server: Server, context: BrowserContext, page: Page, page_errors: list[str]
) -> None:
    table = auto_table(server)
    tp = TablePage(page, server.url).open(table)
    bet = Bet("P2", chips(page)[0])
    tp.bet([bet])
    round_id = server.api(f"/api/tables/{table}")["round_id"]  # the bet's: still in play

    context.set_offline(True)
    expect(page.get_by_test_id("conn-state")).not_to_have_attribute("data-state", "online")

    def round_over() -> bool:
        snap = server.api(f"/api/tables/{table}")
        return bool(snap["round_id"] != round_id or snap["phase"] in ("settled", "cancelled"))

    wait_until(round_over, timeout=60)
    # What the summary showed is recorded as it shows (it may be shown, then filled in).
    page.evaluate("""() => {
        const box = document.querySelector('[data-testid=resume-summary]');
        window.__summaries = [];
        new MutationObserver(() => {
            if (!box.hidden) window.__summaries.push({text: box.textContent,
                items: box.querySelectorAll('[data-testid=resume-item]').length});
        }).observe(box, {attributes: true, childList: true, subtree: true});
    }""")
    context.set_offline(False)
    tp.wait_online(timeout=30_000)

    page.wait_for_function("() => window.__summaries.length > 0", timeout=15_000)
    shown = page.evaluate("() => window.__summaries")
    assert any(s["items"] > 0 and "Player 2" in s["text"] for s in shown), shown

    record = get_json(f"{server.url}api/bets?limit=5", token=tp.token())
    mine = next(b for b in record["bets"] if b["round_id"] == round_id)
    assert mine["state"] in ("settled", "refunded")
    balance = page.get_by_test_id("balance")
    expect(balance).to_have_attribute("data-value", str(mine["balance_after"]))
    assert not page_errors, page_errors


def test_keyboard_betting_undo_and_confirm(
    server: Server, page: Page, page_errors: list[str]
) -> None:
    table = auto_table(server)
    tp = TablePage(page, server.url).open(table)
    tp.wait_betting(at_least_ms=4_000)
    chip = chips(page)[0]
    tp.choose_chip(chip)
    page.get_by_test_id("spot-P4").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Space")
    expect(page.get_by_test_id("stake-P4")).to_have_attribute("data-draft", str(2 * chip))
    page.evaluate("() => document.activeElement.blur()")
    page.keyboard.press("5")        # Player 5
    page.keyboard.press("0")        # Player 5 Pair
    expect(page.get_by_test_id("stake-P5_PAIR")).to_have_attribute("data-draft", str(chip))
    page.keyboard.press("u")        # undo the Pair chip
    expect(page.get_by_test_id("stake-P5_PAIR")).to_have_attribute("data-draft", "0")
    page.keyboard.press("Shift+Enter")
    expect(page.get_by_test_id("stake-P4")).to_have_attribute("data-confirmed", str(2 * chip))
    expect(page.get_by_test_id("stake-P5")).to_have_attribute("data-confirmed", str(chip))
    assert not page_errors, page_errors


def test_languages_switch_and_stick(server: Server, page: Page, page_errors: list[str]) -> None:
    table = auto_table(server)
    page.goto(server.url)
    switch = page.get_by_test_id("lang-switch")
    switch.select_option("th")
    expect(page.locator("html")).to_have_attribute("lang", "th")
    expect(page.get_by_role("link", name="กติกา")).to_be_visible()
    expect(page.get_by_test_id(f"join-{table}")).to_have_text("เข้าโต๊ะ")

    page.goto(f"{server.url}table.html?table={table}")     # remembered across pages
    expect(page.locator("html")).to_have_attribute("lang", "th")
    expect(page.get_by_test_id("spot-P1_PAIR")).to_contain_text("เพลย์เยอร์ 1 คู่")
    expect(page.get_by_test_id("confirm")).to_have_text("ยืนยัน")
    expect(page.get_by_test_id("hand-BANKER")).to_contain_text("แบงค์เกอร์")

    page.get_by_test_id("lang-switch").select_option("hi")
    expect(page.locator("html")).to_have_attribute("lang", "hi")
    expect(page.get_by_test_id("spot-P1_PAIR")).to_contain_text("प्लेयर 1 जोड़ा")
    expect(page.get_by_test_id("confirm")).to_have_text("कन्फ़र्म करें")
    expect(page.get_by_role("link", name="दांव रिकॉर्ड")).to_be_visible()

    page.goto(f"{server.url}rules.html")
    expect(page.get_by_role("heading", level=1)).to_have_text("पॉक डेंग गेम के नियम")
    page.get_by_test_id("lang-switch").select_option("en")
    expect(page.get_by_role("heading", level=1)).to_have_text("Pok Deng Game Rules")
    assert not page_errors, page_errors


def test_every_string_exists_in_all_three_languages(server: Server, page: Page) -> None:
    page.goto(server.url)
    # One file per language (js/i18n/<lang>.js): the same keys and parameters as English.
    missing = page.evaluate("""async () => {
        const out = [];
        const DICTS = {};
        for (const lang of ['en', 'th', 'hi']) {
            DICTS[lang] = (await import(`/js/i18n/${lang}.js`)).default;
        }
        for (const lang of ['th', 'hi']) {
            for (const key of Object.keys(DICTS.en)) {
                const v = DICTS[lang][key];
                if (typeof v !== 'string' || !v.trim()) out.push(`${lang}:${key}`);
                const ps = (s) => (s.match(/\\{\\w+\\}/g) || []).sort().join();
                if (typeof v === 'string' && ps(v) !== ps(DICTS.en[key])) {
                    out.push(`${lang}:${key}:params`);
                }
            }
            for (const key of Object.keys(DICTS[lang])) {
                if (!(key in DICTS.en)) out.push(`${lang}:${key}:extra`);
            }
        }
        return out;
    }""")
    assert missing == []


def test_the_browser_evaluates_hands_like_the_rules(server: Server, page: Page) -> None:
    """cards.js labels the Bet Record's hands: it must agree with livetable.rules."""
    page.goto(server.url)
    ranks = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]
    deck = [r + s for s in "SHDC" for r in ranks]
    browser_values = page.evaluate(
        """async (deck) => {
            const { evaluate } = await import('/js/cards.js');
            const out = {};
            for (const a of deck) for (const b of deck) {
                const e = evaluate(a, b);
                out[a + ' ' + b] = [e.value, e.flush, e.pair, e.special];
            }
            return out;
        }""",
        deck,
    )
    for key, (value, flush, pair, special) in browser_values.items():
        hand = hand_of(parse_cards(key))
        expected = [hand.value, hand.flush, hand.pair, hand.special]
        assert [value, flush, pair, special] == expected, key
    lenient = page.evaluate("""async () => {
        const { parseCard } = await import('/js/cards.js');
        return ['10D', 'td', 'K♥', ' kh ', 'A♠', '1c', 'ZZ', '11H', 'K', ''].map(
            (c) => (parseCard(c) || {}).text || null);
    }""")
    assert lenient == ["10D", "10D", "KH", "KH", "AS", "AC", None, None, None, None]


def test_a_bet_the_balance_cannot_cover_is_warned_and_not_added(server: Server, page: Page) -> None:
    table = auto_table(server)
    limits = server.api(f"/api/tables/{table}")["limits"]
    tp = TablePage(page, server.url).open(table)
    balance = tp.balance()
    chip = max(chips(page))
    # Fill Player spots (each deducts 2 × chip) until the balance is spent; the round limit
    # and the spot maximum must not be what stops us, or this test says nothing.
    clicks = balance // (2 * chip) + 1
    assert not (2 * chip * clicks > 2 * limits["max"] * 5
                or balance > limits.get("round_max", balance)), \
        "the demo balance exceeds what the table limits let one round take: fix the fixture"
    tp.wait_betting(at_least_ms=5_000)
    tp.choose_chip(chip)
    spots = [f"P{n}" for n in range(1, 6)]
    per_spot = limits["max"] // chip
    placed = 0
    for i in range(clicks - 1):
        page.get_by_test_id(f"spot-{spots[i // per_spot]}").click()
        placed += 1
    expect(page.get_by_test_id("bet-warning")).to_be_hidden()
    summary = page.get_by_test_id("bet-summary")
    expect(summary).to_have_attribute("data-deducted", str(2 * chip * placed))
    page.get_by_test_id(f"spot-{spots[(clicks - 1) // per_spot]}").click()
    warning = page.get_by_test_id("bet-warning")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("balance cannot cover")
    expect(summary).to_have_attribute("data-deducted", str(2 * chip * placed))


def test_a_player_who_closed_the_page_sees_what_was_paid_on_return(
    server: Server, context: BrowserContext, page: Page
) -> None:
    table = auto_table(server)
    tp = TablePage(page, server.url).open(table)
    bet = Bet("P4", chips(page)[0])
    tp.bet([bet])
    round_id = server.api(f"/api/tables/{table}")["round_id"]  # the bet's: still in play
    page.close()

    def round_over() -> bool:
        snap = server.api(f"/api/tables/{table}")
        return bool(snap["round_id"] != round_id or snap["phase"] in ("settled", "cancelled"))

    wait_until(round_over, timeout=60)
    back = TablePage(context.new_page(), server.url).open(table)
    summary = back.page.get_by_test_id("resume-summary")
    expect(summary).to_be_visible(timeout=15_000)
    expect(summary.get_by_test_id("resume-item")).to_have_count(1)
    expect(summary).to_contain_text("Player 4")
    # The summary stays through the next round's opening, for a player to read on arrival
    # (it closed at once when a round opened two seconds after the page came back) ...
    # (counted by the page from when it showed the summary: the round number the test read
    # off the felt when it first saw it was once the next round's already, on a loaded run,
    # and the test then waited for the round after, which closes the summary)
    back.page.wait_for_function(
        """() => document.querySelector('[data-testid=resume-summary]').dataset.roundsOpened
                 === '1'
            && document.querySelector('[data-testid=phase]').dataset.phase === 'betting'""",
        timeout=60_000)
    expect(summary).to_be_visible()
    # ... and closes with the player's first chip: its balance is stale once they bet.
    back.place(Bet("P1", chips(back.page)[0]))
    expect(summary).to_be_hidden()
