"""The defects found playing the table, each as a player meets it.

Each test failed on the page before its fix: the "You win" pill over the cards, the Bet
Record's "Player:" line in the old language, "While you were away" left with an old
balance, the pause read as "Betting opens with the next round", a limit warning left up
after a Confirm that went through, "25 ไม่ได้วาง" spilling out of its spot on a Thai phone,
and auto-confirm's chips lost to a reconnect blamed on the player.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

import pytest
from layout import overlaps, show_win
from playwright.sync_api import Browser, expect
from table_page import Bet, Server, TablePage, get_json, wait_until
from websockets.sync.client import connect

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def auto_table(server: Server) -> str:
    tables = server.api("/api/tables")["tables"]
    return str(next(t["id"] for t in tables if t["mode"] == "auto"))


@pytest.mark.parametrize("view", [{"viewport": {"width": 1280, "height": 900}},
                                  {"viewport": {"width": 900, "height": 900}}, PHONE],
                         ids=["desktop", "tablet", "phone"])
def test_the_win_pill_covers_no_hand(server: Server, browser: Browser,
                                     view: dict[str, Any]) -> None:
    ctx = browser.new_context(locale="en-US", reduced_motion="reduce", **view)
    try:
        tp = TablePage(ctx.new_page(), server.url).open(auto_table(server))
        tp.wait_hand("P5")
        show_win(tp.page, "You win 12,345")
        assert overlaps(tp.page, "win", ["[data-testid^=hand-]", ".card"]) == []
        # nor the Banker's hand at its widest: its longest name and both tags (a phone's
        # pill covered "Single Face-card with No Point (rank 7.2)"), set and measured in
        # one go, so that no re-render of the hands comes between
        assert overlaps(tp.page, "win", ["[data-testid^=hand-]", ".card"],
                        before=WIDEST_BANKER) == []
    finally:
        ctx.close()


#: The Banker's hand given its widest value, as tablefelt.js renders one.
WIDEST_BANKER = """
  const value = document.querySelector('[data-testid=value-BANKER]');
  const span = (cls, text) => Object.assign(document.createElement('span'),
                                            { className: cls, textContent: text });
  value.replaceChildren(span('hand__label', 'Single Face-card with No Point (rank 7.2)'),
                        span('tag tag--flush', 'Flush'), span('tag tag--pair', 'Pair'));
"""


def test_the_bet_records_player_line_follows_a_language_switch(server: Server,
                                                               browser: Browser) -> None:
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        TablePage(page, server.url).open(auto_table(server))  # a guest of this browser
        page.goto(f"{server.url}records.html")
        line = page.get_by_test_id("records-player")
        expect(line).to_contain_text("Player: Guest")
        page.get_by_test_id("lang-switch").select_option("th")
        expect(line).to_contain_text("ผู้เล่น: Guest")
    finally:
        ctx.close()


def test_a_limit_warning_goes_once_a_confirm_goes_through(server: Server,
                                                           browser: Browser) -> None:
    ctx = browser.new_context(locale="en-US")
    try:
        tp = TablePage(ctx.new_page(), server.url).open(auto_table(server))
        tp.wait_betting(at_least_ms=4_000)
        limits = server.api(f"/api/tables/{auto_table(server)}")["limits"]
        tp.place(Bet("P1_PAIR", limits["pair_max"]), chip=limits["pair_max"] // 2)
        tp.page.get_by_test_id("spot-P1_PAIR").click()  # one chip too many: refused
        warning = tp.page.get_by_test_id("bet-warning")
        expect(warning).to_be_visible()
        tp.confirm([Bet("P1_PAIR", limits["pair_max"])])
        expect(warning).to_be_hidden(timeout=1_500)  # not its own six seconds later
    finally:
        ctx.close()


def test_a_pause_while_betting_says_betting_resumes_in_this_round(server: Server,
                                                                  browser: Browser) -> None:
    table = auto_table(server)
    ctx = browser.new_context(locale="en-US")
    ws_url = server.url.replace("http", "ws", 1) + "ws/dealer"
    try:
        tp = TablePage(ctx.new_page(), server.url).open(table)
        with connect(ws_url) as ws:
            def command(frame: dict[str, Any]) -> dict[str, Any]:
                ws.send(json.dumps(frame))
                while True:
                    got: dict[str, Any] = json.loads(ws.recv(timeout=10))
                    if got["type"] in ("ack", "error"):
                        return got

            ws.send(json.dumps({"type": "hello", "v": 1, "table": table,
                                "token": server.dealer_token()}))
            while json.loads(ws.recv(timeout=10))["type"] != "welcome":
                pass
            tp.wait_betting(at_least_ms=2_500)
            assert command({"type": "pause", "reason": "Card jam"})["type"] == "ack"
            try:
                expect(tp.page.get_by_test_id("banner-paused")).to_be_visible()
                summary = tp.page.get_by_test_id("bet-summary")
                expect(summary).to_contain_text("resumes in this round")
                expect(summary).not_to_contain_text("next round")
            finally:
                assert command({"type": "resume"})["type"] == "ack"
        expect(tp.page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")
    finally:
        ctx.close()


def test_chips_not_placed_stay_inside_their_spot_on_a_thai_phone(server: Server,
                                                                 browser: Browser) -> None:
    ctx = browser.new_context(locale="en-US", **PHONE)  # type: ignore[arg-type]
    ctx.add_init_script("localStorage.setItem('livetable.lang', 'th')")
    try:
        tp = TablePage(ctx.new_page(), server.url).open(auto_table(server))
        tp.wait_betting(at_least_ms=2_500)
        tp.place(Bet("P3", 25))
        tp.place(Bet("P4_PAIR", 25))
        for spot in ("P3", "P4_PAIR"):
            note = tp.page.get_by_test_id(f"unplaced-{spot}")
            expect(note).to_contain_text("ไม่ได้วาง", timeout=20_000)
            inner, outer = note.bounding_box(), tp.page.get_by_test_id(
                f"spot-{spot}").bounding_box()
            assert inner and outer
            assert inner["x"] >= outer["x"] - 0.5, (spot, inner, outer)
            assert inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5, (
                spot, inner, outer)
    finally:
        ctx.close()


def test_while_you_were_away_never_shows_an_old_balance(server: Server, browser: Browser) -> None:
    table = auto_table(server)
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        tp = TablePage(page, server.url).open(table)
        tp.bet([Bet("P2", 10)])
        round_id = server.api(f"/api/tables/{table}")["round_id"]  # the bet's: still in play
        token = tp.token()
        page.goto("about:blank")  # away while the round settles
        # the same player's other tab, there before the page comes back: its connection
        # sees every round open from now on and bets the moment the one after the return
        # opens; the tab tells the player's other tabs the new balance, as a table tab does
        # (tableframes.js: the BroadcastChannel "livetable.balance")
        other_tab = ctx.new_page()
        other_tab.goto(server.url + "rules.html")
        with connect(server.url.replace("http", "ws", 1) + "ws") as other:
            other.send(json.dumps({"type": "hello", "v": 1, "table": table, "token": token}))
            while (welcome := json.loads(other.recv(timeout=10)))["type"] != "welcome":
                pass
            wait_until(lambda: server.api(f"/api/tables/{table}")["round_id"] != round_id
                       or server.api(f"/api/tables/{table}")["phase"] == "settled", timeout=40)
            tp.open(table)
            # the round on the felt when the summary is first seen up (checked on every
            # frame), and how many rounds the page has opened since it appeared: on a loaded
            # machine the next round may have opened before that frame — then the round on
            # the felt is the one the summary stays through, and waiting for another was
            # waiting for the one that closes it
            shown_in, opened = page.wait_for_function(
                """() => {
                  const box = document.querySelector('[data-testid=resume-summary]');
                  return !box.hidden && [Number(document.querySelector('[data-testid=round-no]')
                                                .textContent.replace(/\\D/g, '')),
                                         Number(box.dataset.roundsOpened || 0)];
                }""", timeout=15_000).json_value()
            # the round it stays through; after a shoe's last round the next is round 1
            through = {shown_in} if opened else {shown_in + 1, 1}
            while True:  # that round's opening (the socket has every frame since its hello)
                frame = json.loads(other.recv(timeout=60))
                if frame["type"] == "round_opened" and frame["round_no"] in through:
                    break
            other.send(json.dumps({"type": "place_bet", "bet_id": "other-tab",
                                   "round_id": frame["round_id"], "spot": "P3",
                                   "amount": 10}))
            while (answer := json.loads(other.recv(timeout=30)))["type"] not in (
                    "bet_accepted", "bet_rejected", "error"):
                pass
            assert answer["type"] == "bet_accepted", answer
        other_tab.evaluate("""([player, balance]) => new BroadcastChannel('livetable.balance')
            .postMessage({player, balance, at: Date.now() + 60_000})""",
                           [welcome["player"]["id"], answer["balance"]])
        # It stays into that round for the player to read, and the balance it gives is the
        # wallet's, whatever changed it meanwhile.
        summary = page.get_by_test_id("resume-summary")
        expect(page.get_by_test_id("balance")).to_have_attribute(
            "data-value", str(answer["balance"]))
        expect(summary).to_be_visible()
        expect(page.get_by_test_id("resume-total")).to_contain_text(
            f"Balance now {answer['balance']:,}")
    finally:
        ctx.close()


def test_auto_confirm_lost_to_a_reconnect_says_so(server: Server, browser: Browser) -> None:
    table = auto_table(server)
    ctx = browser.new_context(locale="en-US")
    try:
        tp = TablePage(ctx.new_page(), server.url).open(table)
        tp.page.get_by_test_id("auto-confirm").check()
        tp.wait_betting(at_least_ms=3_000)
        tp.place(Bet("P1", 10))
        lost_round = server.api(f"/api/tables/{table}")["round_no"]
        ctx.set_offline(True)  # the phone loses its network before auto-confirm's moment
        expect(tp.page.locator("body")).not_to_have_attribute("data-connection", "live")
        wait_until(lambda: server.api(f"/api/tables/{table}")["phase"] != "betting", timeout=20)
        ctx.set_offline(False)
        notice = tp.page.get_by_test_id("bet-notice")
        expect(notice).to_contain_text("connection was down", timeout=20_000)
        expect(notice).not_to_contain_text("before you pressed Confirm")
        # The spot is marked "not placed" while that round is on the felt. (A loaded run's
        # page came back only once the next round was open: that round's felt starts clean,
        # and the notice alone says it.) Read in one go, the felt's round and the mark.
        felt = tp.page.evaluate("""() => ({
            round: document.querySelector('[data-testid=round-no]').textContent,
            marked: !!document.querySelector('[data-testid=unplaced-P1]')})""")
        if felt["round"] == f"Round {lost_round}":
            assert felt["marked"], felt
    finally:
        ctx.close()


def test_bet_record_totals_are_the_servers_not_the_loaded_pages(server: Server,
                                                                browser: Browser) -> None:
    """A round of two bets seen one bet a page (``?limit=1``): the day's and the round's
    totals are both bets', from the server, not the one row loaded."""
    table = auto_table(server)
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        tp = TablePage(page, server.url).open(table)
        tp.wait_betting(at_least_ms=3_000)
        bets = [Bet("P1", 10), Bet("P2_PAIR", 10)]
        for b in bets:
            tp.place(b)
        tp.confirm(bets)
        expect(page.get_by_test_id("payout-item")).to_have_count(2, timeout=40_000)
        page.goto(f"{server.url}records.html?limit=1")
        expect(page.get_by_test_id("bet-row")).to_have_count(1)
        day = page.get_by_test_id("day-total")
        expect(day).to_have_attribute("data-bets", "2")
        expect(day).to_have_attribute("data-deducted", "30")  # 10 + 10 withheld, and 10
        expect(page.get_by_test_id("round-total")).to_have_attribute("data-deducted", "30")
        # and they are the API's, which counts both bets however the page is cut
        answer = get_json(f"{server.url}api/bets?limit=1", token=tp.token())
        (day_sum,) = answer["days"].values()
        (round_sum,) = answer["rounds"].values()
        assert day_sum == round_sum and day_sum["bets"] == 2 and day_sum["open"] == 0
        assert day.get_attribute("data-returned") == str(day_sum["returned"])
        assert day.get_attribute("data-net") == str(day_sum["net"])
    finally:
        ctx.close()


# --- the lobby ----------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "th"])
def test_the_lobby_roadmap_has_no_stray_labels_and_even_dots(server: Server, browser: Browser,
                                                             lang: str) -> None:
    """A table with no round yet says so (no "P1 P2 / P3 P4 / P5" over nothing); a table
    with rounds has its dots on one even pitch, row after row, in any script."""
    wait_until(lambda: any(len(t["roadmap"]) >= 3 for t in server.api("/api/tables")["tables"]),
               timeout=120)
    listing = server.api("/api/tables")
    full = next(t for t in listing["tables"] if len(t["roadmap"]) >= 3)
    empty = dict(full, id="empty", name="Empty", roadmap=[])
    ctx = browser.new_context(locale="en-US")
    ctx.add_init_script(f"localStorage.setItem('livetable.lang', '{lang}')")
    try:
        page = ctx.new_page()
        # the list as the server sends it, with one more table that has no round yet; the
        # tables' sockets stay silent, so the cards show this list
        page.route("**/api/tables", lambda route: route.fulfill(
            json={"tables": [full, empty]}))
        page.route_web_socket("**/ws", lambda ws: None)
        page.goto(server.url)
        empty_card = page.get_by_test_id("lobby-roadmap-empty")
        expect(empty_card.get_by_test_id("roadmap-empty")).to_be_visible()
        expect(empty_card.locator(".roadmap__pos")).to_have_count(0)
        cells = page.get_by_test_id(f"lobby-roadmap-{full['id']}").locator(".roadmap__cell")
        expect(cells.first).to_be_visible()
        boxes = [b for b in (c.bounding_box() for c in cells.all()) if b]
        xs = sorted({round(b["x"], 1) for b in boxes})
        ys = sorted({round(b["y"], 1) for b in boxes})
        assert len(ys) == 5, ys
        steps = {round(b - a, 1) for a, b in itertools.pairwise(ys)}
        assert len(steps) == 1, ys  # every row the same pitch
        steps = {round(b - a, 1) for a, b in itertools.pairwise(xs)}
        assert len(steps) <= 1, xs
    finally:
        ctx.close()


def test_the_lobby_shows_players_online_dealer_phase_and_countdown_live(
        server: Server, browser: Browser) -> None:
    table = auto_table(server)
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        page.goto(server.url)
        online = page.get_by_test_id(f"lobby-online-{table}")
        expect(online).to_be_visible()
        before = int(online.get_attribute("data-online") or 0)
        assert before >= 1  # the lobby's own connection counts
        expect(page.get_by_test_id(f"lobby-dealer-{table}")).to_have_text("Dealt by the server")
        expect(page.get_by_test_id(f"lobby-phase-{table}")).to_have_attribute(
            "data-phase", "betting", timeout=30_000)
        countdown = page.get_by_test_id(f"lobby-countdown-{table}")
        expect(countdown).to_have_text(re.compile(r"\d+"))
        player = ctx.new_page()
        TablePage(player, server.url).open(table)  # someone sits down: the count goes up
        expect(online).to_have_attribute("data-online", str(before + 1), timeout=10_000)
        expect(page.get_by_test_id(f"lobby-phase-{table}")).not_to_have_attribute(
            "data-phase", "betting", timeout=30_000)
    finally:
        ctx.close()


def test_no_shuffling_message_once_the_shoes_first_round_is_open(server: Server,
                                                                 browser: Browser) -> None:
    """A dealer starts a shoe, reads its opening card and opens round 1 at once: the page
    said "Shuffling — next round opens once the opening card is out" over the open round."""
    table = server.api("/api/tables")["tables"][-1]["id"]
    ctx = browser.new_context(locale="en-US")
    with connect(server.url.replace("http", "ws", 1) + "ws/dealer") as ws:
        def command(cmd: str, **fields: Any) -> dict[str, Any]:
            ws.send(json.dumps({"type": cmd, **fields}))
            while True:
                got: dict[str, Any] = json.loads(ws.recv(timeout=30))
                if got["type"] in ("ack", "error"):
                    return got

        ws.send(json.dumps({"type": "hello", "v": 1, "table": table,
                            "token": server.dealer_token()}))
        while json.loads(ws.recv(timeout=10))["type"] != "welcome":
            pass
        deadline = time.monotonic() + 90
        while command("set_mode", auto=False)["type"] != "ack":  # between rounds only
            assert time.monotonic() < deadline, "the table did not change mode"
            time.sleep(0.5)
        try:
            tp = TablePage(ctx.new_page(), server.url).open(table)
            banner = tp.page.get_by_test_id("banner-shoe")
            assert command("start_shoe")["type"] == "ack"
            expect(banner).to_be_visible()  # shuffling: the opening card is not out yet
            assert command("card", card="5S")["type"] == "ack"
            assert command("open_betting", betting_ms=20_000)["type"] == "ack"
            expect(tp.page.get_by_test_id("phase")).to_have_attribute("data-phase", "betting")
            expect(banner).to_be_hidden(timeout=1_000)
        finally:
            if server.api(f"/api/tables/{table}")["phase"] not in (
                    "idle", "settled", "cancelled"):
                command("cancel_round", reason="test cleanup")
            while command("set_mode", auto=True)["type"] != "ack":
                time.sleep(0.5)
            ctx.close()


def test_the_bet_record_tags_flush_and_pair_hands(server: Server, browser: Browser) -> None:
    """"7♣Q♣ 7 points — Win 2:1" said nothing of why 2:1: the hand carries its Flush (and a
    pair its Pair) tag. The Bet Record and the round are served as the API serves them."""
    bet = {"bet_id": "b-1", "table": "t1", "shoe_id": "t1.1", "round_id": "t1.1.4",
           "round_no": 4, "spot": "P1", "amount": 100, "deducted": 200, "placed_at": 1_000,
           "state": "settled", "outcome": "win", "odds": 2, "returned": 400, "net": 200,
           "settled_at": 2_000, "cards": ["7C", "QC"], "banker_cards": ["3D", "2H"],
           "balance_after": 10_200}
    cards = {"P1": ["7C", "QC"], "P2": ["KH", "KD"], "P3": ["2S", "9H"], "P4": ["AH", "3C"],
             "P5": ["4D", "4H"], "BANKER": ["3D", "2H"]}
    round_view = {"round_id": "t1.1.4", "table": "t1", "shoe_id": "t1.1", "round_no": 4,
                  "state": "settled", "cards": cards, "spots": {}, "reason": None}
    ctx = browser.new_context(locale="en-US")
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}rules.html")
        page.evaluate("""() => localStorage.setItem('livetable.guest', JSON.stringify(
            { token: 'x.y.z', player: { id: 'g1', name: 'Guest', balance: 10200 } }))""")
        page.route("**/api/bets?*", lambda route: route.fulfill(json={
            "bets": [bet], "next": None, "days": {}, "rounds": {}}))
        page.route("**/api/rounds/t1.1.4", lambda route: route.fulfill(json=round_view))
        page.goto(f"{server.url}records.html")
        hands = page.get_by_test_id("round-hand")
        expect(hands).to_have_count(6)
        tags = {h: sorted(t.get_attribute("data-tag") or "" for t in page.locator(
            f"[data-testid=round-hand][data-hand={h}] [data-testid=record-tag]").all())
            for h in cards}
        assert tags == {"P1": ["flush"], "P2": ["pair"], "P3": [], "P4": [],
                        "P5": ["pair"], "BANKER": []}, tags
        expect(page.locator("[data-hand=P1] [data-tag=flush]")).to_have_text("Flush")
    finally:
        ctx.close()
