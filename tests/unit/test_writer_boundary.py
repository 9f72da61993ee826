"""The boundary between the server and its SQLite writer process.

A call whose arguments cannot be encoded failed after it had been put on the list of
waiting calls, and every later answer went to the caller before. Here, without a server:
such a call fails alone and every other call gets its own answer; and no whole number a
client may send is unbounded in the schema, so none can reach an encoder on its way that
cannot hold it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, get_args

import msgspec
import msgspec.inspect as mi
import pytest

from livetable import protocol as p
from livetable.store.sqlite import SQLiteStore

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process

T0 = 1_700_000_000_000


async def test_a_call_that_cannot_be_encoded_fails_alone(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    try:
        assert store.process is not None
        pid = store.process.pid
        await store.ensure_player("alice", "Alice", 1_000, T0)
        await store.ensure_player("bob", "Bob", 2_000, T0)
        with pytest.raises(OverflowError):
            await store.bet_record("mallory", 2**70, None)
        # before the fix: bob's answer went to mallory's call, alice's to bob's
        alice, bob = await asyncio.wait_for(
            asyncio.gather(store.player("alice"), store.player("bob")), 5)
        assert alice is not None and alice.id == "alice" and alice.balance == 1_000
        assert bob is not None and bob.id == "bob" and bob.balance == 2_000
        assert store.process.pid == pid  # the writer never restarted
    finally:
        await store.close()


async def test_answers_go_to_their_calls_whatever_fails_in_between(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3", writer="process")
    try:
        players = [f"p{i}" for i in range(20)]
        for i, pid in enumerate(players):
            await store.ensure_player(pid, pid, 100 + i, T0)

        async def poisoned() -> None:
            with pytest.raises(OverflowError):
                await store.bet_record("x", -(2**70), None)

        calls: list[Any] = []
        for pid in players:
            calls += [store.player(pid), poisoned()]
        answers = await asyncio.wait_for(asyncio.gather(*calls), 10)
        views = [a for a in answers if a is not None]
        assert [(v.id, v.balance) for v in views] == [(pid, 100 + i)
                                                      for i, pid in enumerate(players)]
    finally:
        await store.close()


def unbounded_ints(kind: mi.Type, path: str) -> list[str]:
    """Every place in ``kind`` where a whole number has no lower or upper bound."""
    if isinstance(kind, mi.IntType):
        return [] if kind.ge is not None and kind.le is not None else [path]
    if isinstance(kind, mi.UnionType):
        return [hole for k in kind.types for hole in unbounded_ints(k, path)]
    if isinstance(kind, mi.StructType):
        return [hole for f in kind.fields for hole in unbounded_ints(f.type, f"{path}.{f.name}")]
    if isinstance(kind, mi.ListType | mi.TupleType | mi.VarTupleType | mi.SetType):
        inner = getattr(kind, "item_type", None)
        return [] if inner is None else unbounded_ints(inner, f"{path}[]")
    if isinstance(kind, mi.DictType):
        return unbounded_ints(kind.key_type, path) + unbounded_ints(kind.value_type, path)
    return []


@pytest.mark.parametrize("union", [p.PlayerCommand, p.DealerCommand],
                         ids=["player", "dealer"])
def test_every_number_a_client_sends_is_bounded_in_the_schema(union: Any) -> None:
    holes = [hole for kind in get_args(union)
             for hole in unbounded_ints(mi.type_info(kind), str(kind.__struct_config__.tag))]
    assert holes == []


def test_an_oversized_limit_is_a_bad_frame() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"\$\.limit"):
        p.PLAYER_DECODER.decode(b'{"type": "get_bets", "limit": 1180591620717411303424}')
    assert p.PLAYER_DECODER.decode(b'{"type": "get_bets", "limit": 500}') == p.GetBets(limit=500)
