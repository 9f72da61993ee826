"""The Redis store against a real ``redis-server`` of our own (tests/redis_util.py).

What the shared contract (tests/unit/test_store_contract.py, run on Redis by
test_redis_contract.py) cannot show, because it is about many writers at once or about
Redis itself:

* a table driven by the real engine gives the same answers, bet for bet, on SQLite and Redis;
* 200 bets racing the close of betting: each is in the hold or refused, none in between;
* a settlement committed twice at once pays once;
* fencing: a deposed engine's step writes nothing;
* a step that fails validation writes nothing (Redis does not roll a script back);
* the audit catches tampering; an AOF survives a SIGKILL; scripts survive SCRIPT FLUSH;
* amounts stay exact up to 2^53.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ResponseError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

import test_store_contract as contract
from redis_util import RedisServer, start_redis

from livetable import protocol as p
from livetable.accounts import AccountError
from livetable.engine import (
    CancelRound,
    OpenRound,
    SetBetting,
    SettleRound,
    Step,
    TableEngine,
    Timing,
)
from livetable.engine.bets import BetRequest
from livetable.rules import BET_SPOTS
from livetable.store import SQLiteStore, Store
from livetable.store.base import OutOfStep, StepRefused
from livetable.store.redis import (  # type: ignore[attr-defined]  # AmountOverflow: store.base
    MAX_EXACT,
    AmountOverflow,
    FencedOut,
    RedisStore,
    _lua,
)

pytestmark = [
    pytest.mark.redis,
]

T0 = 1_700_000_000_000
TABLE = "t1"
R1 = "t1.1.1"
LIMITS = p.Limits()
#: Every spot loses except P1 (1:1, returned 3×) and P1_PAIR (11:1, returned 12×).
SPOTS = {s.value: ("lose", 1, 0 if s.is_pair else 1) for s in BET_SPOTS} | {
    "P1": ("win", 1, 3), "P1_PAIR": ("win", 11, 12)}
CARDS = {pos: ["AS", "AH"] for pos in ("P1", "P2", "P3", "P4", "P5", "BANKER")}

@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(redis_server.url, max_connections=256)
    await store.redis.flushall()
    try:
        yield store
    finally:
        await store.close()


def bet(player: str, bet_id: str, spot: str = "P1", amount: int = 100,
        round_id: str = R1) -> BetRequest:
    return BetRequest(player_id=player, table=TABLE, bet_id=bet_id, round_id=round_id,
                      spot=spot, amount=amount)


def open_round(round_id: str = R1, closes_at: int = T0 + 15_000,
               limits: p.Limits = LIMITS) -> OpenRound:
    return OpenRound(table=TABLE, round_id=round_id, shoe_id="t1.1",
                     round_no=int(round_id.rsplit(".", 1)[1]), closes_at=closes_at,
                     limits=limits)


def close(round_id: str = R1) -> SetBetting:
    return SetBetting(table=TABLE, round_id=round_id, status="closed", closes_at=None)


def settle(round_id: str = R1, spots: dict[str, tuple[str, int, int]] | None = None
           ) -> SettleRound:
    return SettleRound(table=TABLE, round_id=round_id, spots=spots or SPOTS, cards=CARDS)


def frame(seq: int, epoch: int = 1) -> tuple[int, int, bytes]:
    return epoch, seq, p.encode(p.BettingClosed(round_id=R1, table=TABLE, epoch=epoch, seq=seq))


async def held(store: RedisStore, round_id: str = R1) -> int:
    return int(await store.redis.hget(store.keys.balances, f"hold:{round_id}") or 0)


async def balance(store: Store, player: str) -> int:
    view = await store.player(player)
    assert view is not None
    return view.balance


# --- the same table on SQLite and on Redis ------------------------------------------------------


class Twin:
    """Drives a SQLite and a Redis store with the same calls; every answer must agree."""

    def __init__(self, sqlite: SQLiteStore, redis: RedisStore) -> None:
        self.stores: tuple[Store, Store] = (sqlite, redis)
        self.calls = 0
        self.seen: Counter[str] = Counter()  # answers by kind: what the run covered

    async def both(self, method: str, *args: Any) -> Any:
        first = await getattr(self.stores[0], method)(*args)
        second = await getattr(self.stores[1], method)(*args)
        assert first == second, (method, args, first, second)
        self.calls += 1
        if isinstance(first, p.BetRejected):
            self.seen[first.code] += 1
        elif isinstance(first, p.BetAccepted):
            self.seen["accepted"] += 1
        elif method == "commit_step":
            self.seen.update(s.message.outcome for s in first)
        return first

    async def step(self, engine: TableEngine, step: Step, now: int) -> Any:
        frames = [(ev.epoch, ev.seq, p.encode(ev)) for ev in step.events]
        return await self.both("commit_step", TABLE, engine.to_bytes(), frames, step.effects,
                               now)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_an_engine_driven_table_is_the_same_on_sqlite_and_redis(
    store: RedisStore, seed: int
) -> None:
    rng = random.Random(seed)
    twin = Twin(SQLiteStore(":memory:"), store)
    players = [f"p{n}" for n in range(6)] + ["guest.a", "guest.a_b"]  # ids with dots
    for pid in players:
        start = rng.choice([0, 50, 500, 5_000, 50_000])
        await twin.both("ensure_player", pid, pid.upper(), start, T0)
    engine = TableEngine.new(TABLE, rng=random.Random(seed), timing=Timing(betting_ms=10_000),
                             limits=p.Limits(round_max=8_000))
    now, deposits = T0, 0
    placed: list[BetRequest] = []
    round_ids: list[str] = []
    for _ in range(12):
        step = engine.open_betting(now)
        await twin.step(engine, step, now)
        assert engine.state.round_id is not None and engine.state.closes_at is not None
        round_id, closes_at = engine.state.round_id, engine.state.closes_at
        round_ids.append(round_id)
        for n in range(rng.randrange(5, 40)):
            at = rng.randrange(now, closes_at + 500)  # some arrive late
            if placed and rng.random() < 0.15:  # a retry, or a reuse with other content
                request = rng.choice(placed)
                if rng.random() < 0.5:
                    request = msgspec.structs.replace(request, amount=request.amount + 1)
            else:
                request = BetRequest(
                    player_id=rng.choice([*players, "mallory"]), table=TABLE,
                    bet_id=f"{round_id}.{n}", round_id=rng.choice([round_id] * 9 + ["x"]),
                    spot=rng.choice([s.value for s in BET_SPOTS] + ["P6"]),
                    amount=rng.choice([5, 10, 100, 999, 1_000, 2_500, 5_000, 5_000, 7_000]))
                placed.append(request)
            await twin.both("place_bet", request, at)
            if rng.random() < 0.05:
                deposits += 1
                pid = rng.choice(players)
                await twin.both("deposit", f"d{deposits}", pid, 1_000, at)
        now = closes_at - rng.randrange(1, 3_000)
        twist = rng.random()
        if twist < 0.2:
            await twin.step(engine, engine.pause("a look at the cards", now), now)
            await twin.both("place_bet", placed[-1], now)
            now += 1_000
            await twin.step(engine, engine.resume(now), now)
        elif twist < 0.3:
            await twin.step(engine, engine.cancel_round("camera down", now), now)
        while engine.phase not in ("settled", "cancelled"):
            if rng.random() < 0.02:
                await twin.step(engine, engine.cancel_round("shoe jam", now), now)
                break
            deadline = engine.next_deadline()
            assert deadline is not None
            now = max(now, deadline)
            await twin.step(engine, engine.tick(now), now)
        now += 5_000

    for pid in [*players, "mallory"]:
        await twin.both("player", pid)
        cursor: str | None = None
        while True:
            _, cursor = await twin.both("bet_record", pid, 7, cursor)
            if cursor is None:
                break
        await twin.both("settlements_for_rounds", pid, round_ids)
    for round_id in [*round_ids, "t1.9.9"]:
        await twin.both("round_view", round_id)
    await twin.both("load_table", TABLE)
    head = engine.state.seq
    for seq in (0, 1, head // 2, head - 1, head, head + 1):
        await twin.both("events_after", TABLE, engine.state.epoch, seq, 500)
    audits = [await s.audit() for s in twin.stores]
    assert audits[0] == audits[1]
    assert audits[1].ok, audits[1].problems
    await twin.stores[0].close()
    assert set(twin.seen) >= {
        "accepted", "betting_closed", "insufficient_funds", "above_max", "below_min",
        "round_limit", "duplicate_bet_id", "not_a_player", "unknown_round", "bad_spot",
        "win", "lose", "refund"}, twin.seen


# --- many writers -----------------------------------------------------------------------------


async def test_two_hundred_bets_racing_the_close_are_each_held_or_refused(
    store: RedisStore, redis_server: RedisServer
) -> None:
    players = [f"p{n}" for n in range(20)]
    for pid in players:
        await store.ensure_player(pid, pid, 1_000, T0)
    await store.commit_step(TABLE, b"s", [frame(1)], [open_round(closes_at=T0 + 60_000)], T0)
    rng = random.Random(7)
    requests = [bet(players[n % 20], f"b{n}", rng.choice(["P1", "P2", "P3_PAIR"]), 100)
                for n in range(200)]
    # Four gateways, each with its own connections, and the engine's store closing betting.
    gateways = [RedisStore.from_url(redis_server.url, max_connections=8) for _ in range(4)]
    for gateway in (store, *gateways):
        await gateway.load_scripts()
        await asyncio.gather(*(gateway.redis.ping() for _ in range(8)))  # connections ready

    # Each bet reached its gateway after the dealer's close (T0 + 100): whether it is taken
    # depends only on whether its script runs before the close step's. However loaded the
    # machine, both sides of the race happen: the close waits for ten answers, the last
    # twenty bets wait for the close, and the others race it.
    answered = 0
    some_answered, closed = asyncio.Event(), asyncio.Event()

    async def place(n: int) -> p.BetAccepted | p.BetRejected:
        nonlocal answered
        if n >= 180:
            await closed.wait()
        await asyncio.sleep(rng.uniform(0, 0.005))
        answer = await gateways[n % 4].place_bet(requests[n], T0 + 150)
        answered += 1
        if answered == 10:
            some_answered.set()
        return answer

    async def closing() -> list[Any]:
        await some_answered.wait()
        try:
            return await store.commit_step(TABLE, b"s", [frame(2)], [close()], T0 + 100)
        finally:
            closed.set()

    try:
        *answers, _ = await asyncio.gather(*(place(n) for n in range(200)), closing())
    finally:
        for gateway in gateways:
            await gateway.close()
    accepted = [a for a in answers if isinstance(a, p.BetAccepted)]
    refused = Counter(a.code for a in answers if isinstance(a, p.BetRejected))
    assert len(accepted) + sum(refused.values()) == 200
    assert set(refused) <= {"betting_closed", "insufficient_funds"}
    assert accepted and refused["betting_closed"], (len(accepted), refused)

    # Everything accepted is in the hold; nothing else is.
    assert await held(store) == sum(a.deducted for a in accepted)
    bets_of_round = await store.redis.lrange(store.keys.round_bets(TABLE, R1), 0, -1)
    assert len(bets_of_round) == len(accepted)
    by_player: dict[str, list[p.BetAccepted]] = {pid: [] for pid in players}
    for request, answer in zip(requests, answers, strict=True):
        if isinstance(answer, p.BetAccepted):
            by_player[request.player_id].append(answer)
    for pid, mine in by_player.items():
        assert await balance(store, pid) == 1_000 - sum(a.deducted for a in mine) >= 0
        entries, _ = await store.bet_record(pid, 200, None)
        assert sorted(e.bet_id for e in entries) == sorted(a.bet_id for a in mine)
    late = await store.place_bet(bet("p0", "late"), T0 + 160)
    assert isinstance(late, p.BetRejected) and late.code == "betting_closed"
    assert (await store.audit()).ok

    settled = await store.commit_step(TABLE, b"s", [frame(3)], [settle()], T0 + 200)
    assert sorted(s.message.bet_id for s in settled) == sorted(a.bet_id for a in accepted)
    report = await store.audit()
    assert report.ok, report.problems
    assert await held(store) == 0


async def test_a_settlement_committed_twice_at_once_pays_once(
    store: RedisStore, redis_server: RedisServer
) -> None:
    for pid in ("alice", "bob"):
        await store.ensure_player(pid, pid, 10_000, T0)
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    for n in range(30):
        answer = await store.place_bet(bet(("alice", "bob")[n % 2], f"b{n}",
                                           ("P1", "P1_PAIR", "P2")[n % 3], 50), T0 + 1)
        assert isinstance(answer, p.BetAccepted)
    other = RedisStore.from_url(redis_server.url)  # a second engine process
    try:
        results = await asyncio.gather(*(
            s.commit_step(TABLE, b"s2", [frame(2), frame(3)], [close(), settle()], T0 + 10)
            for s in (store, other, store, other)), return_exceptions=True)
    finally:
        await other.close()
    # one is stored; the others no longer follow the head: refused, nothing written
    stored = [r for r in results if isinstance(r, list)]
    assert len(stored) == 1 and len(stored[0]) == 30
    assert all(isinstance(r, OutOfStep) for r in results if not isinstance(r, list))
    settled = stored[0]
    paid = sum(s.message.returned for s in settled)
    assert paid == 10 * 150 + 10 * 600 + 10 * 50  # P1 3×, P1_PAIR 12×, P2 the withholding
    report = await store.audit()
    assert report.ok, report.problems
    assert report.house == 10 * 100 + 10 * 50 + 10 * 100 - paid  # P1, P2 deduct 2×; Pair 1×
    assert await balance(store, "alice") + await balance(store, "bob") == 20_000 - report.house
    # The step's events were logged once.
    assert await store.events_after(TABLE, 1, 0, 100) == [frame(n)[2] for n in (1, 2, 3)]


# --- fencing ------------------------------------------------------------------------------------


async def test_a_fenced_out_engine_writes_nothing(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.redis.set(store.keys.lease_token(TABLE), 5)
    store.fence_tokens[TABLE] = 5
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    assert isinstance(await store.place_bet(bet("alice", "b1"), T0 + 1), p.BetAccepted)

    await store.redis.set(store.keys.lease_token(TABLE), 6)  # another engine took the table
    with pytest.raises(FencedOut) as caught:
        await store.commit_step(TABLE, b"s2", [frame(2), frame(3)], [close(), settle()], T0 + 2)
    assert (caught.value.table, caught.value.token, caught.value.holder) == (TABLE, 5, "6")
    assert await store.load_table(TABLE) == b"s1"
    assert await store.events_after(TABLE, 1, 1, 100) == []
    view = await store.round_view(R1)
    assert view is not None and view.state == "betting"
    assert (await balance(store, "alice"), await held(store)) == (800, 200)

    await store.redis.delete(store.keys.lease_token(TABLE))  # the lease lapsed: still not ours
    with pytest.raises(FencedOut):
        await store.commit_step(TABLE, b"s2", [frame(2)], [close()], T0 + 2)

    store.fence_tokens[TABLE] = 6  # the new holder's store
    await store.redis.set(store.keys.lease_token(TABLE), 6)
    settled = await store.commit_step(TABLE, b"s2", [frame(2), frame(3)], [close(), settle()],
                                      T0 + 2)
    assert [s.message.returned for s in settled] == [300]
    del store.fence_tokens[TABLE]  # unfenced stores do not look at the lease
    await store.redis.set(store.keys.lease_token(TABLE), 99)
    await store.commit_step(TABLE, b"s3", [frame(4)], [], T0 + 3)
    assert await store.load_table(TABLE) == b"s3"
    assert (await store.audit()).ok


# --- a step is all or nothing -------------------------------------------------------------------


async def test_a_step_that_cannot_settle_writes_nothing(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    assert isinstance(await store.place_bet(bet("alice", "b1", "P3"), T0 + 1), p.BetAccepted)
    without_p3 = {k: v for k, v in SPOTS.items() if k != "P3"}
    with pytest.raises(StepRefused, match="P3"):
        await store.commit_step(TABLE, b"s2", [frame(2), frame(3)],
                                [close(), settle(spots=without_p3)], T0 + 2)
    assert await store.load_table(TABLE) == b"s1"
    assert await store.events_after(TABLE, 1, 1, 100) == []
    view = await store.round_view(R1)
    assert view is not None and view.state == "betting"  # the close was not applied either
    assert (await balance(store, "alice"), await held(store)) == (800, 200)
    assert (await store.audit()).ok


async def test_a_retried_step_logs_its_events_once(store: RedisStore) -> None:
    await store.commit_step(TABLE, b"s1", [frame(1), frame(2)], [open_round()], T0)
    with pytest.raises(OutOfStep):  # stored already: refused
        await store.commit_step(TABLE, b"s1", [frame(1), frame(2)], [open_round()], T0)
    with pytest.raises(OutOfStep):  # overlapping
        await store.commit_step(TABLE, b"s2", [frame(2), frame(3)], [], T0)
    await store.commit_step(TABLE, b"s2", [frame(3)], [], T0)
    assert await store.redis.xlen(store.keys.table_events(TABLE)) == 3
    assert await store.events_after(TABLE, 1, 0, 100) == [frame(n)[2] for n in (1, 2, 3)]


async def test_audit_detects_a_hold_that_is_not_its_open_bets(store: RedisStore) -> None:
    """Issue 27: a round in play holds exactly what its open bets took (the audit checked
    the holds of ended rounds only)."""
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    for bet_id in ("a1", "a2"):
        assert isinstance(await store.place_bet(bet("alice", bet_id), T0 + 1), p.BetAccepted)
    assert (await store.audit()).ok
    seqs = await store.redis.lrange(store.keys.round_bets(TABLE, R1), 0, -1)
    raw = await store.redis.hget(store.keys.bets, seqs[1])
    assert isinstance(raw, bytes)
    record = msgspec.msgpack.decode(raw)
    record[9] = "refunded"  # its state, without the refund: the money still in the hold
    await store.redis.hset(store.keys.bets, seqs[1], msgspec.msgpack.encode(record))
    report = await store.audit()
    assert not report.ok and report.total == 0
    assert report.problems == [f"hold:{R1} holds 400 but the round's open bets took 200"]


# --- Redis itself -------------------------------------------------------------------------------


async def test_every_key_is_tagged_by_table_or_ledger(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.deposit("d1", "alice", 10, T0)
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    await store.place_bet(bet("alice", "b1"), T0 + 1)
    await store.commit_step(TABLE, b"s2", [frame(2)], [close(), settle()], T0 + 2)
    keys = [k.decode() async for k in store.redis.scan_iter("*")]
    tags = Counter(k[k.index("{") + 1:k.index("}")] for k in keys)
    assert set(tags) == {"ledger", TABLE}
    table_keys = [k for k in keys if "{t1}" in k] + [store.keys.lease_token(TABLE)]
    assert len({key_slot(k.encode()) for k in table_keys}) == 1


async def test_scripts_are_loaded_again_after_script_flush(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    await store.redis.script_flush()
    assert isinstance(await store.place_bet(bet("alice", "b1"), T0 + 1), p.BetAccepted)
    await store.redis.script_flush()
    assert len(await store.commit_step(TABLE, b"s2", [frame(2)], [close(), settle()],
                                       T0 + 2)) == 1


async def test_amounts_are_exact_up_to_2_to_the_53(store: RedisStore) -> None:
    big = p.Limits(min=1, max=10**12, pair_min=1, pair_max=10**12, round_max=10**13)
    rich = MAX_EXACT - 10**13
    await store.ensure_player("whale", "Whale", rich, T0)
    await store.commit_step(TABLE, b"s", [], [open_round(limits=big)], T0)
    answer = await store.place_bet(bet("whale", "b1", "P1_PAIR", 10**12 - 1), T0 + 1)
    assert isinstance(answer, p.BetAccepted)
    assert answer.balance == rich - (10**12 - 1)
    answer = await store.place_bet(bet("whale", "b2", "P2", 999_999_999_999), T0 + 1)
    assert isinstance(answer, p.BetAccepted)
    assert answer.balance == rich - 3 * 999_999_999_999
    settled = await store.commit_step(TABLE, b"s", [], [close(), settle()], T0 + 2)
    assert [s.message.returned for s in settled] == [12 * (10**12 - 1), 999_999_999_999]
    assert settled[-1].message.balance == rich + 11 * (10**12 - 1) - 999_999_999_999
    assert await balance(store, "whale") == settled[-1].message.balance
    with pytest.raises(AmountOverflow):
        await store.deposit("d1", "whale", 10**13, T0)
    with pytest.raises(AmountOverflow):
        await store.ensure_player("too-rich", "", MAX_EXACT + 1, T0)
    report = await store.audit()
    assert report.ok, report.problems


async def test_the_audit_catches_tampering(store: RedisStore) -> None:
    k, r = store.keys, store.redis
    await store.ensure_player("alice", "Alice", 1_000, T0)
    await store.commit_step(TABLE, b"s", [], [open_round()], T0)
    await store.place_bet(bet("alice", "b1"), T0 + 1)
    assert (await store.audit()).ok

    await r.hincrby(k.balances, "alice", 500)  # money from nowhere
    report = await store.audit()
    assert not report.ok and report.total == 500
    assert any("alice" in problem for problem in report.problems)
    await r.hincrby(k.balances, "alice", -500)
    assert (await store.audit()).ok

    await r.hincrby(k.balances, f"hold:{R1}", -50)  # moved without a transfer: sum kept
    await r.hincrby(k.balances, "house", 50)
    report = await store.audit()
    assert not report.ok and report.total == 0
    assert any(f"hold:{R1}" in problem for problem in report.problems)
    await r.hincrby(k.balances, f"hold:{R1}", 50)
    await r.hincrby(k.balances, "house", -50)

    await r.hincrby(k.debits, "alice", 7)  # running totals that disagree with the journal
    report = await store.audit()
    assert not report.ok and any("running" in problem for problem in report.problems)
    await r.hincrby(k.debits, "alice", -7)

    await store.commit_step(TABLE, b"s", [], [close(), settle()], T0 + 2)
    assert (await store.audit()).ok
    seq, raw = next(iter((await r.hgetall(k.bets)).items()))
    record = msgspec.msgpack.decode(raw if isinstance(raw, bytes) else raw.encode())
    await r.hset(k.bets, seq, msgspec.msgpack.encode([*record[:9], "accepted"]))
    report = await store.audit()
    assert not report.ok
    assert any("neither settled nor refunded" in problem for problem in report.problems)


async def test_an_aof_server_keeps_every_bet_through_a_sigkill(tmp_path: Path) -> None:
    server = start_redis(tmp_path, appendonly=True)
    try:
        store = RedisStore.from_url(server.url)
        await store.ensure_player("alice", "Alice", 1_000, T0)
        await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
        answers = [await store.place_bet(bet("alice", f"b{n}", "P2", 10), T0 + 1)
                   for n in range(20)]
        assert all(isinstance(a, p.BetAccepted) for a in answers)
        await store.close()
        server.kill()
        server.restart()
        store = RedisStore.from_url(server.url)
        assert await balance(store, "alice") == 1_000 - 20 * 20
        assert await held(store) == 400
        assert await store.load_table(TABLE) == b"s1"
        again = await store.place_bet(bet("alice", "b3", "P2", 10), T0 + 2)
        assert again == answers[3]
        settled = await store.commit_step(TABLE, b"s2", [frame(2)],
                                          [CancelRound(table=TABLE, round_id=R1, reason="x")],
                                          T0 + 3)
        assert len(settled) == 20 and await balance(store, "alice") == 1_000
        assert (await store.audit()).ok
        await store.close()
    finally:
        server.kill()


async def test_bad_table_ids_are_refused(store: RedisStore) -> None:
    with pytest.raises(ValueError):
        await store.commit_step("a}b", b"s", [], [], T0)
    answer = await store.place_bet(
        BetRequest(player_id="alice", table="{x", bet_id="b1", round_id=R1, spot="P1",
                   amount=100), T0)
    assert isinstance(answer, p.BetRejected) and answer.code == "unknown_round"


async def test_a_house_account_is_not_a_player(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    with pytest.raises(ValueError):
        await store.ensure_player("house", "", 0, T0)
    await store.commit_step(TABLE, b"s", [], [open_round()], T0)
    for pid in ("house", "external", f"hold:{R1}"):
        answer = await store.place_bet(bet(pid, "b1"), T0 + 1)
        assert isinstance(answer, p.BetRejected) and answer.code == "not_a_player"
    assert (await store.audit()).ok



async def test_a_round_does_not_open_on_a_taken_escrow_account(store: RedisStore) -> None:
    # Written before the fix: a player account named like the next round's escrow. Opening
    # the round fails loudly, and the step writes nothing (no round, no state, no events).
    k = store.keys
    await store.redis.hset(k.accounts, f"hold:{R1}", "player")
    with pytest.raises(AccountError, match="escrow"):
        await store.commit_step(TABLE, b"s1", [frame(1)], [open_round()], T0)
    assert await store.load_table(TABLE) is None
    assert await store.round_view(R1) is None
    assert await store.redis.xlen(k.table_events(TABLE)) == 0


async def test_no_lua_transfer_from_an_account_to_itself(store: RedisStore) -> None:
    await store.ensure_player("alice", "Alice", 1_000, T0)
    journal = await store.redis.xlen(store.keys.money[4])
    with pytest.raises(ResponseError, match="SAME_ACCOUNT"):
        await store.redis.eval(
            _lua("ledger") + "\ntransfer('t-self', 'alice', 'alice', 100, 'bet', 'r', 0)",
            len(store.keys.money), *store.keys.money)
    assert await store.redis.xlen(store.keys.money[4]) == journal
    assert await balance(store, "alice") == 1_000
    assert (await store.audit()).ok


async def test_a_cluster_client_is_refused_up_front() -> None:
    # The bet and step scripts touch {ledger} and {t1} keys together: CROSSSLOT on a cluster.
    cluster = RedisCluster.from_url("redis://127.0.0.1:1")  # connects lazily: never here
    with pytest.raises(TypeError, match="cluster"):
        RedisStore(cluster)  # type: ignore[arg-type]  # refused at run time: the test
    await cluster.aclose()


async def test_a_crash_in_the_middle_of_a_chunked_settlement(redis_server: RedisServer) -> None:
    # A process restart: the store's client and its pool are gone, a new one continues.
    async def reopen(old: Store) -> Store:
        await old.close()
        return RedisStore.from_url(redis_server.url, prefix="crash")

    store = await contract.crash_in_the_middle_of_a_settlement(
        RedisStore.from_url(redis_server.url, prefix="crash"), reopen)
    await store.close()


async def test_a_ledger_transfer_is_applied_once_by_id(store: RedisStore) -> None:
    # As SQLite's transfers table (its primary key): the same id moves money once.
    await store.ensure_player("alice", "Alice", 1_000, T0)
    k = store.keys
    script = store.redis.register_script(
        _lua("ledger") + "\nreturn {transfer(ARGV[1], 'house', 'alice', 5, 'test', 'x', 0)}")
    await script(keys=k.money, args=["t-1"])
    await script(keys=k.money, args=["t-1"])
    assert (await store.player("alice")) == p.PlayerView(id="alice", name="Alice", balance=1_005)
    assert await store.redis.xlen(k.journal) == 2  # the opening deposit and t-1, once
    assert (await store.audit()).ok
