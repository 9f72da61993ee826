"""Tips to the dealer: the money rules of a tip, pure — the one home, used by both stores,
the seamless wallet and the gateway.

A tip is money a player gives the table's dealer: ``amount`` leaves the player's balance
for the house's tip account (``accounts.HOUSE_TIPS``) in one ledger transfer, or, with a
seamless wallet, is one debit the operator keeps. It is not a bet: it belongs to no
round's escrow, is never settled and comes back in no case. So it is judged apart from
slips, in this order (the first that fails answers):

1. the gateway, alone (:func:`precheck_tip`): tips are on for the player (their operator's
   registry entry: :class:`TipPolicy`), ``tip_id`` is 1–64 characters, the amount lies in
   the tip's limits (:func:`tip_limits`: the operator's ``tip`` range for the currency, else
   the player's bet limits, the smallest Player bet to the largest);
2. the session, if the operator gave it limits (:func:`session_allowance`): an ended
   session or a reality check waiting refuses, and what its limits leave is handed on
   (:class:`Allowance`). A tip counts as staked and lost at once: it goes into the
   session's figures like a slip's deduction, in the round in play at the table;
3. the store or the wallet, in its transaction (:func:`judge_tip`): a ``tip_id`` used
   before answers as it first did (the same amount) or ``duplicate_tip_id``, before any
   other check — so a client that lost the answer re-sends and hears it again, never
   pays twice; then the allowance (``rg_limit``), then the balance (``insufficient_funds``).

Refusals are ``error`` frames naming the tip (``tip_id``) with a code of their own
(:data:`TIP_REFUSALS`), not ``bet_rejected``: a tip has no bet id, and an old client that
does not know tips never sends one.
"""

from __future__ import annotations

import msgspec

from livetable import protocol as p
from livetable.betting.sessions import SessionRecord, judge_limits
from livetable.betting.slips import MAX_AMOUNT, MirrorDeposit, Rejection

MAX_TIP_ID = 64

#: The codes that refuse a tip, and their English messages (the browser translates by code).
TIP_REFUSALS: dict[p.ErrorCode, str] = {
    "not_a_player": "Sign in as a player to tip the dealer.",
    "rate_limited": "Too many tips, slow down.",
    "tips_off": "Tips to the dealer are turned off for your casino.",
    "bad_tip_id": "tip_id must be 1 to 64 characters.",
    "tip_out_of_range": "The tip is outside the tip limits.",
    "duplicate_tip_id": "This tip_id was already used for a different tip.",
    "insufficient_funds": "Your balance does not cover this tip.",
    "rg_limit": "This tip would pass a limit of your session.",
    "reality_check_pending": "Answer the reality check to go on.",
    "session_ended": "Your session has ended.",
    "not_your_table": "Your casino does not offer this table.",
    "wallet_refused": "Your wallet refused this tip.",
    "wallet_unavailable": "Your wallet did not confirm this tip; nothing was taken.",
    "wallet_pending": "This tip is still waiting for your wallet.",
    "unavailable": "The tip could not be recorded now: send it again with the same tip_id.",
}

#: What follows a message, filled from :attr:`TipRefusal.values`.
TIP_DETAILS: dict[str, str] = {
    "tip_out_of_range": "(from {0} to {1})",
    "insufficient_funds": "(needs {0}, balance {1})",
    "rg_limit": "({0}: {1} left of {2})",
    "wallet_refused": "(the operator said {0})",
}


class TipRefusal(msgspec.Struct, frozen=True, tag="tip_refusal"):
    """Why a tip was not taken: a code of :data:`TIP_REFUSALS`, with detail values."""

    code: p.ErrorCode
    values: tuple[int | str, ...] = ()

    @property
    def message(self) -> str:
        detail = TIP_DETAILS.get(self.code)
        text = TIP_REFUSALS[self.code]
        return text if detail is None or not self.values else (
            f"{text} {detail.format(*self.values)}")

    def error(self, tip_id: str) -> p.Error:
        return p.Error(code=self.code, message=self.message, tip_id=tip_id[:MAX_TIP_ID])

    @classmethod
    def of(cls, rejection: Rejection) -> TipRefusal:
        """A session's (or its operator's standing's) refusal of a slip, as a tip's."""
        return cls(_SESSION_CODES[rejection.code], rejection.values)


#: The refusals a session gives a slip and a tip alike (betting/sessions.py).
_SESSION_CODES: dict[p.RejectionCode, p.ErrorCode] = {
    "rg_limit": "rg_limit", "reality_check_pending": "reality_check_pending",
    "session_ended": "session_ended", "not_your_table": "not_your_table"}


class TipTaken(msgspec.Struct, frozen=True, tag="tip_taken"):
    """A tip the ledger holds: ``balance`` the player's right after it; ``fresh`` False
    when it was taken before (a re-send: counted once, announced once)."""

    tip_id: str
    amount: int
    balance: int
    fresh: bool

    def accepted(self, currency: str | None) -> p.TipAccepted:
        return p.TipAccepted(tip_id=self.tip_id, amount=self.amount, balance=self.balance,
                             currency=currency)


TipAnswer = TipTaken | TipRefusal


class Allowance(msgspec.Struct, frozen=True, array_like=True):
    """What the session's tightest limit leaves to stake now: ``left`` of ``of``."""

    limit: str  # max_stake_per_round or loss_limit
    left: int
    of: int


class TipRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A tip as the gateway hands it to a store or the seamless wallet. ``round_id``: the
    round in play at the table, if any (the Bet Record and the session's round stake);
    ``allowance``: what the session's limits leave (None: no limit); ``deposit``: the
    seamless debit that pays for it (docs/operator.md, "the ledger")."""

    player_id: str
    table: str
    tip_id: str
    amount: int
    round_id: str | None = None
    allowance: Allowance | None = None
    deposit: MirrorDeposit | None = None

    @property
    def transfer_id(self) -> str:
        """The ledger transfer of the tip (player → the house's tip account), once."""
        return f"tip:{self.player_id}:{self.tip_id}"


class TipPolicy(msgspec.Struct, frozen=True):
    """An operator's word on tips (its registry entry): ``on``, and its ``range`` in the
    session's currency (None: the player's bet limits)."""

    on: bool = True
    range: tuple[int, int] | None = None


TIPS_ON = TipPolicy()


def tip_limits(policy: TipPolicy, limits: p.Limits) -> p.TipLimits | None:
    """The smallest and largest tip for a player held to ``limits``; None: tips are off."""
    if not policy.on:
        return None
    low, high = policy.range or (limits.min, limits.max)
    return p.TipLimits(min=low, max=high)


def precheck_tip(tip_id: str, amount: int, limits: p.TipLimits | None) -> TipRefusal | None:
    """What the gateway refuses alone, in order: tips off, the tip's id, its amount."""
    if limits is None:
        return TipRefusal("tips_off")
    if not 1 <= len(tip_id) <= MAX_TIP_ID or "\x00" in tip_id:  # PostgreSQL's text: no NUL
        return TipRefusal("bad_tip_id")
    if not limits.min <= amount <= min(limits.max, MAX_AMOUNT):
        return TipRefusal("tip_out_of_range", (limits.min, limits.max))
    return None


def session_allowance(session: SessionRecord, round_id: str | None,
                      now: int) -> TipRefusal | Allowance | None:
    """Whether ``session`` lets its player tip now: a refusal (ended, a reality check
    waiting, a limit used up), or what its tightest limit leaves (None: no limit)."""
    refused = judge_limits(session, round_id or "", 0, now)
    if refused is not None:
        return TipRefusal.of(refused)
    limits = session.limits
    left: list[Allowance] = []
    if limits.max_stake_per_round is not None and round_id is not None:
        cap = limits.max_stake_per_round
        left.append(Allowance("max_stake_per_round", cap - session.staked_in(round_id), cap))
    if limits.loss_limit is not None:
        left.append(Allowance("loss_limit", limits.loss_limit + session.net,
                              limits.loss_limit))
    return min(left, key=lambda a: a.left) if left else None


def within_allowance(tip: TipRequest) -> TipRefusal | None:
    """``rg_limit`` if the tip would take more than its session's limits leave."""
    allowance = tip.allowance
    if allowance is not None and tip.amount > allowance.left:
        return TipRefusal("rg_limit", (allowance.limit, max(0, allowance.left), allowance.of))
    return None


def judge_tip(tip: TipRequest, prior: tuple[int, int] | None,
              balance: int | None) -> TipAnswer:
    """A store's verdict on ``tip``, given the ``(amount, balance after)`` of a tip of the
    player's with the same id (None: none) and the player's balance now (after the tip's
    mirror deposit, if any; None: no such player)."""
    if prior is not None:
        amount, balance_after = prior
        if amount != tip.amount:
            return TipRefusal("duplicate_tip_id")
        return TipTaken(tip.tip_id, amount, balance_after, fresh=False)
    refused = within_allowance(tip)
    if refused is not None:
        return refused
    if balance is None or balance < tip.amount:
        return TipRefusal("insufficient_funds", (tip.amount, balance or 0))
    return TipTaken(tip.tip_id, tip.amount, balance - tip.amount, fresh=True)
