"""A bet's path through the code (bench/bet_path.py): the rooms it walks, and the rule that
says when a room is entered again.

The path is the design's, not a timing: one ``place_bet`` through the real gateway and a
SQLite store (or a PostgreSQL one) walks each room once, in one direction, and the tracer
sees the writer thread as well as the event loop. docs/architecture.md ("The life of a bet") and
docs/benchmarks/postgres.md ("The path of a bet through the code") show the same path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repository, where bench/ is

from bench.bet_path import main, path_of, room_of  # noqa: E402  (once bench/ is on the path)


async def test_a_bet_walks_each_room_of_the_store_once_and_one_way() -> None:
    walked = await main("sqlite")
    assert walked["path"] == [
        "server.gateway.connection", "server.gateway.commands", "server.gateway.intake",
        "store.sqlite", "store.slip_queue", "store.sqlite.ledger_writer",
        "store.sqlite.ledger",  # on the writer thread: the tracer sees it
        "betting.slips", "accounts",
        # the answer is worded where the bet came in (intake.bet_answer): the coroutine that
        # sent the slip down resumes with its judgement, no room is entered again
        "server.gateway.client"]
    assert walked["re_entries"] == {}
    assert walked["rooms"] == 10 and walked["modules"] == 13


@pytest.mark.process  # a PostgreSQL primary of its own (tests/pg_util.py)
async def test_a_bet_on_postgres_walks_each_room_once_and_one_way() -> None:
    """It entered the store's module three times (a wrapper around each public method,
    made in ``store.base``, then the slip queue calling back the store's batch-taker,
    whose transaction went through the wrapper again): now the queue hands its batch down
    to the slips' taker, which opens its transaction at the pool, the one door of every
    query."""
    walked = await main("postgres")
    assert walked["path"] == [
        "server.gateway.connection", "server.gateway.commands", "server.gateway.intake",
        "store.postgres.store", "store.slip_queue", "store.postgres.slips",
        "store.postgres.pool",  # the batch's transaction, from below the store
        "betting.slips", "accounts", "server.gateway.client"]
    assert walked["re_entries"] == {}


def test_the_ledger_is_one_room_and_every_other_module_its_own() -> None:
    assert room_of("livetable.store.sqlite.ledger.core") == "livetable.store.sqlite.ledger"
    assert room_of("livetable.store.sqlite.ledger") == "livetable.store.sqlite.ledger"
    assert room_of("livetable.store.sqlite.ledger_writer") == (
        "livetable.store.sqlite.ledger_writer")
    assert room_of("livetable.store.sqlite") == "livetable.store.sqlite"


def test_a_room_asked_twice_in_a_row_is_one_stay_and_asked_again_later_is_not() -> None:
    one_stay = path_of([("a", None), ("rules", "a"), ("rules", "a")], {"a", "rules"})
    assert one_stay["path"] == ["a", "rules"] and one_stay["re_entries_total"] == 0
    # a task the room started (no caller in livetable) is the same stay too
    task = path_of([("a", None), ("queue", "a"), ("queue", None)], {"a", "queue"})
    assert task["path"] == ["a", "queue"] and task["re_entries_total"] == 0
    # asked by one room, then by another after the bet went on: entered again, though no
    # other entry came in between (the bet came back out through returns, which the
    # profiler does not count as entries)
    again = path_of([("a", None), ("b", "a"), ("rules", "b"), ("rules", "a")],
                    {"a", "b", "rules"})
    assert again["path"] == ["a", "b", "rules", "rules"]
    assert again["re_entries"] == {"rules": 1}
    # a callback: the room below calls back up into the one that called it
    back = path_of([("a", None), ("queue", "a"), ("a", "queue")], {"a", "queue"})
    assert back["re_entries"] == {"a": 1}
