"""Tips to the dealer paid by the operator's wallet: one debit the operator keeps.

A tip is debited as a bet slip is (operator/seamless.py: written ``pending`` to the wallet
log before it leaves, sent in its wallet's line of debits, ``ok`` only within the call's
timeout) with a body of its own (:class:`~livetable.operator.calls.TipDebit`: no bets, the
``tip_id``), keyed in the log by ``tip:<tip_id>`` so that a re-send finds it and is
answered as its first send was, never debited twice. What differs from a slip:

* no round settles it: a debit answered ``ok`` is the operator's (nothing is credited
  back); its mirror deposit and the tip go into the ledger together (``Store.place_tip``),
  so the Bet Record and the house's tip account show it as they show an internal
  wallet's, and only then is the debit closed, by ``tip``. A debit ``ok`` and still open
  is one whose ledger side may be missing (the store was out as it was written; the
  player then heard ``unavailable`` and may never send it again): a re-send of the tip, or
  else the sweeper (:meth:`WalletTips.keep`), writes it — once, by the tip's transfer id —
  and closes it; one the ledger refuses is rolled back;
* its log ``round_id`` is ``<table>.tips``, never a round of the game: the sweeper closes
  the open debits of ended rounds by their bets, and a tip has none. A debit whose outcome
  is unknown (a timeout, an error) is rolled back by the sweeper as a slip's is — the
  player is refused ``wallet_unavailable`` and the operator undoes it if it ever took it;
* the session's limits (what they leave: ``TipRequest.allowance``) are judged before the
  debit, since no store judges a tip before the operator has the money.
"""

from __future__ import annotations

import contextlib

import msgspec

from livetable.auth import Identity
from livetable.betting.slips import MirrorDeposit
from livetable.betting.tips import TipAnswer, TipRefusal, TipRequest, within_allowance
from livetable.operator.calls import ANSWER_DECODER, ENCODER, TipDebit
from livetable.operator.client import Reply
from livetable.operator.closing import rollback_of
from livetable.operator.log import TIP_KEYS, WalletCall, debit_tx_id, mirror_id
from livetable.operator.registry import operator_player_id
from livetable.operator.seamless import NOT_SENT, SeamlessWallet

#: What closes a tip's debit answered ``ok``: the operator keeps it.
KEPT = "tip"


def tip_key(tip: TipRequest) -> str:
    """The tip's key in the wallet log (apart from slips' ``slip:`` and bets' ``bet:``)."""
    return f"{TIP_KEYS}{tip.tip_id}"


def tips_round(table: str) -> str:
    """The log's ``round_id`` of a table's tips: no round of the game is spelt so."""
    return f"{table}.tips"


class WalletTips:
    """The seamless wallet's side of a tip (see the module docstring)."""

    def __init__(self, wallet: SeamlessWallet) -> None:
        self.wallet = wallet
        wallet.keep_tips = self.keep  # the sweeper's: tips whose ledger side may be missing

    def currency_of(self, identity: Identity) -> str:
        return self.wallet.currency_of(identity)

    async def place_tip(self, identity: Identity, tip: TipRequest) -> TipAnswer:
        wallet = self.wallet
        prior = await wallet.log.debit_of(tip.player_id, tip.table, tip_key(tip))
        if prior is None:
            refused = within_allowance(tip)
            if refused is not None:
                return refused
            call = self._debit(identity, tip, wallet.clock())
            sent = await wallet.send_debit(call)
            if not isinstance(sent, WalletCall):
                return await self._answered(call, sent, tip)
            prior = sent  # sent before (a re-send), or never sent now
        return await self._again(prior, tip)

    def _debit(self, identity: Identity, tip: TipRequest, now: int) -> WalletCall:
        wallet = self.wallet
        currency = wallet.currency_of(identity)
        tx_id = debit_tx_id()
        round_id = tips_round(tip.table)
        body = ENCODER.encode(TipDebit(
            tx_id=tx_id, player_id=operator_player_id(tip.player_id), currency=currency,
            amount=tip.amount, table_id=tip.table, round_id=round_id, tip_id=tip.tip_id))
        return WalletCall(
            tx_id=tx_id, method="debit", player_id=tip.player_id, currency=currency,
            table_id=tip.table, round_id=round_id, amount=tip.amount, body=body,
            state="pending", created_at=now, updated_at=now, slip_key=tip_key(tip),
            deadline=now + int(wallet.settings.wallet_timeout * 1000))

    async def _answered(self, call: WalletCall, reply: Reply, tip: TipRequest) -> TipAnswer:
        wallet = self.wallet
        now = wallet.clock()
        wallet.metrics.inc(f"livetable_wallet_debits_{reply.status or 'unknown'}_total")
        if reply.ok and now <= call.deadline:
            if not await wallet.log.answer_debit(call, "ok", reply.text, now):
                return TipRefusal("wallet_unavailable")  # the sweeper gave up on it first
            call.state = "ok"
            return await self._kept(call, tip, reply.balance)
        if reply.status is not None and not reply.ok:
            await wallet.log.answer_debit(call, "refused", reply.text, now, closed_by="refused")
            return _refusal(reply.status, call.amount, reply.balance)
        why = reply.text if not reply.ok else f"ok after its timeout: {reply.text}"
        if await wallet.log.answer_debit(call, "unknown", why, now):
            wallet.ask_sweep()  # the sweeper rolls back every unknown debit
        return TipRefusal("wallet_unavailable")

    async def _kept(self, call: WalletCall, tip: TipRequest,
                    balance: int | None) -> TipAnswer:
        """The debit is the operator's: the ledger takes the tip with its mirror deposit
        (idempotently: a re-send of the tip comes here again), the balance the operator's."""
        wallet = self.wallet
        paid = msgspec.structs.replace(tip, allowance=None, deposit=MirrorDeposit(
            mirror_id(call.tx_id), call.amount, call.updated_at))
        answer = await wallet.store.place_tip(paid, wallet.clock())
        now = wallet.clock()
        if isinstance(answer, TipRefusal):  # the ledger cannot hold it: the money goes back
            if call.closed_by is None:
                await wallet.close_debits([rollback_of(call, now)], now)
            return answer
        if call.closed_by is None:
            await wallet.log.keep_debit(call, KEPT, now)
        if balance is not None:
            answer = msgspec.structs.replace(answer, balance=balance)
        return answer

    async def _again(self, prior: WalletCall, tip: TipRequest) -> TipAnswer:
        """A tip sent again (the same ``tip_id``): the answer its debit earned."""
        answer = None
        with contextlib.suppress(msgspec.DecodeError):
            answer = ANSWER_DECODER.decode(prior.answer or "")
        if prior.amount != tip.amount:
            return TipRefusal("duplicate_tip_id")
        if prior.state == "ok" and prior.closed_by in (KEPT, None):
            return await self._kept(prior, tip, None if answer is None else answer.balance)
        if prior.state == "pending":
            return TipRefusal("wallet_pending")
        if prior.state == "refused" and prior.answer != NOT_SENT and answer is not None:
            return _refusal(answer.status, prior.amount, None)
        return TipRefusal("wallet_unavailable")


    async def keep(self, debits: list[WalletCall]) -> None:
        """The sweeper's: tips' debits answered ``ok`` and still open — their ledger side
        written (again: once by the tip's transfer id) and each closed, or rolled back if
        the ledger refuses it. The tip's round is not in the log: the Bet Record shows it
        without one."""
        for debit in debits:
            tip_id = (debit.slip_key or "").removeprefix(TIP_KEYS)
            tip = TipRequest(player_id=debit.player_id, table=debit.table_id, tip_id=tip_id,
                             amount=debit.amount)
            await self._kept(debit, tip, None)


def _refusal(status: str, amount: int, balance: int | None) -> TipRefusal:
    """The operator's refusal code, as a tip's."""
    if status == "insufficient_funds":
        return TipRefusal("insufficient_funds", () if balance is None else (amount, balance))
    return TipRefusal("wallet_refused", (status,))
