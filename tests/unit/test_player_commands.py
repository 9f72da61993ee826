"""The player commands are named once, by the protocol's tagged union (``PlayerCommand``).

Every command either endpoint decodes has its case in the gateway's one ``match``
(``commands.handle``, closed by ``assert_never``, so mypy refuses a command without one),
each player command is answered, and docs/protocol.md §3 documents exactly these — the way
tests/unit/test_dealer_commands.py holds the dealer commands. Before this, a new player
command fell through the ``if``/``elif`` chain and was never answered at all.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from livetable import protocol as p
from livetable.auth import mint
from livetable.bus import TableBatch
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.server.gateway import Gateway
from livetable.store.sqlite import SQLiteStore

#: Waits on the wall clock (asyncio.sleep above zero): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.sleeps

ROOT = Path(__file__).resolve().parents[2]
HANDLER = ROOT / "livetable/server/gateway/commands.py"
PLAYER = p.type_names(p.PlayerCommand)


def _handled() -> tuple[set[str], ast.Match]:
    """The ``type`` of every Struct a case of ``handle``'s match names, and the match."""
    tree = ast.parse(HANDLER.read_text())
    (handle,) = [f for f in ast.walk(tree)
                 if isinstance(f, ast.AsyncFunctionDef) and f.name == "handle"]
    (match,) = [m for m in ast.walk(handle) if isinstance(m, ast.Match)]
    names = {node.cls.attr for node in ast.walk(match)
             if isinstance(node, ast.MatchClass) and isinstance(node.cls, ast.Attribute)}
    return {str(getattr(p, name).__struct_config__.tag) for name in names}, match


def test_every_command_of_either_endpoint_has_its_case() -> None:
    handled, _ = _handled()
    assert handled == set(PLAYER) | set(p.type_names(p.DealerCommand))


def test_the_match_ends_in_assert_never() -> None:
    _, match = _handled()
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None  # case _:
    (statement,) = last.body
    assert isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
    assert ast.unparse(statement.value.func) == "assert_never"


def test_docs_protocol_has_a_section_for_every_player_command() -> None:
    doc = (ROOT / "docs/protocol.md").read_text()
    section = doc.split("## 3. Client → server on /ws", 1)[1].split("\n## ", 1)[0]
    assert sorted(re.findall(r"^### ([a-z_]+)$", section, re.M)) == sorted(PLAYER)


#: One of each player command, and the frame it is answered with (the store has no round
#: open: a bet is rejected, which is an answer).
SAMPLES: dict[str, tuple[dict[str, Any], str]] = {
    "hello": ({"v": 1, "table": "t1"}, "error"),
    "place_bet": ({"bet_id": "b1", "round_id": "r1", "spot": "P1", "amount": 10},
                  "bet_rejected"),
    "place_bets": ({"slip_id": "s1", "round_id": "r1",
                    "bets": [{"bet_id": "b2", "spot": "P1", "amount": 10}]}, "slip_rejected"),
    "get_bets": ({}, "bets"),
    "ping": ({"t": 1}, "pong"),
    "get_balance": ({}, "balance"),
    "reality_check_ack": ({}, "ack"),
    "chat_send": ({"client_msg_id": "c1", "text": "   "}, "chat_rejected"),
    "tip": ({"tip_id": "t1", "amount": 10}, "error"),  # a balance of 0: insufficient_funds
}


class _Socket:
    """What the gateway uses of a Starlette WebSocket: a hello, one command, then the
    frames sent back."""

    def __init__(self, *frames: dict[str, Any]) -> None:
        self.headers: dict[str, str] = {}
        self.scope: dict[str, Any] = {"type": "websocket", "extensions": {}}
        self.sent: list[dict[str, Any]] = []
        self.incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for frame in frames:
            self.incoming.put_nowait({"type": "websocket.receive", "text": json.dumps(frame)})

    async def accept(self) -> None:
        return None

    async def receive(self) -> dict[str, Any]:
        return await self.incoming.get()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.incoming.put_nowait({"type": "websocket.disconnect", "code": code})


def test_every_player_command_has_a_sample() -> None:
    assert set(SAMPLES) == set(PLAYER)


@pytest.mark.parametrize("kind", PLAYER)
async def test_every_player_command_is_answered(tmp_path: Path, kind: str) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"s" * 32, heartbeat=0)

    async def execute(table: str, command: Any) -> p.Ack | p.Error:
        raise AssertionError("no dealer command here")

    gateway = Gateway(settings, SQLiteStore(tmp_path / "db.sqlite3"), execute, Metrics(),
                      b"s" * 32)
    snapshot = p.encode(p.TableSnapshot(id="t1", name="T1", phase="idle", mode="auto"))
    gateway.deliver(TableBatch(table="t1", epoch=1, seq=0, frames=[], snapshot=snapshot))
    token = mint(b"s" * 32, "player", "p1", "P1", 3600)
    fields, answer = SAMPLES[kind]
    ws = _Socket({"type": "hello", "v": 1, "table": "t1", "token": token},
                 {"type": kind, **fields})
    session = asyncio.create_task(gateway.serve(ws, "player"))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(5):
            while len(ws.sent) < 2:
                await asyncio.sleep(0.005)
        assert [m["type"] for m in ws.sent] == ["welcome", answer]
    finally:
        await ws.close()
        async with asyncio.timeout(5):
            await session
        await gateway.store.close()
