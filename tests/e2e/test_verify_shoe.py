""""Verify this shoe" in a real browser (docs/design.md §7, static/js/verify.js).

The table page watches an auto shoe start (it keeps the commitment announced), a dealer ends
the shoe (``set_mode`` manual between rounds: the shoe is set aside, so it is revealed), the
page offers to verify it, and the verify page checks it with ``crypto.subtle`` — then, with
the server's answer tampered in flight, finds the round that was not dealt as committed.
The table goes back to auto mode at the end, for any test that follows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect
from table_page import Server, TablePage, get_json
from websockets.sync.client import ClientConnection, connect

pytestmark = pytest.mark.browser

TABLE = "t1"


@pytest.fixture
def dealer(server: Server) -> Iterator[ClientConnection]:
    # max_queue=None: the console reads nothing while a test watches a round, and a full
    # queue would stop its reader, so the server's pongs too: a keepalive timeout (1011)
    with connect(server.url.replace("http", "ws", 1) + "ws/dealer", max_queue=None) as ws:
        ws.send(json.dumps({"type": "hello", "v": 1, "table": TABLE,
                            "token": server.dealer_token()}))
        assert json.loads(ws.recv(10))["type"] == "welcome"
        try:
            yield ws
        finally:
            command(ws, {"type": "set_mode", "auto": True})


def command(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    while True:
        answer: dict[str, Any] = json.loads(ws.recv(10))
        if answer["type"] in ("ack", "error"):
            return answer


def end_the_shoe(ws: ClientConnection) -> None:
    """Between rounds (and after at least one settled round), set the auto shoe aside."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        answer = command(ws, {"type": "set_mode", "auto": False})
        if answer["type"] == "ack":
            return
        assert answer["code"] == "illegal_command", answer
        time.sleep(0.1)
    raise AssertionError("the table was never between rounds")


def watch_a_round(page: Page, server: Server) -> str:
    """Until the table page has seen a round revealed to its Banker (the roadmap alone may
    come from the snapshot, of rounds this browser never watched) of the shoe the table
    still deals; that shoe.

    Not the shoe of the table's snapshot read first: read between rounds, after a shoe's
    last round, it names a shoe this page will never see a round of.
    """
    watched: set[str] = set()
    while True:
        seen = page.wait_for_function(
            """(watched) => Object.entries(JSON.parse(localStorage.getItem(
                 'livetable.reveals') || '{}')).filter(([id, hands]) => hands.BANKER
                 && !watched.includes(id)).map(([id]) => id).pop()""",
            arg=sorted(watched), timeout=60_000)
        round_id: str = seen.json_value()
        shoe = round_id.rsplit(".", 1)[0]
        if get_json(f"{server.url}api/tables/{TABLE}")["shoe_id"] == shoe:
            return shoe
        watched.add(round_id)  # its cut card came out: a round of the next shoe


def test_the_browser_verifies_an_ended_shoe(server: Server, page: Page,
                                            dealer: ClientConnection,
                                            page_errors: list[str]) -> None:
    tp = TablePage(page, server.url)
    tp.open(TABLE)
    tp.wait_online()
    # A round watched to its end first, so that there are cards to check.
    shoe_id = watch_a_round(page, server)
    end_the_shoe(dealer)

    link = page.get_by_test_id("verify-shoe-link")
    expect(link).to_have_attribute("data-shoe-id", shoe_id)
    link.click()
    expect(page).to_have_url(f"{server.url}verify.html?shoe={shoe_id}")
    result = page.get_by_test_id("verify-result")
    expect(result).to_have_attribute("data-ok", "true", timeout=20_000)
    # Every check passed, including the commitment this browser saw before the bets.
    checks = page.get_by_test_id("verify-check")
    assert checks.evaluate_all("(els) => els.map((e) => e.dataset.check)") == [
        "verify.check.id", "verify.check.hash", "verify.check.seen", "verify.check.decks",
        "verify.check.opening", "verify.check.rounds", "verify.check.cut",
        "verify.check.log", "verify.check.ending", "verify.check.heads",
        "verify.check.reveals"]
    assert checks.evaluate_all("(els) => els.map((e) => e.dataset.ok)") == ["true"] * 11
    expect(page.locator('[data-check="verify.check.seen"]')).to_have_attribute("data-ok", "true")
    record = get_json(f"{server.url}api/shoes/{shoe_id}")
    expect(page.get_by_test_id("verify-commitment")).to_have_text(record["commitment"])
    expect(page.get_by_test_id("verify-round")).to_have_count(len(record["rounds"]))

    # The server's answer changed in flight: a settled round's Banker gets other cards.
    settled = next(r for r in record["rounds"] if r["state"] == "settled")

    def tamper(route: Route) -> None:
        forged = json.loads(json.dumps(record))
        for r in forged["rounds"]:
            if r["round_id"] == settled["round_id"]:
                first, second = r["cards"]["BANKER"]
                r["cards"]["BANKER"] = [second, first] if first != second else ["9S", "9H"]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(forged))

    page.route(f"**/api/shoes/{shoe_id}", tamper)
    page.reload()
    expect(result).to_have_attribute("data-ok", "false", timeout=20_000)
    expect(page.locator('[data-check="verify.check.rounds"]')).to_have_attribute("data-ok",
                                                                                "false")
    bad = page.locator(f'[data-testid="verify-round"][data-round-id="{settled["round_id"]}"]')
    expect(bad).to_have_attribute("data-ok", "false")
    assert page_errors == []


def served(page: Page, shoe_id: str, record: dict[str, Any]) -> Any:
    """Serve ``record`` as the server's answer for ``shoe_id``; reload the verify page."""
    page.unroute(f"**/api/shoes/{shoe_id}")
    page.route(f"**/api/shoes/{shoe_id}", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps(record)))
    page.reload()
    result = page.get_by_test_id("verify-result")
    expect(result).not_to_have_attribute("data-ok", "", timeout=20_000)
    return page.locator("[data-testid=verify-check]").evaluate_all(
        "(els) => Object.fromEntries(els.map((e) => [e.dataset.check, e.dataset.ok === 'true']))")


def test_the_verify_page_refuses_a_record_that_skips_a_slot_or_another_shoe(
        server: Server, page: Page, dealer: ClientConnection, page_errors: list[str]) -> None:
    """The money path's attack 3 (docs/security.md): a round's cards set to null, or the round
    called cancelled, and
    verify.html still said fair. Now a record must account for every slot; the page also
    holds it to the hands this browser saw revealed, and to the shoe it asked for."""
    tp = TablePage(page, server.url)
    tp.open(TABLE)
    tp.wait_online()
    shoe_id = watch_a_round(page, server)
    end_the_shoe(dealer)
    record = get_json(f"{server.url}api/shoes/{shoe_id}")
    watched = page.evaluate("JSON.parse(localStorage.getItem('livetable.reveals') || '{}')")
    seen = [r for r in record["rounds"] if r["round_id"] in watched]
    assert seen and all(r["state"] == "settled" for r in seen)
    for r in seen:  # what this browser kept is what the record says
        assert all(r["cards"][hand] == cards for hand, cards in watched[r["round_id"]].items())
    page.goto(f"{server.url}verify.html?shoe={shoe_id}")
    expect(page.get_by_test_id("verify-result")).to_have_attribute("data-ok", "true",
                                                                   timeout=20_000)
    victim = seen[0]["round_id"]

    def forged(change: Any) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(json.dumps(record))
        change(copy, next(r for r in copy["rounds"] if r["round_id"] == victim))
        return copy

    # one round's cards set to null: a slot of the order unaccounted for
    checks = served(page, shoe_id, forged(lambda s, r: r.update(cards=None)))
    assert checks["verify.check.rounds"] is False and checks["verify.check.reveals"] is False
    bad = page.locator(f'[data-testid="verify-round"][data-round-id="{victim}"]')
    expect(bad).to_have_attribute("data-ok", "false")
    # the round called cancelled, its cards those the order deals (consistent in itself):
    # this browser saw it revealed and settled
    checks = served(page, shoe_id, forged(lambda s, r: r.update(state="cancelled")))
    assert checks["verify.check.rounds"] is True  # the order's rule alone cannot tell…
    assert checks["verify.check.reveals"] is False  # …what this browser saw can
    expect(page.get_by_test_id("verify-result")).to_have_attribute("data-ok", "false")
    expect(bad).to_have_attribute("data-ok", "false")
    # another shoe's record (renamed through and through): not the shoe asked for
    other = json.loads(json.dumps(record).replace(f'"{shoe_id}.', '"t9.9.'))
    other["shoe_id"] = "t9.9"
    checks = served(page, shoe_id, other)
    assert checks["verify.check.id"] is False and checks["verify.check.hash"] is True
    # the shoe's last round cut off, the count and the game log recomputed to match
    # (consistent in itself: the shoe was set aside, its cut card never came out — so
    # said, where the cut card did come out in the round cut off): the heads this browser
    # saw published are not all in it
    cut = json.loads(json.dumps(record))
    cut["rounds"] = cut["rounds"][:-1]
    cut["ended_by"] = "set_aside"
    checks = served(page, shoe_id, rechained(cut))
    assert checks["verify.check.log"] is True and checks["verify.check.ending"] is True
    assert checks["verify.check.heads"] is False
    assert page_errors == []


def rechained(record: dict[str, Any]) -> dict[str, Any]:
    """A forger's record: its round count and game log head recomputed to match its rounds."""
    import msgspec

    from livetable.rules.fairness import ShoeRecord, chain_heads

    heads = chain_heads(msgspec.json.decode(json.dumps(record), type=ShoeRecord))
    return {**record, "round_count": len(record["rounds"]),
            "chain_head": heads[-1] if heads else record["commitment"]}


def test_the_page_and_verify_shoe_apply_one_rule(server: Server, page: Page,
                                                 dealer: ClientConnection) -> None:
    """The browser's check (static/js/verify.js) and ``livetable verify-shoe``
    (rules/fairness.py) are one rule written twice: on the same records, tampered in every
    way the unit tests tamper, they agree."""
    import msgspec

    from livetable.rules.fairness import ShoeRecord, check_shoe

    tp = TablePage(page, server.url)
    tp.open(TABLE)
    tp.wait_online()
    shoe_id = watch_a_round(page, server)
    end_the_shoe(dealer)
    record = get_json(f"{server.url}api/shoes/{shoe_id}")
    settled = next(i for i, r in enumerate(record["rounds"]) if r["state"] == "settled")

    def variant(change: Any) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(json.dumps(record))
        change(copy, copy["rounds"][settled])
        return copy

    def swap_banker(s: dict[str, Any], r: dict[str, Any]) -> None:
        first, second = r["cards"]["BANKER"]
        r["cards"]["BANKER"] = [second, first] if first != second else ["9S", "9H"]

    records = {
        "as served": record,
        "cards null": variant(lambda s, r: r.update(cards=None)),
        "called cancelled, cards null": variant(lambda s, r: r.update(state="cancelled",
                                                                    cards=None)),
        "called cancelled": variant(lambda s, r: r.update(state="cancelled")),
        "no ended state": variant(lambda s, r: r.update(state="betting")),
        "a hand missing": variant(lambda s, r: r["cards"].pop("P5")),
        "a hand that is none": variant(lambda s, r: r["cards"].update(P6=["AS", "AH"])),
        "Banker swapped": variant(swap_banker),
        "12 cards taken": variant(lambda s, r: r.update(dealt=12)),
        "the salt changed": variant(lambda s, r: s.update(salt="00" * 32)),
        "burned miscounted": variant(lambda s, r: s.update(burned=(s["burned"] or 0) + 1)),
        # the game log: a record cut short or recast, as served or recomputed
        "the last round removed": {**record, "rounds": record["rounds"][:-1]},
        "every round removed": {**record, "rounds": []},
        "the last round recast as cancelled with no cards": {**record, "rounds": [
            *record["rounds"][:-1], {**record["rounds"][-1], "state": "cancelled", "dealt": 0,
                                     "spots": {}, "cards": {h: [] for h in
                                                            record["rounds"][-1]["cards"]}}]},
        "the last round removed, log recomputed": rechained(
            {**record, "rounds": record["rounds"][:-1]}),
        "called cancelled, log recomputed": rechained(
            variant(lambda s, r: r.update(state="cancelled", spots={}))),
        "ended by the cut card, said": {**record, "ended_by": "cut_card"},
        "no game log": {**record, "chain_head": None, "round_count": None, "ended_by": None},
    }
    page.goto(f"{server.url}verify.html")
    for name, rec in records.items():
        python = check_shoe(msgspec.json.decode(json.dumps(rec), type=ShoeRecord)) == []
        browser = page.evaluate(
            "async (rec) => (await (await import('./js/verify.js')).checkShoe(rec, null)).ok",
            rec)
        assert browser == python, (name, python, browser)
    passes = ["as served", "the last round removed, log recomputed",
              "called cancelled, log recomputed"]
    if record["ended_by"] == "cut_card":  # it came out in the shoe's last round: a record
        passes.remove("the last round removed, log recomputed")  # without that round is
        passes.append("ended by the cut card, said")  # caught, and saying so is true
    assert [n for n, rec in records.items() if check_shoe(msgspec.json.decode(
        json.dumps(rec), type=ShoeRecord)) == []] == passes
