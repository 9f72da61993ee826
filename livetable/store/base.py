"""The store contract: the ledger, the bets, the rounds and each table's event log.

Two implementations keep it: SQLite (the embedded default) and Redis (scale-out). Both pass
the same contract tests (tests/unit/test_store_contract.py), so what is said here holds for
both:

* Money is double entry. Accounts: players, ``house``, one hold per round
  (``hold:<round_id>``) and ``external``, the other side of every deposit. Every money
  move is a transfer with an id, applied once; so the sum over all accounts is always 0
  and :meth:`Store.audit` can prove it.
* A bet is taken by :meth:`Store.place_bet` alone, atomically: the round must be open
  (``betting``, before ``closes_at`` by the caller's clock), the limits and the balance must
  allow it, and the ``(player, bet_id)`` pair is an idempotency key.
* :meth:`Store.commit_step` stores one engine step — its effects on the ledger, its events
  and the engine's new state — in one transaction, *before* the step is announced. Settling
  and refunding a round are idempotent by round id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from livetable import protocol as p
from livetable.engine.table import Effect
from livetable.rules import BetSpot
from livetable.rules.fairness import ShoeRecord

MAX_AMOUNT = 10**12
MAX_BET_ID = 64

#: Stable rejection codes and their English messages (the browser translates by code).
REJECTIONS: dict[str, str] = {
    "betting_closed": "Betting is closed for this round.",
    "unknown_round": "That round is not open at this table.",
    "insufficient_funds": "Your balance does not cover this bet.",
    "below_min": "The amount is below the table minimum for this spot.",
    "above_max": "The amount would exceed the table maximum for this spot.",
    "round_limit": "Your bets would exceed the per-round limit.",
    "bad_spot": "Unknown bet spot.",
    "bad_amount": "The amount must be a positive whole number.",
    "bad_bet_id": "bet_id must be 1 to 64 characters.",
    "duplicate_bet_id": "This bet_id was already used for a different bet.",
    "paused": "The table is paused.",
    "not_a_player": "Sign in as a player to bet.",
    "rate_limited": "Too many bets, slow down.",
}


def rejected(bet_id: str, code: str, detail: str | None = None) -> p.BetRejected:
    message = REJECTIONS[code] if detail is None else f"{REJECTIONS[code]} {detail}"
    return p.BetRejected(bet_id=bet_id, code=code, message=message)


class BetRequest(msgspec.Struct, frozen=True, kw_only=True):
    player_id: str
    table: str
    bet_id: str
    round_id: str
    spot: str
    amount: int


def precheck(bet: BetRequest) -> p.BetRejected | None:
    """What can be refused without looking at any state."""
    if not 0 < len(bet.bet_id) <= MAX_BET_ID:
        return rejected(bet.bet_id[:MAX_BET_ID], "bad_bet_id")
    if bet.spot not in BetSpot.__members__:
        return rejected(bet.bet_id, "bad_spot", f"({bet.spot!r})")
    if not 0 < bet.amount <= MAX_AMOUNT:
        return rejected(bet.bet_id, "bad_amount")
    return None


def cursor_of(before: str | None) -> int | None:
    """A Bet Record cursor (``next`` of the page before) as a bet sequence number; None
    for the first page. Anything else is refused, never passed on to SQL or Redis (a number
    past 2^63 overflowed SQLite's integers)."""
    if before is None or before == "":
        return None
    if not (before.isascii() and before.isdigit() and len(before) <= 15):
        raise ValueError(f"not a Bet Record cursor: {before[:32]!r}")
    return int(before)


def spot_limits(limits: p.Limits, spot: str) -> tuple[int, int]:
    if BetSpot(spot).is_pair:
        return limits.pair_min, limits.pair_max
    return limits.min, limits.max


@dataclass
class AuditReport:
    ok: bool
    total: int
    deposits: int
    house: int
    problems: list[str] = field(default_factory=list)


class Settled(msgspec.Struct, frozen=True):
    """A private ``bet_settled`` for one player."""

    player_id: str
    message: p.BetSettled


class Store(Protocol):
    async def ensure_player(
        self, player_id: str, name: str, initial_balance: int, now: int
    ) -> p.PlayerView: ...

    async def player(self, player_id: str) -> p.PlayerView | None: ...

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int: ...

    async def place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected: ...

    async def commit_step(
        self,
        table: str,
        state: bytes,
        events: list[tuple[int, int, bytes]],
        effects: list[Effect],
        now: int,
    ) -> list[Settled]: ...

    async def load_table(self, table: str) -> bytes | None: ...

    async def events_after(
        self, table: str, epoch: int, seq: int, limit: int
    ) -> list[bytes] | None: ...

    async def settlements_for_rounds(
        self, player_id: str, round_ids: list[str]
    ) -> list[p.BetSettled]: ...

    async def bet_record(
        self, player_id: str, limit: int, before: str | None
    ) -> tuple[list[p.BetRecordEntry], str | None]: ...

    async def round_view(self, round_id: str) -> dict[str, object] | None: ...

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        """An ended auto shoe, revealed (DESIGN §7); None for any other shoe id."""
        ...

    async def audit(self) -> AuditReport: ...

    async def identity(self, create: bool = False) -> str | None:
        """This store's identity: a random id written once, when the ledger is new.

        A process remembers the identity it started on; a store that answers another one,
        or none (a Redis that restarted empty, a database swapped under it), is not the
        ledger it was using, and the process turns not-ready instead of carrying on. With
        ``create`` a missing identity is written (what a process does at start)."""
        ...

    async def close(self) -> None: ...
