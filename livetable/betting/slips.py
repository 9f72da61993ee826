"""The betting rules: how a slip is judged and answered — the one place for them.

A slip is what a player's Confirm sends and what the operator's wallet debits: all of its
bets are taken together, or none is, and ``(player, slip_id)`` is its idempotency key.
``place_bet`` is a slip of one without a ``slip_id``: it is idempotent by its
``(player, bet_id)`` as it always was.

Pure, like the engine: no store, no socket. Both stores judge a slip here, in the batch
that applies it: first its own shape (:func:`precheck`: a malformed slip is answered
before anything is read or written for it), then the checks that read state, in their
order (:func:`judge_slip`, over the facts the store gathered in its transaction,
:class:`SlipFacts`), with the rejection codes, their messages and details
(:class:`Rejection`). The gateway refuses with these codes what it can alone, asks
:func:`precheck` and :func:`within_limits` before a seamless debit, and words the answers
on the way out (``livetable.server.gateway.intake``); :func:`settled_message` is the one
builder of ``bet_settled``. The contract tests (tests/unit/test_store_contract.py) hold
both stores to the same answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from livetable import protocol as p
from livetable.rules import BetSpot

MAX_AMOUNT = 10**12
MAX_BET_ID = 64
MAX_SLIP_ID = 64
#: Ten spots; a slip may name one twice (two chips on P1 sent as two bets), not much more.
MAX_SLIP_BETS = 20

#: Stable rejection codes and their English messages (the browser translates by code).
REJECTIONS: dict[p.RejectionCode, str] = {
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
    "bad_slip_id": "slip_id must be 1 to 64 characters.",
    "bad_slip": "A slip holds 1 to 20 bets.",
    "duplicate_slip_id": "This slip_id was already used for a different slip.",
    "paused": "The table is paused.",
    "not_a_player": "Sign in as a player to bet.",
    "rate_limited": "Too many bets, slow down.",
    "wallet_refused": "Your wallet refused this bet.",
    "wallet_unavailable": "Your wallet did not confirm this bet in time; it was not placed.",
    "wallet_pending": "This bet is still waiting for your wallet.",
    "rg_limit": "This bet would pass a limit of your session.",
    "reality_check_pending": "Answer the reality check to go on betting.",
    "session_ended": "Your session has ended.",
    "not_your_table": "Your casino does not offer this table.",
}

#: The refusals that come from a seamless wallet (livetable/operator/seamless.py), not a store.
WALLET_REJECTIONS: frozenset[p.RejectionCode] = frozenset(
    {"wallet_refused", "wallet_unavailable", "wallet_pending"})

#: The refusals of an operator's session — its limits (livetable/betting/sessions.py), its
#: operator's standing at the table (the registry in force) — judged by the gateway before a
#: slip reaches a store or a wallet.
SESSION_REJECTIONS: frozenset[p.RejectionCode] = frozenset(
    {"rg_limit", "reality_check_pending", "session_ended", "not_your_table"})

#: What follows the message, filled from :attr:`Rejection.values` (the Lua scripts return
#: the same values after the code).
DETAILS: dict[str, str] = {
    "bad_spot": "({0!r})",
    "below_min": "(minimum {0})",
    "above_max": "(maximum {0} per spot)",
    "round_limit": "(at most {0})",
    "insufficient_funds": "(needs {0}, balance {1})",
    "wallet_refused": "(the operator said {0})",
    "rg_limit": "({0}: {1} left of {2})",
}


class Rejection(msgspec.Struct, frozen=True, tag="rejection"):
    """Why a slip was refused: a code, the bet that failed (if one did), detail values."""

    code: p.RejectionCode
    bet_id: str | None = None
    values: tuple[int | str, ...] = ()

    @property
    def message(self) -> str:
        detail = DETAILS.get(self.code)
        if detail is None or not self.values:
            return REJECTIONS[self.code]
        return f"{REJECTIONS[self.code]} {detail.format(*self.values)}"


class MirrorDeposit(msgspec.Struct, frozen=True, array_like=True):
    """A seamless debit's money entering the ledger (``external`` → the player), made
    once by ``transfer_id`` in the same transaction as the slip it pays for, just before
    the slip is judged (docs/operator.md, "the ledger")."""

    transfer_id: str
    amount: int
    at: int


class SlipRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A slip as the gateway hands it to a store. ``slip_id`` None: a ``place_bet``.
    ``deposit``: the seamless debit that pays for it (never part of its judgement).
    ``limits``: its session's limits, when its operator gives its currency its own (in
    that currency's minor units): they replace the round's."""

    player_id: str
    table: str
    slip_id: str | None
    round_id: str
    bets: tuple[p.SlipBet, ...]
    deposit: MirrorDeposit | None = None
    limits: p.Limits | None = None


class BetRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One ``place_bet``: a slip of one (:meth:`as_slip`)."""

    player_id: str
    table: str
    bet_id: str
    round_id: str
    spot: str
    amount: int

    def as_slip(self) -> SlipRequest:
        return SlipRequest(player_id=self.player_id, table=self.table, slip_id=None,
                           round_id=self.round_id,
                           bets=(p.SlipBet(bet_id=self.bet_id, spot=self.spot,
                                           amount=self.amount),))


SlipAnswer = p.SlipAccepted | Rejection


#: What judging a bet needs of its spot, by name: looked up per bet, where calling the
#: enum (``BetSpot(spot)``) and its properties costs a few µs each in a burst.
SPOT_MULTIPLE = {spot.value: spot.deducted_multiple for spot in BetSpot}
SPOT_IS_PAIR = {spot.value: spot.is_pair for spot in BetSpot}
_SPOTS = frozenset(SPOT_MULTIPLE)


def precheck(slip: SlipRequest) -> Rejection | None:
    """What can be refused without looking at any state, in this order."""
    if slip.slip_id is not None and (not 0 < len(slip.slip_id) <= MAX_SLIP_ID
                                     or "\x00" in slip.slip_id):
        return Rejection("bad_slip_id")
    if not 0 < len(slip.bets) <= MAX_SLIP_BETS:
        return Rejection("bad_slip")
    seen: set[str] = set()
    for bet in slip.bets:
        # a NUL: PostgreSQL's text cannot hold it (the whole batch, every player's slip in
        # it, failed), so no store takes one
        if not 0 < len(bet.bet_id) <= MAX_BET_ID or "\x00" in bet.bet_id:
            return Rejection("bad_bet_id", bet.bet_id[:MAX_BET_ID])
        if bet.spot not in _SPOTS:
            return Rejection("bad_spot", bet.bet_id, (bet.spot,))
        if not 0 < bet.amount <= MAX_AMOUNT:
            return Rejection("bad_amount", bet.bet_id)
        if bet.bet_id in seen:
            return Rejection("duplicate_bet_id", bet.bet_id)
        seen.add(bet.bet_id)
    return None


def spot_limits(limits: p.Limits, spot: str) -> tuple[int, int]:
    if SPOT_IS_PAIR[spot]:
        return limits.pair_min, limits.pair_max
    return limits.min, limits.max


# --- judging a slip against what the store holds ------------------------------------------


class TakenBet(msgspec.Struct, frozen=True):
    """A bet already taken, as far as judging a repeat needs it."""

    bet_id: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    balance_at_accept: int


class RoundFacts(msgspec.Struct, frozen=True):
    table: str
    state: str  # betting paused closed settling refunding settled cancelled
    closes_at: int | None
    limits: p.Limits


class SlipFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a store read, in the transaction that will apply the slip, to judge it."""

    #: The bets of the slip taken before under the same (player, slip_id), in slip order.
    prior_slip: list[TakenBet] | None
    #: The slip's bet ids this player already used, each with the bet it named.
    used_bet_ids: dict[str, TakenBet]
    round: RoundFacts | None
    #: The player's amounts per spot, and total deducted, already in the round.
    on_spot: dict[str, int]
    on_round: int
    is_player: bool
    balance: int


def _replay(slip: SlipRequest, taken: Sequence[TakenBet]) -> p.SlipAccepted:
    return p.SlipAccepted(
        slip_id=slip.slip_id or "", round_id=taken[0].round_id,
        bets=[p.SlipBetAccepted(bet_id=b.bet_id, spot=b.spot, amount=b.amount,
                                deducted=b.deducted) for b in taken],
        deducted=sum(b.deducted for b in taken), balance=taken[-1].balance_at_accept)


def _same(slip: SlipRequest, taken: Sequence[TakenBet]) -> bool:
    return [(b.bet_id, slip.round_id, b.spot, b.amount) for b in slip.bets] == [
        (t.bet_id, t.round_id, t.spot, t.amount) for t in taken]


def judge_slip(slip: SlipRequest, now: int, facts: SlipFacts) -> SlipAnswer | list[int]:
    """The slip's answer if it is a repeat or refused, else each bet's deduction.

    The order: a repeated ``slip_id`` (the first answer
    again, or ``duplicate_slip_id``); each bet id used before (``place_bet``'s repeat gets
    its first answer); the round (``unknown_round``, ``paused``, ``betting_closed`` — by
    ``now``, the time the slip reached the gateway, against the round's deadline: a slip
    that arrived in time is taken even if the engine closed betting before the store got
    to it, until the round starts settling; see :func:`closed_deadline`); each bet in turn
    against the limits (its session's, else the round's: :func:`within_limits`),
    counting the slip's earlier bets (``below_min``, ``above_max``, ``round_limit``); the
    account (``not_a_player``); the balance against the slip's total
    (``insufficient_funds``).
    """
    if slip.slip_id is not None and facts.prior_slip is not None:
        if _same(slip, facts.prior_slip):
            return _replay(slip, facts.prior_slip)
        return Rejection("duplicate_slip_id")
    for bet in slip.bets:
        used = facts.used_bet_ids.get(bet.bet_id)
        if used is not None:
            if slip.slip_id is None and _same(slip, [used]):
                return _replay(slip, [used])
            return Rejection("duplicate_bet_id", bet.bet_id)
    r = facts.round
    if r is None or r.table != slip.table:
        return Rejection("unknown_round")
    if r.state == "paused":
        return Rejection("paused")
    if r.state not in ("betting", "closed") or r.closes_at is None or now >= r.closes_at:
        return Rejection("betting_closed")
    deducted = within_limits(slip, slip.limits or r.limits, facts.on_spot, facts.on_round)
    if isinstance(deducted, Rejection):
        return deducted
    if not facts.is_player:
        return Rejection("not_a_player")
    total = sum(deducted)
    if facts.balance < total:
        return Rejection("insufficient_funds", None, (total, facts.balance))
    return deducted


def within_limits(slip: SlipRequest, limits: p.Limits, on_spot: dict[str, int] | None = None,
                  on_round: int = 0) -> Rejection | list[int]:
    """Each bet of ``slip`` in turn against ``limits``, counting the slip's earlier bets and
    what the player has on each spot and on the round already (``on_spot``, ``on_round``):
    the first refused (``below_min``, ``above_max``, ``round_limit``), else each bet's
    deduction. The gateway asks it with nothing on the table yet, before a seamless debit
    (no debit for a slip its own bets refuse); a store with what it holds."""
    spots = dict(on_spot or {})
    deducted: list[int] = []
    for bet in slip.bets:
        low, high = spot_limits(limits, bet.spot)
        if bet.amount < low:
            return Rejection("below_min", bet.bet_id, (low,))
        if spots.get(bet.spot, 0) + bet.amount > high:
            return Rejection("above_max", bet.bet_id, (high,))
        cost = bet.amount * SPOT_MULTIPLE[bet.spot]
        if on_round + cost > limits.round_max:
            return Rejection("round_limit", bet.bet_id, (limits.round_max,))
        spots[bet.spot] = spots.get(bet.spot, 0) + bet.amount
        on_round += cost
        deducted.append(cost)
    return deducted


def closed_deadline(closes_at: int | None, now: int) -> int | None:
    """The deadline a round keeps once betting is closed at ``now`` (the close step's
    time): a close on time or late keeps ``closes_at``; a dealer's early close moves it to
    the close. Slips that reached a gateway before it are still taken (judge_slip)."""
    return None if closes_at is None else min(closes_at, now)


def accepted(slip: SlipRequest, deducted: list[int], balance: int) -> p.SlipAccepted:
    return p.SlipAccepted(
        slip_id=slip.slip_id or "", round_id=slip.round_id,
        bets=[p.SlipBetAccepted(bet_id=b.bet_id, spot=b.spot, amount=b.amount, deducted=d)
              for b, d in zip(slip.bets, deducted, strict=True)],
        deducted=sum(deducted), balance=balance)



class SettledBet(Protocol):
    """A bet settled or refunded, as the stores and the Bet Record hold it."""

    @property
    def bet_id(self) -> str: ...
    @property
    def round_id(self) -> str: ...
    @property
    def spot(self) -> str: ...
    @property
    def amount(self) -> int: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def odds(self) -> int | None: ...
    @property
    def returned(self) -> int | None: ...
    @property
    def balance_after(self) -> int | None: ...


def settled_message(bet: SettledBet) -> p.BetSettled:
    """The ``bet_settled`` of a settled or refunded bet: a stored bet, a Bet Record line, or
    a result of a settlement chunk — the one builder of the frame."""
    return p.BetSettled(bet_id=bet.bet_id, round_id=bet.round_id, spot=bet.spot,
                        amount=bet.amount, outcome=bet.outcome or "", odds=bet.odds or 0,
                        returned=bet.returned or 0, balance=bet.balance_after or 0)
