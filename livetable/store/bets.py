"""Bets as the stores keep them: settling a round chunk by chunk, a stored bet, a round.

The rules — how a slip is judged and answered — are :mod:`livetable.betting.slips`; this is
what both stores share below them: what settling a chunk of bets moves
(:func:`settle_chunk`), the transfer ids, the
one shape of a stored bet (:class:`BetRow`) and the Bet Record line it shows
(:func:`record_entry`), a round as kept (:class:`RoundView`), and an operator's session
(:func:`session_of`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

from livetable import protocol as p
from livetable.betting.sessions import SessionLimits, SessionRecord
from livetable.engine.effects import RevealShoe
from livetable.rules import BetSpot
from livetable.rules.fairness import ShoeRecord, ShoeRound, publish_rounds

# --- settling in chunks ---------------------------------------------------------------------

#: Bets settled per chunk on SQLite and PostgreSQL (one transaction each, off the event
#: loop): larger chunks, fewer transactions; a slip waits behind one chunk at most.
SETTLE_CHUNK = 2_000

#: A spot's result in a SettleRound: (outcome, odds, returned per unit staked).
SpotResults = dict[str, tuple[str, int, int]]


class OpenBet(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A bet still to settle or refund, in the order it was taken."""

    seq: int
    player_id: str
    bet_id: str
    spot: str
    amount: int
    deducted: int


class ChunkPlan(msgspec.Struct, frozen=True):
    """What settling one chunk of a round's bets moves.

    A chunk holds whole players: all of a player's bets of the round settle together, so
    each player gets one payout per round (the operator wallet's one credit per player and
    round) and every bet of the round reports the same balance after. Transfer ids name
    bets by their seq, unique and never reused: the round's hold goes to the house as
    ``settle:<first seq of the chunk>``, each player's returns come back from the house as
    ``payout:<the player's first seq in the round>``.
    """

    first: int
    held: int  # the chunk's deductions: hold -> house
    payouts: dict[str, tuple[int, int]]  # player -> (first seq, returned), returned > 0
    results: list[tuple[str, int, int]]  # per bet: outcome, odds, returned


def settle_chunk(bets: Sequence[OpenBet], spots: SpotResults) -> ChunkPlan:
    firsts: dict[str, int] = {}
    paid: dict[str, int] = {}
    results: list[tuple[str, int, int]] = []
    for b in bets:
        outcome, odds, multiple = spots[b.spot]
        returned = b.amount * multiple
        results.append((outcome, odds, returned))
        firsts.setdefault(b.player_id, b.seq)
        paid[b.player_id] = paid.get(b.player_id, 0) + returned
    return ChunkPlan(first=min(b.seq for b in bets), held=sum(b.deducted for b in bets),
                     payouts={pid: (firsts[pid], amount) for pid, amount in paid.items()
                              if amount > 0},
                     results=results)


def settle_transfer_id(first: int) -> str:
    return f"settle:{first}"


def payout_transfer_id(first: int) -> str:
    return f"payout:{first}"


def refund_transfer_id(seq: int) -> str:
    return f"refund:{seq}"


# --- a stored bet, and what it shows ------------------------------------------------------------


class BetRow(msgspec.Struct, array_like=True, frozen=True):
    """A bet as both stores keep it (the stores select these columns in this order; the
    SQLite writer process sends it back as this msgpack array): the settlement fields
    come later."""

    player_id: str
    bet_id: str
    table: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    placed_at: int
    balance_at_accept: int
    state: p.BetState
    outcome: str | None = None
    odds: int | None = None
    returned: int | None = None
    settled_at: int | None = None
    balance_after: int | None = None




def record_entry(row: BetRow, shoe_id: str, round_no: int,
                 cards: dict[str, list[str]] | None) -> p.BetRecordEntry:
    """A Bet Record line; ``cards`` are the round's (shown once the bet is settled)."""
    shown = cards if cards and row.state == "settled" else None
    position = BetSpot(row.spot).position.value
    return p.BetRecordEntry(
        bet_id=row.bet_id, table=row.table, shoe_id=shoe_id, round_id=row.round_id,
        round_no=round_no, spot=row.spot, amount=row.amount, deducted=row.deducted,
        placed_at=row.placed_at, state=row.state, outcome=row.outcome, odds=row.odds,
        returned=row.returned, net=None if row.returned is None else row.returned - row.deducted,
        settled_at=row.settled_at, cards=shown[position] if shown else None,
        banker_cards=shown["BANKER"] if shown else None, balance_after=row.balance_after)


class Withdrawal(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One ``Store.withdraw`` of a batch (``Store.withdraw_many``: a round's close)."""

    transfer_id: str
    player_id: str
    amount: int
    against: str | None = None


class RoundView(msgspec.Struct, kw_only=True):
    """A round as the store keeps it (``GET /api/rounds/{id}`` shows ended ones).

    ``state``: ``betting`` ``paused`` ``closed``, then ``settling`` / ``refunding`` while
    its bets are being settled or refunded chunk by chunk, then ``settled`` / ``cancelled``.
    """

    round_id: str
    table: str
    shoe_id: str
    round_no: int
    state: str
    cards: dict[str, list[str]] | None = None
    spots: dict[str, tuple[str, int, int]] | None = None
    reason: str | None = None
    opened_at: int
    ended_at: int | None = None


#: The columns of a stored bet, in :class:`BetRow`'s order (both SQL stores select them so).
BET_COLUMNS = ("player_id, bet_id, table_id, round_id, spot, amount, deducted, placed_at, "
               "balance_at_accept, state, outcome, odds, returned, settled_at, balance_after")
#: The columns of a stored round, in the order :func:`round_view_of` reads them.
ROUND_COLUMNS = ("round_id, table_id, shoe_id, round_no, state, cards, spots, reason, "
                 "opened_at, ended_at")


def round_view_of(row: Sequence[Any]) -> RoundView:
    """A round's row (:data:`ROUND_COLUMNS`, JSON as text) as the store shows it."""
    spots = json.loads(row[6]) if row[6] else None
    return RoundView(round_id=row[0], table=row[1], shoe_id=row[2], round_no=row[3],
                     state=row[4], cards=json.loads(row[5]) if row[5] else None,
                     spots={s: (r[0], r[1], r[2]) for s, r in spots.items()} if spots else None,
                     reason=row[7], opened_at=row[8], ended_at=row[9])


def record_page(rows: Sequence[Sequence[Any]], limit: int
                ) -> tuple[list[p.BetRecordEntry], str | None]:
    """A page of a player's Bet Record from up to ``limit + 1`` rows of ``seq, shoe_id,
    round_no, cards`` and :data:`BET_COLUMNS`, newest first: the entries and the cursor
    of the next page (None on the last)."""
    entries = [record_entry(BetRow(*row[4:]), row[1], row[2],
                            json.loads(row[3]) if row[3] else None) for row in rows[:limit]]
    return entries, str(rows[limit - 1][0]) if len(rows) > limit else None


#: The columns of a stored tip, in the order :func:`tip_entry` reads them; a Bet Record page
#: comes with at most this many of the player's tips (``Store.tip_record``).
TIP_COLUMNS = "tip_id, table_id, round_id, amount, placed_at, balance_after"
MAX_TIPS_PER_PAGE = 200


def tip_entry(row: Sequence[Any]) -> p.TipRecordEntry:
    """A row of :data:`TIP_COLUMNS` as the Bet Record shows it."""
    return p.TipRecordEntry(tip_id=row[0], table=row[1], round_id=row[2], amount=row[3],
                            placed_at=row[4], balance_after=row[5])


#: An operator's session as both stores keep it (one row a session).
SESSION_COLUMNS = ("session_id, operator, player_id, started_at, expires_at, limits, staked, "
                   "returned, round_id, round_staked, checked_at, ended_at, reason")


def session_values(record: SessionRecord) -> tuple[Any, ...]:
    """``record`` as the values of :data:`SESSION_COLUMNS`, in order."""
    return (record.session_id, record.operator, record.player_id, record.started_at,
            record.expires_at, msgspec.json.encode(record.limits).decode(), record.staked,
            record.returned, record.round_id, record.round_staked, record.checked_at,
            record.ended_at, record.reason)


def session_of(row: Sequence[Any] | None) -> SessionRecord | None:
    """The session of a row of :data:`SESSION_COLUMNS` (None for no row)."""
    if row is None:
        return None
    return SessionRecord(session_id=row[0], operator=row[1], player_id=row[2],
                         started_at=row[3], expires_at=row[4],
                         limits=msgspec.json.decode(row[5], type=SessionLimits),
                         staked=row[6], returned=row[7], round_id=row[8],
                         round_staked=row[9], checked_at=row[10], ended_at=row[11],
                         reason=row[12])


def limits_dict(limits: p.Limits) -> dict[str, int]:
    return {"min": limits.min, "max": limits.max, "pair_min": limits.pair_min,
            "pair_max": limits.pair_max, "round_max": limits.round_max}



#: The columns of a stored shoe, in the order :func:`shoe_record` reads them.
SHOE_COLUMNS = ("table_id, commitment, salt, cut_at, burn_card, burned, card_order, rounds, "
                "ended_at")
#: What :func:`shoe_record` reads of each round of a shoe (after its id).
SHOE_ROUND_COLUMNS = "round_id, round_no, state, cards, spots"


def shoe_rounds_json(effect: RevealShoe) -> str:
    """The ``rounds`` column of a revealed shoe: its rounds (id, cards taken, when it
    ended), why it ended and its game log's head, as one JSON object (a shoe revealed
    before the game log existed holds only the list ``[[round_id, cards taken], ...]``)."""
    return json.dumps({"rounds": effect.rounds, "ended_by": effect.ended_by,
                       "chain_head": effect.chain_head})


def _shoe_rounds(text: str) -> tuple[list[list[Any]], dict[str, Any]]:
    kept = json.loads(text)
    return (kept, {}) if isinstance(kept, list) else (kept["rounds"], kept)


def shoe_round_ids(text: str) -> list[str]:
    """The round ids a ``rounds`` column names, in order."""
    return [str(r[0]) for r in _shoe_rounds(text)[0]]


def shoe_record(shoe_id: str, row: Sequence[Any],
                stored: Mapping[str, Sequence[Any]]) -> ShoeRecord:
    """An ended shoe's record from its row (:data:`SHOE_COLUMNS`) and its rounds as stored
    (round id → :data:`SHOE_ROUND_COLUMNS` after the id, JSON as kept), the same in every
    store: a settled round shows its cards and its outcome per spot, and a cancelled
    round's dealt cards are published too, so the record accounts for every slot of the
    order; with the game log's facts (when each round ended, why the shoe ended, how many
    rounds it had, the log's head)."""
    kept, facts = _shoe_rounds(row[7])
    rounds = []
    for round_id, dealt, *at in kept:
        round_no, state, cards, spots = stored.get(round_id, (0, "unknown", None, None))
        settled = state == "settled"
        rounds.append(ShoeRound(
            round_id=round_id, round_no=round_no, state=state, dealt=dealt,
            cards=json.loads(cards) if cards and settled else None,
            at=at[0] if at else None,
            spots={s: r[0] for s, r in json.loads(spots).items()} if spots and settled
            else {}))
    order = json.loads(row[6])
    return ShoeRecord(shoe_id=shoe_id, table=row[0], commitment=row[1], salt=row[2],
                      cut_at=row[3], burn_card=row[4], burned=row[5],
                      order=order, rounds=publish_rounds(order, rounds), ended_at=row[8],
                      ended_by=facts.get("ended_by"),
                      round_count=len(kept) if facts else None,
                      chain_head=facts.get("chain_head"))


#: A round's bets by spot: ({spot: (players, stakes)}, players) — :meth:`RoundFigures.bet_spread`.
BetSpread = tuple[dict[str, tuple[int, int]], int]


class RoundFigures(Protocol):
    """What a store tells of a round's bets as a whole (part of
    :class:`~livetable.store.base.Store`)."""

    async def bet_spread(self, round_id: str) -> BetSpread:
        """How the round's bets lie on the spots, refunded ones left out: for each spot bet
        on, how many players bet there and the sum of their stakes; and how many players
        bet in the round (what ``bet_stats`` is made of: livetable/engine/announce.py)."""
        ...
