"""The table simulated: 10,000 rounds with faults, deterministic from a seed (see sim.harness).

Environment, for longer or other runs:

* ``LIVETABLE_SIM_ROUNDS`` — rounds of the main run (default 10,000), e.g. 200000;
* ``LIVETABLE_SIM_SEED`` — its seed (a failure message names the seed to replay);
* ``LIVETABLE_SIM_AUDIT_EVERY`` — rounds between full ``audit()`` runs (default: every round
  for the first 100, then every 500, or every rounds/20 on long runs; 1 = after every round).

The run prints its statistics (``pytest -s``). The harness runs alone too:
``PYTHONPATH=tests .venv/bin/python -m sim --rounds 200000 --seed 7``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from sim import SimConfig, Simulation, SimulationFailure, Stats

from livetable.betting.slips import REJECTIONS, SESSION_REJECTIONS, WALLET_REJECTIONS
from livetable.engine import Effect
from livetable.engine import table as engine_table
from livetable.rules import (
    BetSpot,
    Hand,
    Position,
    SpotResult,
    hand_of,
    parse_cards,
    settle_round,
)
from livetable.store import Settled, SQLiteStore, Store

#: Minutes of CPU (10,000 simulated rounds): not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("LIVETABLE_SIM_ROUNDS", "10000"))
SEED = int(os.environ.get("LIVETABLE_SIM_SEED", "20251129"))
AUDIT_EVERY = int(os.environ.get("LIVETABLE_SIM_AUDIT_EVERY", str(max(500, ROUNDS // 20))))


def _comparable(stats: Stats) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(stats).items()
            if k not in ("seconds", "cpu_seconds")}


#: Rejection codes only a place_bets can meet (the simulated players send place_bet; the
#: contract tests cover slips).
SLIP_ONLY = {"bad_slip_id", "bad_slip", "duplicate_slip_id"}

#: Small chunks, so that rounds settle in several and crashes fall between them.
SIM_CHUNK = 3


async def test_ten_thousand_rounds_with_faults() -> None:
    store = SQLiteStore(":memory:", settle_chunk=SIM_CHUNK)
    config = SimConfig(seed=SEED, rounds=ROUNDS, audit_every=AUDIT_EVERY)
    stats = await Simulation(store, config).run()
    print(f"\nsimulation seed {SEED}: {stats.summary()}")
    assert stats.rounds >= ROUNDS
    # The schedule reached everything it is meant to exercise.
    assert stats.settled > 0 and stats.cancelled > 0
    assert stats.manual_rounds > 0 and stats.last_rounds > 0 and stats.cut_cards > 0
    assert stats.verified_shoes > 0  # every revealed shoe passes verify-shoe's check
    assert stats.crashes > 0 and stats.lost_steps > 0 and stats.recovered_settled > 0
    assert stats.pauses > 0 and stats.impossible_cards > 0 and stats.refused_commands > 0
    assert stats.corrections > 0 and stats.cards_in_betting > 0
    assert stats.retries > 0 and stats.deposits > 0
    assert stats.chunks > 0 and stats.settle_crashes > 0
    assert stats.bets_accepted > 2 * ROUNDS
    # Every refusal a player can meet (rate limiting is the gateway's and the wallet's
    # refusals the seamless wallet's, not the store's).
    assert set(stats.rejections) == (set(REJECTIONS) - {"rate_limited"} - SLIP_ONLY
                                     - WALLET_REJECTIONS - SESSION_REJECTIONS)
    await store.close()


async def test_the_same_seed_replays_exactly() -> None:
    runs = []
    for _ in range(2):
        store = SQLiteStore(":memory:")
        stats = await Simulation(store, SimConfig(seed=5, rounds=150)).run()
        state = await store.load_table("sim")
        report = await store.audit()
        records = await store.bet_record("p007", 200, None)
        runs.append((_comparable(stats), state, report, records))
        await store.close()
    assert runs[0] == runs[1]


async def test_a_file_store_reopened_after_every_crash(tmp_path: Path) -> None:
    # A crash here is a process restart: the store is closed and opened again from its file,
    # so what the next engine sees is only what was committed to disk.
    path = tmp_path / "livetable.db"
    reopened = 0

    async def reopen(old: Store) -> Store:
        nonlocal reopened
        reopened += 1
        await old.close()
        return SQLiteStore(path, settle_chunk=SIM_CHUNK)

    config = SimConfig(seed=11, rounds=300, crash_rate=0.01, lose_step_rate=0.01,
                       to_manual=0.05)
    sim = Simulation(SQLiteStore(path, settle_chunk=SIM_CHUNK), config, reopen=reopen)
    stats = await sim.run()
    assert stats.settle_crashes > 5 and stats.chunks > 0
    assert stats.crashes + stats.settle_crashes == reopened > 10
    await sim.store.close()


# --- the harness catches what it should ----------------------------------------------------


class SkimmingStore(SQLiteStore):
    """A broken store: the 40th settlement with a payout keeps one unit of it."""

    payouts = 0

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int, *,
                          snapshot: bytes = b"") -> list[Settled]:
        settled = await super().commit_step(table, state, events, effects, now,
                                            snapshot=snapshot)
        paid = [s for s in settled if s.message.returned > 0 and s.message.outcome != "refund"]
        if paid:
            self.payouts += 1
            if self.payouts == 40:
                self.db.execute("UPDATE accounts SET balance = balance - 1 WHERE id = ?",
                                (paid[0].player_id,))
                self.db.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 'house'")
        return settled


async def test_the_harness_catches_a_store_that_skims() -> None:
    with pytest.raises(SimulationFailure, match="holds"):
        await Simulation(SkimmingStore(":memory:"), SimConfig(seed=3, rounds=300)).run()


async def test_the_harness_catches_an_engine_that_misreads_the_zero_or_six_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The engine settles as if "Banker 0 or 6" were raw points (a Banker 10+J would be 0):
    # docs/design.md §1 says it is the hand *value*. The harness recomputes from the stored cards.
    real = settle_round

    def misread(hands: dict[Position, Hand]) -> dict[BetSpot, SpotResult]:
        banker = hands[Position.BANKER]
        if banker.combination is not None and banker.points in (0, 6):
            plain = hand_of(parse_cards("2C 8D" if banker.points == 0 else "2C 4D"))
            hands = {**hands, Position.BANKER: plain}
        return real(hands)

    monkeypatch.setattr(engine_table, "settle_round", misread)
    with pytest.raises(SimulationFailure, match="rules"):
        await Simulation(SQLiteStore(":memory:"), SimConfig(seed=4, rounds=2_000)).run()
