"""Closing seamless debits: the credits and rollbacks that end them, planned without I/O.

Each closing is the ledger's withdrawal that takes the money out (the player's return,
the refund, or the unused mirror deposit: docs/operator.md, "How the ledger shows
seamless bets") and the call queued after it in the wallet log's outbox, which closes the
debits it names. The wallet (operator/seamless.py) makes them in batches — a round's
close is one read of its settlements, then one :meth:`~livetable.store.base.Store.
withdraw_many` and one :meth:`~livetable.operator.log.WalletLog.enqueue` per
:data:`~livetable.operator.seamless.CLOSE_CHUNK` players, not three calls per player
(5,000 players were ~15,000 calls in a row).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from livetable import protocol as p
from livetable.operator.calls import DEBIT_DECODER, ENCODER, Credit, CreditBet, Rollback
from livetable.operator.log import WalletCall, credit_tx_id, mirror_id, rollback_tx_id
from livetable.operator.registry import operator_player_id
from livetable.store.bets import Withdrawal

#: How long after a debit's deadline the sweeper waits before it takes the debit over
#: from a gateway that may still be finishing it (ms).
TAKEOVER_MS = 15_000

#: A round's settled bets by player and bet id (bet ids are a player's own).
Settlements = Mapping[tuple[str, str], p.BetSettled]


class Closing(NamedTuple):
    """What closes one or more debits: first the withdrawal, then the call queued."""

    withdrawal: Withdrawal
    call: WalletCall


def rollback_of(debit: WalletCall, now: int) -> Closing:
    """The rollback of ``debit``; its withdrawal takes the mirror deposit back out only
    if it was made."""
    tx_id = rollback_tx_id(debit.tx_id)
    body = ENCODER.encode(Rollback(
        tx_id=tx_id, player_id=operator_player_id(debit.player_id), currency=debit.currency,
        amount=debit.amount, table_id=debit.table_id, round_id=debit.round_id,
        debit_tx_id=debit.tx_id))
    return Closing(
        Withdrawal(mirror_id(tx_id), debit.player_id, debit.amount, mirror_id(debit.tx_id)),
        WalletCall(tx_id=tx_id, method="rollback", player_id=debit.player_id,
                   currency=debit.currency, table_id=debit.table_id, round_id=debit.round_id,
                   amount=debit.amount, body=body, state="queued", created_at=now,
                   updated_at=now, next_at=now, debits=debit.tx_id))


def credit_of(installation: str, round_id: str, player_id: str, debits: list[WalletCall],
              settled: Settlements, now: int) -> Closing:
    """The player's credit for the round in the currency of ``debits`` (all in one),
    paying their settled bets."""
    first = debits[0]
    assert all(d.currency == first.currency for d in debits), "one currency a credit"
    tx_id = credit_tx_id(installation, round_id, player_id, first.currency)
    bets = [CreditBet(bet_id=b.bet_id, outcome=settled[player_id, b.bet_id].outcome,
                      returned=settled[player_id, b.bet_id].returned)
            for d in debits for b in DEBIT_DECODER.decode(d.body).bets]
    amount = sum(b.returned for b in bets)
    body = ENCODER.encode(Credit(
        tx_id=tx_id, player_id=operator_player_id(player_id), currency=first.currency,
        amount=amount, table_id=first.table_id, round_id=round_id,
        debit_tx_ids=[d.tx_id for d in debits], bets=bets))
    return Closing(
        Withdrawal(mirror_id(tx_id), player_id, amount),
        WalletCall(tx_id=tx_id, method="credit", player_id=player_id, currency=first.currency,
                   table_id=first.table_id, round_id=round_id, amount=amount, body=body,
                   state="queued", created_at=now, updated_at=now, next_at=now,
                   debits=",".join(d.tx_id for d in debits)))


class RoundClose(NamedTuple):
    """An ended round's open debits, sorted: what closes now, and the pending debits
    past their takeover, which the sweeper must first win from their gateway (``pending``
    → ``unknown``) before it rolls them back."""

    closings: list[Closing]
    takeovers: list[WalletCall]


def close_round(installation: str, round_id: str, settled_round: bool,
                debits: list[WalletCall], settled: Settlements, now: int) -> RoundClose:
    """Plan the close of an ended round's open debits (``settled_round``: settled, else
    cancelled): one credit per player and currency for the bets the ledger settled, a
    rollback for the rest — a cancelled round's (refunded), and a debit whose bets were
    never placed (a crash between the debit and the bet), once past its takeover."""
    closings: list[Closing] = []
    takeovers: list[WalletCall] = []
    credited: dict[tuple[str, str], list[WalletCall]] = defaultdict(list)
    for debit in debits:
        placed = all((debit.player_id, b.bet_id) in settled
                     for b in DEBIT_DECODER.decode(debit.body).bets)
        if placed and settled_round:
            credited[debit.player_id, debit.currency].append(debit)
        elif placed:
            closings.append(rollback_of(debit, now))  # the round cancelled: refunded
        elif debit.deadline + TAKEOVER_MS >= now:
            continue  # never placed: its gateway may still be finishing it
        elif debit.state == "pending":
            takeovers.append(debit)
        else:
            closings.append(rollback_of(debit, now))
    for (player_id, _), theirs in credited.items():
        closings.append(credit_of(installation, round_id, player_id, theirs, settled, now))
    return RoundClose(closings, takeovers)
