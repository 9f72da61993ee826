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
    with connect(server.url.replace("http", "ws", 1) + "ws/dealer") as ws:
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


def test_the_browser_verifies_an_ended_shoe(server: Server, page: Page,
                                            dealer: ClientConnection,
                                            page_errors: list[str]) -> None:
    tp = TablePage(page, server.url)
    tp.open(TABLE)
    tp.wait_online()
    snap = get_json(f"{server.url}api/tables/{TABLE}")
    shoe_id = snap["shoe_id"]
    # A settled round in this shoe first, so that there are cards to check.
    expect(page.get_by_test_id("rm-cell").first).to_be_visible(timeout=60_000)
    end_the_shoe(dealer)

    link = page.get_by_test_id("verify-shoe-link")
    expect(link).to_have_attribute("data-shoe-id", shoe_id)
    link.click()
    expect(page).to_have_url(f"{server.url}verify.html?shoe={shoe_id}")
    result = page.get_by_test_id("verify-result")
    expect(result).to_have_attribute("data-ok", "true", timeout=20_000)
    # Every check passed, including the commitment this browser saw before the bets.
    checks = page.get_by_test_id("verify-check")
    assert checks.evaluate_all("(els) => els.map((e) => e.dataset.ok)") == ["true"] * 6
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
