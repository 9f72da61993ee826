"""The protocol's closed vocabularies and the bounds of what a client may send.

A code is a promise to every client (docs/protocol.md §14 lists exactly these): a
``Literal`` here is the one list, so a code the server could send and a client has not
heard of is a type error, not a surprise. The bounds live in the schema (msgspec checks
them while decoding), so a value out of range is a ``bad_frame`` with msgspec's own message
and needs no code of ours.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

#: Ids and names a client sends (tables, rounds, bet ids are checked again by the store).
ShortText = Annotated[str, Meta(max_length=128)]
#: Counters kept exactly everywhere (SQLite's integers, Lua's doubles): 0 … 2^53 - 1.
Counter = Annotated[int, Meta(ge=0, le=2**53 - 1)]
#: Any other whole number a client sends. What it means is checked where it is used, with
#: the answer that names it (a bet's ``bad_amount``, the engine's ``bad_command``, a
#: ``get_bets`` limit clamped to 1…200), but no number a client sends is larger than every
#: store and every encoder on its way keep exactly: a ``get_bets`` limit of 2^70 once
#: overflowed the ledger's msgpack frame (docs/security.md).
Integer = Annotated[int, Meta(ge=-(2**53 - 1), le=2**53 - 1)]
#: A Bet Record page cursor: the ``next`` of the page before (a bet's sequence number).
Cursor = Annotated[str, Meta(pattern=r"^[0-9]{1,15}$")]

PROTOCOL_VERSION = 1

Phase = Literal["idle", "betting", "dealing", "revealing", "settled", "paused", "cancelled"]
BetState = Literal["accepted", "settled", "refunded"]

#: ``error.code`` on ``/ws`` and ``/ws/dealer``: the connection's codes, then the dealer
#: commands' (docs/protocol.md §14 lists exactly these; tests/unit/test_protocol_codes.py).
ErrorCode = Literal[
    "hello_required", "bad_version", "unknown_table", "bad_token", "not_a_dealer",
    "not_your_table", "hello_timeout", "already_hello", "bad_frame", "frame_too_large",
    "rate_limited", "token_expired", "not_a_player", "unavailable",
    # dealer commands
    "illegal_command", "bad_command", "no_shoe", "no_round", "all_dealt", "wrong_mode",
    "bad_card", "approval_required", "bad_approval", "not_a_supervisor", "impossible_card",
    "table_halted", "table_unavailable",
    # a tip to the dealer (docs/protocol.md §3, tip): each names what refused it
    "tips_off", "bad_tip_id", "tip_out_of_range", "duplicate_tip_id", "insufficient_funds",
    "rg_limit", "reality_check_pending", "session_ended", "wallet_refused",
    "wallet_unavailable", "wallet_pending",
]
#: ``bet_rejected.code`` and ``slip_rejected.code`` (their messages:
#: :data:`livetable.betting.slips.REJECTIONS`; docs/protocol.md §6 and §14).
RejectionCode = Literal[
    "not_a_player", "rate_limited", "bad_bet_id", "bad_spot", "bad_amount",
    "duplicate_bet_id", "unknown_round", "paused", "betting_closed", "below_min",
    "above_max", "round_limit", "insufficient_funds", "wallet_refused", "wallet_unavailable",
    "wallet_pending",
    # an operator's session (responsible gaming: docs/protocol.md §6)
    "rg_limit", "reality_check_pending", "session_ended",
    # a table its operator does not offer (any more: the registry is reloaded on SIGHUP)
    "not_your_table",
    # slips only
    "bad_slip_id", "bad_slip", "duplicate_slip_id",
]
