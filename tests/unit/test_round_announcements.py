"""A round's announcements: how its bets lie on the spots at the close (``bet_stats``) and
its biggest wins once settled (``round_winners``) — livetable/engine/announce.py, read from
the store by livetable/host/announcements.py.

Given these bets, the table says these shares, with no player's id or stake; given these
results, these masked names and wins, once a round, for the round in play only.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import msgspec
import pytest
from bets import place_bet

from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.bus import MemoryBus, TableBatch
from livetable.engine import EngineError, TableEngine, Timing
from livetable.engine.announce import masked, percent
from livetable.host.runner import TableRunner
from livetable.operator import registry
from livetable.store import SQLiteStore

#: the runner's announcements are waited for (asyncio.sleep)
pytestmark = pytest.mark.sleeps

T0 = 1_700_000_000_000
TABLE = "t1"
EVENTS = msgspec.json.Decoder(p.AnyTableEvent)
SPOTS = ["P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P2_PAIR", "P3_PAIR", "P4_PAIR", "P5_PAIR"]


def closed_engine() -> TableEngine:
    """An auto engine whose first round's betting has closed (phase dealing)."""
    e = TableEngine.new(TABLE, mode="auto", timing=Timing(close_grace_ms=0),
                        rng=random.Random(7))
    e.open_betting(T0, betting_ms=1_000)
    e.tick(T0 + 1_000)
    assert e.phase == "dealing"
    return e


def settled_engine() -> TableEngine:
    """The same, ticked on until its round is settled (the next one not yet open)."""
    e = closed_engine()
    while e.phase != "settled":
        due = e.next_deadline()
        assert due is not None
        e.tick(due)
    return e


def test_shares_are_whole_percent_of_players_and_of_stakes() -> None:
    assert [percent(2, 3), percent(1, 3), percent(1, 2), percent(0, 0), percent(7, 7)] == [
        67, 33, 50, 0, 100]
    e = closed_engine()
    step = e.announce.bet_stats(e.state.round_id or "",
                                {"P1": (2, 400), "P2_PAIR": (1, 50), "P3": (1, 100)}, 3)
    [event] = step.events
    assert isinstance(event, p.BetStats)
    assert (event.round_id, event.bettors, event.seq) == (e.state.round_id, 3, e.state.seq)
    shares = {s.spot: (s.players, s.money) for s in event.spots}
    assert list(shares) == SPOTS  # every spot, in the spots' order
    assert shares["P1"] == (67, 73) and shares["P2_PAIR"] == (33, 9)
    assert shares["P3"] == (33, 18) and shares["P4"] == (0, 0)
    assert not step.effects  # news, not money


def test_bet_stats_once_a_round_and_only_for_the_round_in_play() -> None:
    e = closed_engine()
    round_id = e.state.round_id or ""
    before = e.to_bytes()
    for wrong in ("t1.other.1", ""):
        with pytest.raises(EngineError) as info:
            e.announce.bet_stats(wrong, {}, 0)
        assert info.value.code == "no_round"
        assert e.to_bytes() == before  # a refused announcement changed nothing
    e.announce.bet_stats(round_id, {}, 0)
    after = e.to_bytes()
    with pytest.raises(EngineError):
        e.announce.bet_stats(round_id, {}, 0)
    assert e.to_bytes() == after


def test_no_announcement_while_bets_are_taken() -> None:
    e = TableEngine.new(TABLE, mode="auto", rng=random.Random(7))
    e.open_betting(T0)
    before = e.to_bytes()
    with pytest.raises(EngineError) as info:
        e.announce.bet_stats(e.state.round_id or "", {}, 0)
    assert info.value.code == "illegal_command"
    with pytest.raises(EngineError):
        e.announce.round_winners(e.state.round_id or "", [p.Winner(name="x", amount=1)])
    assert e.to_bytes() == before


def test_names_are_masked_as_the_operator_chooses() -> None:
    assert masked("Player 42") == "Pl***"
    assert masked(" Bo ") == "B***"  # never a whole name, however short
    assert masked("") == "***"
    assert masked("Somchai", "hidden") == "***"
    assert masked("Somchai", "full") == "Somchai"


def test_winners_are_the_five_largest_and_none_for_a_round_nobody_won() -> None:
    e = settled_engine()
    round_id = e.state.round_id or ""
    wins = [p.Winner(name=f"W{n}***", amount=n * 100) for n in range(8)]
    [event] = e.announce.round_winners(round_id, wins).events
    assert isinstance(event, p.RoundWinners)
    assert [w.amount for w in event.winners] == [700, 600, 500, 400, 300]
    e2 = settled_engine()
    seq = e2.state.seq
    assert e2.announce.round_winners(e2.state.round_id or "",
                                     [p.Winner(name="x", amount=0)]).events == []
    assert e2.state.seq == seq


# --- the runner asks at the close and once settled; the store answers -----------------------


async def events_until(batches: list[TableBatch], kind: type[p.TableEvent],
                       ) -> list[p.TableEvent]:
    async with asyncio.timeout(20):
        while True:
            events: list[p.TableEvent] = [EVENTS.decode(f) for b in batches for _, f in b.frames]
            if any(isinstance(ev, kind) for ev in events):
                return events
            await asyncio.sleep(0.01)


async def test_the_table_announces_the_spread_at_the_close_and_the_winners_once_settled(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    names = {"a": "Alice", "b": "Bob", "c": "Chanida"}
    for pid, name in names.items():
        await store.ensure_player(pid, name, 10_000, 0)
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    timing = Timing(betting_ms=600, deal_interval_ms=5, reveal_interval_ms=20,
                    between_rounds_ms=3_000)
    runner = TableRunner(TABLE, store, bus, timing=timing, rng=random.Random(2),
                         winner_terms=lambda pid: ("full" if pid == "c" else "masked", None))
    await runner.start()
    try:
        [opened] = [ev for ev in await events_until(batches, p.RoundOpened)
                    if isinstance(ev, p.RoundOpened)]
        bets = [("a", "P1", 100), ("a", "P2", 100), ("b", "P1", 300), ("b", "P3_PAIR", 50),
                ("c", "P4", 100), ("c", "P5", 100)]
        for n, (pid, spot, amount) in enumerate(bets):
            answer = await place_bet(store, BetRequest(
                player_id=pid, table=TABLE, bet_id=f"x{n}", round_id=opened.round_id,
                spot=spot, amount=amount), opened.closes_at - 300)
            assert isinstance(answer, p.BetAccepted), answer
        events = await events_until(batches, p.RoundWinners)
    finally:
        await runner.stop()
    kinds = [type(ev) for ev in events]
    stats = next(ev for ev in events if isinstance(ev, p.BetStats))
    assert kinds.index(p.BettingClosed) < kinds.index(p.BetStats)
    assert kinds.count(p.BetStats) == kinds.count(p.RoundWinners) == 1
    assert stats.round_id == opened.round_id and stats.bettors == 3
    shares = {s.spot: (s.players, s.money) for s in stats.spots}
    assert shares["P1"] == (67, 53) and shares["P3_PAIR"] == (33, 7)  # of 750 staked
    assert shares["P2"] == shares["P4"] == shares["P5"] == (33, 13)
    # the winners: what each player's bets returned over their stakes, as the store has it
    net: dict[str, int] = {}
    for pid, settled in await store.round_settlements(opened.round_id):
        took = settled.amount * (1 if settled.spot.endswith("_PAIR") else 2)  # §7's deducted
        net[pid] = net.get(pid, 0) + settled.returned - took
    shown = {"a": "Al***", "b": "Bo***", "c": "Chanida"}
    expected = sorted(((shown[pid], won) for pid, won in net.items() if won > 0),
                      key=lambda w: -w[1])
    winners = next(ev for ev in events if isinstance(ev, p.RoundWinners))
    assert len(expected) == 3, "seed 2 deals a round all three win"
    assert [(w.name, w.amount) for w in winners.winners] == expected
    assert kinds.index(p.RoundSettled) < kinds.index(p.RoundWinners)
    assert (await store.audit()).ok
    await store.close()


# --- the operator chooses how its players' names are shown ----------------------------------

REGISTRY = """\
[operators.acme]
name = "ACME"
operator_secrets = ["env:OP"]
winner_names = "full"

[operators.acme.currencies.THB]
chips = [1000]
player = [1000, 500000]
pair = [1000, 100000]
round_max = 2000000

[operators.bet-7]
name = "Bet Seven"
operator_secrets = ["env:OP"]
"""


def test_the_registry_says_how_each_operators_winners_are_named() -> None:
    found = registry.parse(REGISTRY, "ops.toml", {"OP": "s"}, ["t1"])
    assert found.operators["acme"].winner_names == "full"
    assert found.operators["bet-7"].winner_names == "masked"  # the default
    with pytest.raises(registry.RegistryError, match="line 4"):
        registry.parse(REGISTRY.replace('"full"', '"shown"'), "ops.toml", {"OP": "s"}, ["t1"])
    terms = found.winner_terms
    assert terms("acme~p-1") == ("full", "THB")  # its one currency
    assert terms("bet-7~p-1") == ("masked", None)  # no currency of its own: the table's
    assert terms("guest-12") == ("masked", None)  # a demo guest: no operator
