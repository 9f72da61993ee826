"""A scripted dealer for the browser tests of the player's table: a manual round with known
cards on table t2 of the session's server, over the dealer console's websocket (the protocol
of docs/protocol.md §11), so that a test knows who wins before the cards come out.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from table_page import Server
from websockets.sync.client import ClientConnection


class StaffTokens(Protocol):
    """A server that mints a dealer's token (the e2e ``Server``, the integration ``LiveServer``)."""

    def dealer_token(self) -> str: ...

#: The shoe's opening card (read face up: it says how many unseen cards are burned).
OPENING = "5C"
#: A round, in dealing order: the burn, then P1 … P5 and the Banker, twice. P1 has 9 (Pok,
#: 9H QC) and wins against the Banker's 3 (KH 3D); P2 5, P3 6, P4 8, P5 8.
P1_WINS = ["2C", "9H", "KS", "4H", "5D", "2H", "KH", "QC", "5S", "2D", "3H", "6C", "3D"]


def dealer_url(server: Server) -> str:
    return server.url.replace("http", "ws", 1) + "ws/dealer"


class Dealer:
    """A dealer console on one table over ``ws`` (``connect(dealer_url(server))``):
    commands answered by ``ack`` or ``error``."""

    def __init__(self, ws: ClientConnection, server: StaffTokens, table: str = "t2") -> None:
        self.table = table
        self.ws = ws
        self.ws.send(json.dumps({"type": "hello", "v": 1, "table": table,
                                 "token": server.dealer_token()}))
        self.wait_for("welcome")

    def wait_for(self, kind: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            frame = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if frame.get("type") == kind:
                return dict(frame)
            if frame.get("type") == "error" and kind == "ack":
                return dict(frame)

    def command(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.ws.send(json.dumps({"type": kind, **fields}))
        return self.wait_for("ack")

    def until_done(self, kind: str, timeout: float = 60, **fields: Any) -> None:
        """Send ``kind`` until it is taken (e.g. ``set_mode``: only between rounds)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.command(kind, **fields)
            if answer["type"] == "ack":
                return
            assert answer.get("code") == "illegal_command", answer
            assert time.monotonic() < deadline, f"{kind} never taken: {answer}"
            time.sleep(0.3)

    def manual_round_open(self) -> None:
        """The table in manual mode with a new shoe, and a round open for ten minutes."""
        self.until_done("set_mode", auto=False)
        assert self.command("start_shoe")["type"] == "ack"
        assert self.command("card", card=OPENING)["type"] == "ack"
        answer = self.command("open_betting", betting_ms=600_000)
        assert answer["type"] == "ack", answer

    def deal_and_reveal(self, cards: list[str]) -> None:
        for card in cards:
            answer = self.command("card", card=card)
            assert answer["type"] == "ack", answer
        assert self.command("close_betting")["type"] == "ack"
        for _ in range(6):
            answer = self.command("reveal")
            assert answer["type"] == "ack", answer

    def back_to_auto(self) -> None:
        """Back to auto mode, for the tests that follow."""
        self.until_done("set_mode", auto=True)
