"""An operator's session: its limits, its figures, and the responsible-gaming rules on them.

A launch opens a session (its id rides in the player's token, ``sid``); the store keeps it
(its row or key), so that every gateway sees the same one and it outlives a restart, a
reconnect and a change of gateway. The operator may end it (self-exclusion, an account
closed) and the gateways then refuse its token; its own ``session_minutes`` end it too.

The rules here are pure — given the session and a slip, this is the answer — and the
gateway's intake applies them before a slip reaches the store or the operator's wallet, so
that both wallets are held to them:

- a slip that would take the player's stake in one round past ``max_stake_per_round``, or
  could take the session's net loss past ``loss_limit`` (the slip counted as lost), is
  refused ``rg_limit``, the message saying which limit and what is left;
- every ``reality_check_minutes`` since the last one answered, the player is shown the
  session's figures and their slips are refused ``reality_check_pending`` until they
  answer;
- at ``session_minutes`` the session ends (``time_limit``).

Amounts are in the session's currency's minor units, as every amount of the wallet is.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from livetable import protocol as p
from livetable.betting.slips import SPOT_MULTIPLE, Rejection

#: A limit in a launch: a positive whole number (minor units, or minutes).
PositiveLimit = Annotated[int, msgspec.Meta(ge=1, le=10**12)]
#: Minutes at most for a time limit: a week.
Minutes = Annotated[int, msgspec.Meta(ge=1, le=7 * 24 * 60)]

MINUTE_MS = 60_000


class SessionLimits(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True,
                    forbid_unknown_fields=True):
    """``limits`` of a launch: every one optional."""

    max_stake_per_round: PositiveLimit | None = None
    loss_limit: PositiveLimit | None = None
    session_minutes: Minutes | None = None
    reality_check_minutes: Minutes | None = None


NO_LIMITS = SessionLimits()


class SessionRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One session as the store keeps it."""

    session_id: str
    operator: str
    player_id: str  # the ledger's (namespaced) id
    started_at: int  # epoch ms
    expires_at: int  # the token's expiry, epoch ms: the record is not needed after it
    limits: SessionLimits = SessionLimits()
    #: What the player's accepted slips of this session took, and what their settled bets
    #: gave back (stakes and returns as the wallet moves them: a bet's deduction, its
    #: return).
    staked: int = 0
    returned: int = 0
    #: The round the player last staked in, and what they staked in it.
    round_id: str | None = None
    round_staked: int = 0
    #: When the last reality check was answered (the session's start before the first).
    checked_at: int = 0
    ended_at: int | None = None
    reason: str | None = None

    @property
    def net(self) -> int:
        """What the player won (positive) or lost (negative) in this session so far."""
        return self.returned - self.staked

    @property
    def ends_at(self) -> int | None:
        """When ``session_minutes`` ends it (epoch ms), if it has that limit."""
        minutes = self.limits.session_minutes
        return None if minutes is None else self.started_at + minutes * MINUTE_MS

    @property
    def has_limits(self) -> bool:
        """Whether anything about the session is to be watched and counted."""
        return self.limits != NO_LIMITS

    def staked_in(self, round_id: str) -> int:
        return self.round_staked if self.round_id == round_id else 0

    def reality_check_at(self) -> int | None:
        """When the next reality check is due (epoch ms), if the session has them."""
        minutes = self.limits.reality_check_minutes
        return None if minutes is None else (self.checked_at or self.started_at) + (
            minutes * MINUTE_MS)


#: The reason a session ends when its own ``session_minutes`` are up.
TIME_LIMIT = "time_limit"


def reality_check(session: SessionRecord, now: int) -> p.RealityCheck:
    """The frame that shows the player the session's figures so far."""
    return p.RealityCheck(minutes=max(0, now - session.started_at) // MINUTE_MS,
                          staked=session.staked, returned=session.returned,
                          net=session.net)


def slip_deducted(bets: tuple[p.SlipBet, ...]) -> int:
    """What a slip takes from the player's balance (a Player bet deducts its withholding
    too)."""
    return sum(SPOT_MULTIPLE.get(bet.spot, 1) * bet.amount for bet in bets)


def judge_limits(session: SessionRecord, round_id: str, slip_deducted: int,
                 now: int) -> Rejection | None:
    """Why a slip deducting ``slip_deducted`` in round ``round_id`` may not be taken in
    ``session``, or None.

    A slip counts as lost in full for the loss limit: what it could lose is what it
    deducts, so a slip taken never lets the session's loss pass the limit."""
    if session.ended_at is not None or (session.ends_at is not None
                                        and now >= session.ends_at):
        return Rejection("session_ended")
    due = session.reality_check_at()
    if due is not None and now >= due:
        return Rejection("reality_check_pending")
    limits = session.limits
    if limits.max_stake_per_round is not None:
        left = limits.max_stake_per_round - session.staked_in(round_id)
        if slip_deducted > left:
            return Rejection("rg_limit", values=("max_stake_per_round", max(0, left),
                                                 limits.max_stake_per_round))
    if limits.loss_limit is not None:
        left = limits.loss_limit + session.net
        if slip_deducted > left:
            return Rejection("rg_limit", values=("loss_limit", max(0, left),
                                                 limits.loss_limit))
    return None
