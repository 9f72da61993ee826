"""Bet slips on the ledger: a batch of them in one transaction (group commit).

A slip judged alone reads about ten rows and writes about eight statements; a batch of
2,000 slips that way is 36,000 statements, each a round trip through the sqlite3 module
holding the GIL the event loop needs. Here the batch reads its players' accounts, the
rounds, the players' amounts in them, the bet ids and slip ids it names, all in a few
queries (:func:`read_facts`); judges each slip in order with
:func:`~livetable.betting.slips.judge_slip` against those facts, which it updates as each
slip is taken — a balance, a bet id, a slip id, a spot's total, a round's new player — so
a slip sees exactly what the slips before it left, and the answers are exactly those of
one transaction per slip (:func:`take`); and writes the batch with one ``executemany``
per table, its stakes posted as one list of transfers (:func:`write`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from livetable import protocol as p
from livetable.accounts import hold_account
from livetable.betting.slips import (
    RoundFacts,
    SlipAnswer,
    SlipFacts,
    SlipRequest,
    TakenBet,
    accepted,
    judge_slip,
    precheck,
)
from livetable.store.sqlite.ledger.core import QUERY_ROWS, Ledger, Transfer, marks

T = TypeVar("T")

#: Slips taken in one transaction at most (a burst is cut into transactions of this size,
#: so that a settlement chunk or a read waits behind one of them at most).
MAX_SLIPS_PER_TRANSACTION = 2_000

TAKEN_COLUMNS = "bet_id, round_id, spot, amount, deducted, balance_at_accept"
TAKEN_COLUMNS_OF_BETS = ", ".join(f"bets.{c}" for c in TAKEN_COLUMNS.split(", "))
INSERT_SLIP = ("INSERT INTO slips (seq, player_id, slip_id, round_id, deducted, balance, "
               "placed_at) VALUES (?, ?, ?, ?, ?, ?, ?)")
INSERT_ROUND_PLAYER = "INSERT INTO round_players (round_id, n, player_id) VALUES (?, ?, ?)"
COUNT_ROUND_PLAYERS = "UPDATE rounds SET players = ? WHERE round_id = ?"
INSERT_BET = ("INSERT INTO bets (player_id, bet_id, table_id, round_id, spot, amount, "
              "deducted, placed_at, balance_at_accept, state, slip_seq) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'accepted', ?)")

Batch = list[tuple[SlipRequest, int]]
#: A Transfer made without its NamedTuple ``__new__`` (a Python call: 0.6 µs, a slip's
#: fortieth, against 0.1 µs): the hot path of a batch makes one per slip.
_transfer = tuple.__new__


def chunks(items: list[T], n: int = QUERY_ROWS) -> Iterator[list[T]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


@dataclass
class Facts:
    """What the slips of a batch are judged by, kept current as each is taken."""

    accounts: dict[str, list[Any]]  # player: [kind, balance]
    rounds: dict[str, tuple[RoundFacts, int] | None]
    players_in: dict[str, int]  # round: its players so far
    on_spot: dict[tuple[str, str], dict[str, int]]  # (round, player): spot → amount
    on_round: dict[tuple[str, str], int]  # (round, player): deducted so far
    used: dict[tuple[str, str], TakenBet]  # (player, bet id)
    prior: dict[tuple[str, str], list[TakenBet]]  # (player, slip id): its bets
    next_seq: int


@dataclass
class Writes:
    """What a batch writes, row by row, once every slip is judged."""

    slips: list[tuple[Any, ...]] = field(default_factory=list)
    bets: list[tuple[Any, ...]] = field(default_factory=list)
    round_players: list[tuple[str, int, str]] = field(default_factory=list)
    stakes: list[Transfer] = field(default_factory=list)


def take_slips(ledger: Ledger, batch: Batch) -> list[SlipAnswer]:
    """Judge and apply a batch of slips in one transaction, one after another, as if each
    had its own. A slip its own shape refuses (:func:`~livetable.betting.slips.precheck`)
    is answered first, and nothing is read, debited or written for it."""
    shapes = [precheck(slip) for slip, _ in batch]
    formed = [entry for entry, bad in zip(batch, shapes, strict=True) if bad is None]
    if not formed:
        return [bad for bad in shapes if bad is not None]
    with ledger.transaction():
        for slip, _ in formed:  # a seamless slip's debit, in the ledger before its bets
            if slip.deposit is not None and ledger.kind(slip.player_id) == "player":
                ledger.transfer(Transfer(f"deposit:{slip.deposit.transfer_id}", "external",
                                         slip.player_id, slip.deposit.amount, "deposit",
                                         slip.player_id, slip.deposit.at))
        facts = read_facts(ledger, formed)
        writes = Writes()
        taken = iter([take(slip, now, facts, writes) for slip, now in formed])
        write(ledger, facts, writes)
    return [next(taken) if bad is None else bad for bad in shapes]


def round_facts(ledger: Ledger, round_id: str) -> tuple[RoundFacts, int] | None:
    """The round as slips are judged against it, and its number of players so far."""
    row = ledger.db.execute("SELECT table_id, state, closes_at, limits, players FROM rounds "
                            "WHERE round_id = ?", (round_id,)).fetchone()
    if row is None:
        return None
    limits = ledger.limits.get(round_id)
    if limits is None:
        limits = ledger.limits[round_id] = p.Limits(**json.loads(row[3]))
        if len(ledger.limits) > 1000:
            ledger.limits.pop(next(iter(ledger.limits)))
    return RoundFacts(table=row[0], state=row[1], closes_at=row[2], limits=limits), row[4]


def read_facts(ledger: Ledger, batch: Batch) -> Facts:
    db = ledger.db
    accounts: dict[str, list[Any]] = {}
    for chunk in chunks(sorted({slip.player_id for slip, _ in batch})):
        for pid, kind, balance in db.execute(
                f"SELECT id, kind, balance FROM accounts WHERE id IN ({marks(len(chunk))})",
                chunk):
            accounts[pid] = [kind, balance]
    rounds: dict[str, tuple[RoundFacts, int] | None] = {}
    for slip, _ in batch:
        if slip.round_id not in rounds:
            rounds[slip.round_id] = round_facts(ledger, slip.round_id)
    players_in = {rid: r[1] for rid, r in rounds.items() if r is not None}
    on_spot, on_round = _round_totals(ledger, batch, players_in)
    next_seq = 1 + max(
        db.execute("SELECT COALESCE(MAX(seq), 0) FROM slips").fetchone()[0],
        (db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'slips'").fetchone()
         or (0,))[0])
    return Facts(accounts, rounds, players_in, on_spot, on_round, _used_bet_ids(ledger, batch),
                 _prior_slips(ledger, batch), next_seq)


def _round_totals(ledger: Ledger, batch: Batch, rounds: dict[str, int]
                  ) -> tuple[dict[tuple[str, str], dict[str, int]], dict[tuple[str, str], int]]:
    """What each player of the batch has on each spot of each round, and deducted in it."""
    on_spot: dict[tuple[str, str], dict[str, int]] = {}
    on_round: dict[tuple[str, str], int] = {}
    for rid in rounds:
        pids = sorted({s.player_id for s, _ in batch if s.round_id == rid})
        for chunk in chunks(pids):
            for pid, spot, amount, deducted in ledger.db.execute(
                    f"SELECT player_id, spot, SUM(amount), SUM(deducted) FROM bets "
                    f"WHERE round_id = ? AND player_id IN ({marks(len(chunk))}) "
                    f"GROUP BY player_id, spot", (rid, *chunk)):
                on_spot.setdefault((rid, pid), {})[spot] = amount
                on_round[(rid, pid)] = on_round.get((rid, pid), 0) + deducted
    return on_spot, on_round


def _used_bet_ids(ledger: Ledger, batch: Batch) -> dict[tuple[str, str], TakenBet]:
    used: dict[tuple[str, str], TakenBet] = {}
    pairs = sorted({(slip.player_id, b.bet_id) for slip, _ in batch for b in slip.bets})
    for some in chunks(pairs):
        for pid, *row in ledger.db.execute(
                f"WITH q(p, b) AS (VALUES {','.join(['(?, ?)'] * len(some))}) "
                f"SELECT bets.player_id, {TAKEN_COLUMNS_OF_BETS} FROM q JOIN bets "
                f"ON bets.player_id = q.p AND bets.bet_id = q.b",
                [x for pair in some for x in pair]):
            used[(pid, row[0])] = TakenBet(*row)
    return used


def _prior_slips(ledger: Ledger, batch: Batch) -> dict[tuple[str, str], list[TakenBet]]:
    db = ledger.db
    prior: dict[tuple[str, str], list[TakenBet]] = {}
    named = sorted({(slip.player_id, slip.slip_id) for slip, _ in batch
                    if slip.slip_id is not None})
    for names in chunks(named):
        seqs = {seq: (pid, sid) for pid, sid, seq in db.execute(
            f"WITH q(p, s) AS (VALUES {','.join(['(?, ?)'] * len(names))}) "
            f"SELECT slips.player_id, slips.slip_id, slips.seq FROM q JOIN slips "
            f"ON slips.player_id = q.p AND slips.slip_id = q.s",
            [x for pair in names for x in pair])}
        if seqs:
            for seq, *row in db.execute(
                    f"SELECT slip_seq, {TAKEN_COLUMNS_OF_BETS} FROM bets WHERE slip_seq "
                    f"IN ({marks(len(seqs))}) ORDER BY seq", list(seqs)):
                prior.setdefault(seqs[seq], []).append(TakenBet(*row))
    return prior


def take(slip: SlipRequest, now: int, facts: Facts, writes: Writes) -> SlipAnswer:
    """Judge one slip against ``facts``; if it is taken, update them and add its rows."""
    pid, rid = slip.player_id, slip.round_id
    account = facts.accounts.get(pid)
    round_ = facts.rounds.get(rid)
    key = (rid, pid)
    verdict = judge_slip(slip, now, SlipFacts(
        prior_slip=None if slip.slip_id is None else facts.prior.get((pid, slip.slip_id)),
        used_bet_ids={b.bet_id: facts.used[(pid, b.bet_id)] for b in slip.bets
                      if (pid, b.bet_id) in facts.used},
        round=None if round_ is None else round_[0],
        on_spot=facts.on_spot.get(key, {}), on_round=facts.on_round.get(key, 0),
        is_player=account is not None and account[0] == "player",
        balance=0 if account is None else account[1]))
    if not isinstance(verdict, list):
        return verdict
    assert account is not None  # judge_slip checked it
    total = sum(verdict)
    balance = account[1] = account[1] - total
    answer = accepted(slip, verdict, balance)  # the rules' answer, asked with the verdict
    seq = facts.next_seq
    facts.next_seq += 1
    writes.slips.append((seq, pid, slip.slip_id, rid, total, balance, now))
    if key not in facts.on_round:  # the round's players in the order they first bet
        writes.round_players.append((rid, facts.players_in[rid], pid))
        facts.players_in[rid] += 1
    spots = facts.on_spot.setdefault(key, {})
    taken = []
    for b, d in zip(slip.bets, verdict, strict=True):
        writes.bets.append((pid, b.bet_id, slip.table, rid, b.spot, b.amount, d, now,
                            balance, seq))
        spots[b.spot] = spots.get(b.spot, 0) + b.amount
        bet = facts.used[(pid, b.bet_id)] = TakenBet(b.bet_id, rid, b.spot, b.amount, d,
                                                     balance)
        taken.append(bet)
    facts.on_round[key] = facts.on_round.get(key, 0) + total
    if slip.slip_id is not None:
        facts.prior[(pid, slip.slip_id)] = taken
    # The transfer id is the slip's row, not "player:slip_id": both are free text, and
    # "a" sending "b:c" must not be taken for "a:b" sending "c".
    writes.stakes.append(_transfer(Transfer, (f"slip:{seq}", pid, hold_account(rid), total,
                                              "bet", rid, now)))
    return answer


def write(ledger: Ledger, facts: Facts, writes: Writes) -> None:
    """Write what the batch took, one statement per table; the stakes as one post."""
    if not writes.slips:
        return
    db = ledger.db
    db.executemany(INSERT_SLIP, writes.slips)
    db.executemany(INSERT_ROUND_PLAYER, writes.round_players)
    db.executemany(COUNT_ROUND_PLAYERS, [(n, rid) for rid, n in facts.players_in.items()])
    db.executemany(INSERT_BET, writes.bets)
    ledger.post(writes.stakes, fresh=True)
