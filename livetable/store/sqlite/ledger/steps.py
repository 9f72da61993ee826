"""The engine's steps on the ledger: a step's effects, events and state in one transaction,
and the settlement (or refund) of a round's bets chunk by chunk.

Each effect is handled by one ``case`` of :func:`apply`, checked exhaustive by mypy
(``assert_never``): a new effect of the engine fails the type check here, not at run time.
A round settles in chunks of whole players, in the order they first bet
(:func:`close_chunk`; the PostgreSQL store does the same): the settling step takes the
first, ``settle_pending`` the rest.
"""

from __future__ import annotations

import json
from typing import assert_never

from livetable.accounts import AccountError, hold_account
from livetable.betting.slips import closed_deadline
from livetable.engine.effects import (
    CancelRound,
    Effect,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
)
from livetable.store.base import (
    Head,
    OutOfStep,
    Settled,
    StepRefused,
    events_read,
    events_wanted,
    out_of_step,
)
from livetable.store.bets import (
    OpenBet,
    limits_dict,
    payout_transfer_id,
    refund_transfer_id,
    settle_chunk,
    settle_transfer_id,
    shoe_rounds_json,
)
from livetable.store.sealing import open_state, seal_state
from livetable.store.sqlite.ledger.core import Ledger, Transfer, marks

INSERT_EVENT = ("INSERT OR REPLACE INTO events (table_id, epoch, seq, frame) "
                "VALUES (?, ?, ?, ?)")
TRIM_EVENTS = "DELETE FROM events WHERE table_id = ? AND (epoch < ? OR seq <= ?)"
SAVE_TABLE = (
    "INSERT INTO tables (table_id, state, epoch, seq) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (table_id) DO UPDATE SET state = excluded.state, "
    "epoch = CASE WHEN excluded.seq > 0 THEN excluded.epoch ELSE epoch END, "
    "seq = CASE WHEN excluded.seq > 0 THEN excluded.seq ELSE seq END")
OPEN_ROUND = ("INSERT OR IGNORE INTO rounds (round_id, table_id, shoe_id, round_no, state, "
              "closes_at, limits, opened_at) VALUES (?, ?, ?, ?, 'betting', ?, ?, ?)")
SET_BETTING = ("UPDATE rounds SET state = ?, closes_at = ? WHERE round_id = ? AND "
               "state IN ('betting', 'paused', 'closed')")
REVEAL_SHOE = ("INSERT OR IGNORE INTO shoes (shoe_id, table_id, commitment, salt, cut_at, "
               "burn_card, burned, card_order, rounds, ended_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
START_SETTLING = ("UPDATE rounds SET state = 'settling', cards = ?, spots = ?, ended_at = ? "
                  "WHERE round_id = ? AND state IN ('betting', 'paused', 'closed')")
START_REFUNDING = ("UPDATE rounds SET state = 'refunding', reason = ?, closes_at = NULL, "
                   "ended_at = ? WHERE round_id = ? AND state IN ('betting', 'paused', "
                   "'closed')")
CLOSE_BETS = ("UPDATE bets SET state = ?, outcome = ?, odds = ?, returned = ?, "
              "settled_at = ?, balance_after = ? WHERE seq = ?")
OPEN_BETS_OF = ("SELECT seq, player_id, bet_id, spot, amount, deducted FROM bets "
                "WHERE round_id = ? AND state = 'accepted' AND player_id = ? ORDER BY seq")


def commit_step(ledger: Ledger, table: str, state: bytes,
                events: list[tuple[int, int, bytes]], effects: list[Effect], now: int,
                chunk: int, left: Head | None = None) -> list[Settled]:
    db = ledger.db
    settled: list[Settled] = []
    with ledger.transaction():
        head = db.execute("SELECT epoch, seq FROM tables WHERE table_id = ?",
                          (table,)).fetchone()
        why = out_of_step(table, None if head is None else (head[0], head[1]), events, left)
        if why is not None:  # the engine is not where the store is: see OutOfStep
            raise OutOfStep(why)
        for effect in effects:
            settled.extend(apply(ledger, effect, now, chunk))
        if events:
            db.executemany(INSERT_EVENT, [(table, e, s, f) for e, s, f in events])
            epoch, last = events[-1][0], events[-1][1]
            if any(seq % 1000 == 0 for _, seq, _ in events):  # trim now and then
                db.execute(TRIM_EVENTS, (table, epoch, last - ledger.event_retention))
        epoch_seq = (events[-1][0], events[-1][1]) if events else (0, 0)
        db.execute(SAVE_TABLE, (table, seal_state(ledger.seal, table, state), *epoch_seq))
    return settled


def apply(ledger: Ledger, effect: Effect, now: int, chunk: int) -> list[Settled]:
    db = ledger.db
    match effect:
        case OpenRound():
            state = round_state(ledger, effect.round_id)
            if state is not None:
                raise OutOfStep(f"round {effect.round_id} is {state}: it cannot open again")
            db.execute(OPEN_ROUND, (effect.round_id, effect.table, effect.shoe_id,
                                    effect.round_no, effect.closes_at,
                                    json.dumps(limits_dict(effect.limits)), now))
            open_hold(ledger, effect.round_id, now)
            return []
        case SetBetting():
            expect_open(ledger, effect.round_id, effect.status)
            closes_at = effect.closes_at
            if effect.status == "closed":  # keep the deadline: see bets.closed_deadline
                row = db.execute("SELECT closes_at FROM rounds WHERE round_id = ?",
                                 (effect.round_id,)).fetchone()
                closes_at = closed_deadline(row[0], now) if row is not None else None
            db.execute(SET_BETTING, (effect.status, closes_at, effect.round_id))
            return []
        case SettleRound():
            return settle(ledger, effect, now, chunk)
        case CancelRound():
            return refund(ledger, effect, now, chunk)
        case RevealShoe():
            db.execute(REVEAL_SHOE, (effect.shoe_id, effect.table, effect.commitment,
                                     effect.salt, effect.cut_at, effect.burn_card,
                                     effect.burned, json.dumps(effect.order),
                                     shoe_rounds_json(effect), now))
            return []
        case _:
            assert_never(effect)


def round_state(ledger: Ledger, round_id: str) -> str | None:
    row = ledger.db.execute("SELECT state FROM rounds WHERE round_id = ?",
                            (round_id,)).fetchone()
    return None if row is None else str(row[0])


def expect_open(ledger: Ledger, round_id: str, to: str) -> None:
    """Refuse the step (:class:`OutOfStep`) unless the round is open (betting, paused or
    closed): the state a step that closes, reopens, settles or cancels it expects."""
    state = round_state(ledger, round_id)
    if state not in ("betting", "paused", "closed"):
        raise OutOfStep(f"round {round_id} is {state or 'unknown'}: it cannot go {to}")


def open_hold(ledger: Ledger, round_id: str, now: int) -> None:
    """The round's escrow account; raising rolls the step back: the round does not open."""
    hold = hold_account(round_id)
    kind = ledger.kind(hold)
    if kind is None:
        ledger.db.execute("INSERT INTO accounts (id, kind, created_at) VALUES (?, 'hold', ?)",
                          (hold, now))
    elif kind != "hold":
        raise AccountError(f"round {round_id}: its escrow account {hold!r} "
                           f"already exists as a {kind} account")


def settle(ledger: Ledger, effect: SettleRound, now: int, chunk: int) -> list[Settled]:
    """Mark the round ``settling`` with its results, then settle its first chunk."""
    db = ledger.db
    round_id = effect.round_id
    expect_open(ledger, round_id, "settling")
    db.execute(START_SETTLING, (json.dumps(effect.cards), json.dumps(effect.spots), now,
                                round_id))
    # every bet of a round not settling yet is open: bets_by_round covers this
    spots_bet = {row[0] for row in db.execute(
        "SELECT DISTINCT spot FROM bets WHERE round_id = ?", (round_id,))}
    missing = spots_bet - effect.spots.keys()
    if missing:  # raising rolls the whole step back: nothing is written
        raise StepRefused(f"no result for spot(s) {sorted(missing)} of round {round_id}")
    return close_chunk(ledger, round_id, now, chunk)[0]


def refund(ledger: Ledger, effect: CancelRound, now: int, chunk: int) -> list[Settled]:
    """Mark the round ``refunding``, then refund its first chunk of bets."""
    expect_open(ledger, effect.round_id, "refunding")
    ledger.db.execute(START_REFUNDING, (effect.reason, now, effect.round_id))
    return close_chunk(ledger, effect.round_id, now, chunk)[0]


def close_chunk(ledger: Ledger, round_id: str, now: int,
                chunk: int) -> tuple[list[Settled], bool]:
    """Settle or refund the next chunk of the round's open bets — whole players, in the
    order they first bet, about ``chunk`` bets — and mark the round ``settled`` /
    ``cancelled`` once none is left. Returns the chunk's messages, and whether bets
    remain."""
    db = ledger.db
    state, spots_json, cursor, players_in_round = db.execute(
        "SELECT state, spots, cursor, players FROM rounds WHERE round_id = ?",
        (round_id,)).fetchone()
    if state not in ("settling", "refunding"):
        return [], False
    bets, taken = next_chunk(ledger, round_id, cursor, chunk)
    cursor += taken
    results = pay(ledger, round_id, state, spots_json, bets, now)
    # each bet records its player's balance after the round (a player is in one chunk)
    players = list({b.player_id: None for b in bets})
    after = dict(db.execute(
        f"SELECT id, balance FROM accounts WHERE id IN ({marks(len(players))})",
        players).fetchall()) if players else {}
    settled = [Settled(b.player_id, b.bet_id, round_id, b.spot, b.amount, outcome, odds,
                       returned, after[b.player_id])
               for b, (outcome, odds, returned) in zip(bets, results, strict=True)]
    bet_state = "settled" if state == "settling" else "refunded"
    db.executemany(CLOSE_BETS, [(bet_state, s.outcome, s.odds, s.returned, now, s.balance,
                                 b.seq) for b, s in zip(bets, settled, strict=True)])
    more = cursor < players_in_round
    ended = "settled" if state == "settling" else "cancelled"
    db.execute("UPDATE rounds SET cursor = ?, state = ? WHERE round_id = ?",
               (cursor, state if more else ended, round_id))
    return settled, more


def next_chunk(ledger: Ledger, round_id: str, cursor: int,
               chunk: int) -> tuple[list[OpenBet], int]:
    """The open bets of the next players from ``cursor`` (about ``chunk`` bets, of
    whole players), and how many players that is."""
    bets: list[OpenBet] = []
    taken = 0
    for (pid,) in ledger.db.execute(
            "SELECT player_id FROM round_players WHERE round_id = ? AND n >= ? ORDER BY n "
            "LIMIT ?", (round_id, cursor, chunk)).fetchall():
        bets += [OpenBet(*r) for r in ledger.db.execute(OPEN_BETS_OF, (round_id, pid))]
        taken += 1
        if len(bets) >= chunk:
            break
    return bets, taken


def pay(ledger: Ledger, round_id: str, state: str, spots_json: str | None,
        bets: list[OpenBet], now: int) -> list[tuple[str, int, int]]:
    """Post a chunk's money — the stakes to the house and the payouts, or the refunds —
    as one list of transfers; each bet's outcome, odds and amount returned."""
    if not bets:
        return []
    hold = hold_account(round_id)
    if state == "settling":
        assert spots_json is not None
        plan = settle_chunk(bets, json.loads(spots_json))
        ledger.post([Transfer(settle_transfer_id(plan.first), hold, "house", plan.held,
                              "settle", round_id, now),
                     *(Transfer(payout_transfer_id(first), "house", pid, amount, "payout",
                                round_id, now)
                       for pid, (first, amount) in plan.payouts.items())])
        return plan.results
    ledger.post([Transfer(refund_transfer_id(b.seq), hold, b.player_id, b.deducted, "refund",
                          round_id, now) for b in bets])
    return [("refund", 0, b.deducted) for b in bets]


def settle_pending(ledger: Ledger, table: str, now: int,
                   chunk: int) -> tuple[list[Settled], bool]:
    with ledger.transaction():
        pending = [r[0] for r in ledger.db.execute(
            "SELECT round_id FROM rounds WHERE table_id = ? AND state IN "
            "('settling', 'refunding') ORDER BY opened_at LIMIT 2", (table,))]
        if not pending:
            return [], False
        settled, more = close_chunk(ledger, pending[0], now, chunk)
        return settled, more or len(pending) > 1


def load_table(ledger: Ledger, table: str) -> bytes | None:
    row = ledger.db.execute("SELECT state FROM tables WHERE table_id = ?",
                            (table,)).fetchone()
    return None if row is None else open_state(ledger.seal, table, bytes(row[0]))


def events_after(ledger: Ledger, table: str, epoch: int, seq: int,
                 limit: int) -> list[bytes] | None:
    db = ledger.db
    head = db.execute("SELECT epoch, seq FROM tables WHERE table_id = ?", (table,)).fetchone()
    wanted = events_wanted(head, epoch, seq, limit)
    if not wanted:
        return None if wanted is None else []
    rows = db.execute(
        "SELECT seq, frame FROM events WHERE table_id = ? AND epoch = ? AND seq > ? "
        "ORDER BY seq", (table, epoch, seq)).fetchall()
    return events_read(rows, seq, wanted)
