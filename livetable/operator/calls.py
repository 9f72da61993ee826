"""The operator's wallet calls on the wire: the bodies livetable sends and the answer it reads.

One place for the contract's shapes (docs/operator.md), so that the client, the seamless
wallet and its outbox cannot disagree about a field. Field order is
the contract's: every debit, credit and rollback body starts with :class:`Movement`.
"""

from __future__ import annotations

import msgspec

#: The codes an operator may answer (docs/design.md §5); anything else is an unknown outcome.
STATUSES = frozenset({"ok", "insufficient_funds", "unknown_player", "player_blocked",
                      "invalid_signature", "limit_exceeded", "rolled_back"})


class Movement(msgspec.Struct, kw_only=True):
    """What every debit, credit and rollback body starts with (docs/design.md §5), in this order."""

    tx_id: str
    player_id: str
    currency: str
    amount: int
    table_id: str
    round_id: str


class DebitBet(msgspec.Struct, kw_only=True):
    bet_id: str
    spot: str
    amount: int
    deducted: int


class Debit(Movement, kw_only=True):
    bets: list[DebitBet]


class TipDebit(Movement, kw_only=True):
    """A tip to the dealer, debited like a bet slip (docs/operator.md): no bets, the
    player's ``tip_id``, and ``round_id`` the table's tips (``<table>.tips``), never a round
    of the game. The operator keeps the money: no credit follows, only a rollback of one
    whose outcome livetable never learnt."""

    bets: list[DebitBet] = []  # a debit's field, empty: an operator reads it as a debit
    tip_id: str


class CreditBet(msgspec.Struct, kw_only=True):
    bet_id: str
    outcome: str
    returned: int


class Credit(Movement, kw_only=True):
    debit_tx_ids: list[str]
    bets: list[CreditBet]


class Rollback(Movement, kw_only=True):
    debit_tx_id: str


class BalanceQuery(msgspec.Struct, kw_only=True):
    player_id: str
    currency: str


class WalletAnswer(msgspec.Struct, kw_only=True):
    status: str
    balance: int | None = None


ANSWER_DECODER = msgspec.json.Decoder(WalletAnswer)
DEBIT_DECODER = msgspec.json.Decoder(Debit)
ENCODER = msgspec.json.Encoder()
