"""The seamless wallet: livetable's side of the operator's wallet (docs/design.md §5).

Theory of operation. The operator holds every balance; livetable asks it for money per bet
slip (``debit``) and pays back per settled round (``credit``) or undoes (``rollback``).
The danger is a call whose answer is lost: the operator may or may not have moved the
money. Three rules keep every unit accounted for:

1. **Write before you send.** A debit is in the wallet log (:mod:`livetable.operator.log`)
   as ``pending`` before it leaves; credits and rollbacks are queued there (the outbox)
   before the first attempt. A kill -9 at any point leaves a record to finish from.
2. **A slip is accepted only on ``ok`` within the betting window.** Anything else that is
   not a refusal code — a timeout, a non-200, a body that does not parse — is an unknown
   outcome: the slip is refused to the player once the log says ``unknown``, and the
   sweeper rolls the debit back (the operator applies a rollback of a debit it never saw
   as a no-op, and refuses that debit after). A debit that finds no place in its wallet's
   line in time for its deadline (operator/gate.py) is never sent: logged ``refused``
   (:data:`NOT_SENT`), nothing to roll back.
3. **Every closing call has one id, whoever writes it.** A round's credit for a player in
   a currency is ``credit_tx_id(installation, round, player, currency)`` (one per currency
   of the player's debits in the round), a debit's rollback ``rollback_tx_id(debit)``. The
   gateway that saw a debit fail, the sweeper that finds a round ended, a restarted
   process, another engine after a failover: they all write the same calls and the same
   ledger transfers, so doing it twice is doing it once.

The ledger (docs/operator.md, "How the ledger shows seamless bets"): a debit answered
``ok`` is mirrored as a deposit ``external → player`` (id ``wallet:<debit tx_id>``), then
the slip's bets are placed exactly as internal bets are (``player → hold``) and settled
with the round (``hold → house``, ``house → player``). The round's credit takes the
player's return back out (``player → external``, ``wallet:<credit tx_id>``), and a
rollback takes the refund or the unused deposit out (``wallet:<rollback tx_id>``, only if
the deposit it undoes was made). So a seamless player's ledger balance is 0 whenever none
of its bets is in play, ``external`` is the operator's side of every move, and the audit
proves the same invariants as with an internal wallet. (Tips: operator/tipping.py.)

What runs where. :meth:`SeamlessWallet.place_slip` runs in the gateway, per slip, and
waits for the debit (bounded by the betting window). The sweeper and the outbox
(:meth:`SeamlessWallet.run`) run in every process that runs tables: they never block a
round — a round settles in the ledger whatever the wallet does, and its credits follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import msgspec

from livetable import protocol as p
from livetable.auth import Identity
from livetable.betting.slips import MirrorDeposit, Rejection, SlipRequest
from livetable.clock import now_ms
from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.operator.calls import ANSWER_DECODER, ENCODER, BalanceQuery, Debit, DebitBet
from livetable.operator.client import Reply, WalletClient
from livetable.operator.closing import TAKEOVER_MS, Closing, close_round, rollback_of
from livetable.operator.gate import DebitGate
from livetable.operator.health import WalletHealth
from livetable.operator.log import TIP_KEYS, WalletCall, WalletLog, debit_tx_id, mirror_id
from livetable.operator.outbox import Outbox
from livetable.operator.registry import operator_player_id
from livetable.operator.turns import Turns
from livetable.operator.wallets import OperatorWallet, OperatorWallets
from livetable.rules import BetSpot
from livetable.store.base import InsufficientBalance, Store
from livetable.tasks import cancel, check_cancelled, wait_set

log = logging.getLogger("livetable.wallet")

#: The answer a debit never sent is logged with (state ``refused``: nothing moved).
NOT_SENT = "not sent: no place in the wallet's line in time for its deadline"
#: Rounds with open debits a sweep looks at, oldest first.
OPEN_ROUNDS = 1000
#: Closings taken out of the ledger and queued at a time (the outbox starts on each).
CLOSE_CHUNK = 500
#: The currency of a player whose session named none (a ``livetable token``, no launch).
DEFAULT_CURRENCY = "XXX"


class SeamlessWallet:
    def __init__(self, settings: Settings, store: Store, wallet_log: WalletLog,
                 client: WalletClient | OperatorWallets, metrics: Metrics, *,
                 outbox_client: WalletClient | None = None,
                 clock: Callable[[], int] = now_ms) -> None:
        """``client``: every operator's wallet (operator/wallets.py), or one wallet for
        every player (with ``outbox_client`` for credits and rollbacks, if not the same)."""
        self.settings = settings
        self.store = store
        self.log = wallet_log
        self.wallets = (client if isinstance(client, OperatorWallets)
                        else OperatorWallets.one(client, outbox_client or client))
        self.metrics = metrics
        self.clock = clock
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        #: whether the operator's wallet answers (operator/health.py)
        self._health = WalletHealth(clock)
        #: credits and rollbacks on their way (operator/outbox.py), lines' places borrowed
        self.outbox = Outbox(settings, wallet_log, self.wallets, metrics, clock,
                             self._health.heard, self._wake.set, self._line)
        self._sweep_asked = False
        self._installation: str | None = None
        self._turns = Turns()  # a slip's sends one at a time
        #: each operator's wallet's line of debits (operator/gate.py)
        self._gates: dict[str, DebitGate] = {}
        #: tips' open ``ok`` debits to the ledger and closed (operator/tipping.py)
        self.keep_tips: Callable[[list[WalletCall]], Awaitable[None]] | None = None

    def health(self) -> str | None:
        """None while the operator's wallet answers; else why it looks down (for
        readiness: operator/health.py)."""
        return self._health.trouble()

    async def installation(self) -> str:
        """This installation's id: the store's identity (kept with the ledger: a restart
        keeps it, a new or wiped store gets another); part of every credit's ``tx_id``."""
        if self._installation is None:
            self._installation = await self.store.identity(create=True)
            assert self._installation is not None  # create=True writes one if missing
        return self._installation

    # --- the gateway's side: balances and debits ---------------------------------------

    @staticmethod
    def currency_of(identity: Identity) -> str:
        return identity.currency or DEFAULT_CURRENCY

    async def balance(self, identity: Identity) -> int | None:
        """The operator's balance for the player, or None if it did not say in time."""
        body = ENCODER.encode(BalanceQuery(player_id=operator_player_id(identity.id),
                                            currency=self.currency_of(identity)))
        reply = self._health.heard(await self.wallets.of(identity.id).debits.call(
            "balance", body, min(self.settings.wallet_timeout, 2.0)))
        self.metrics.inc(f"livetable_wallet_balance_{'ok' if reply.ok else 'failed'}_total")
        return reply.balance if reply.ok else None

    @staticmethod
    def slip_key(slip: SlipRequest) -> str:
        """The debit's idempotency key: the slip's id, or a ``place_bet``'s bet id (apart,
        so that a slip id can never be read as a bet id)."""
        return f"slip:{slip.slip_id}" if slip.slip_id is not None else f"bet:{slip.bets[0].bet_id}"

    async def place_slip(self, identity: Identity, slip: SlipRequest, arrived_at: int,
                         window_end: int) -> p.SlipAccepted | Rejection:
        """One bet slip paid by one debit (see the module docstring): the debit first,
        then, on ``ok``, the store takes the slip's bets — all of them or none,
        idempotently (:meth:`Store.place_slip`). The answer's balance is the operator's.

        ``window_end`` is when the betting window closes for a slip that arrived at
        ``arrived_at`` (``closes_at`` plus the close grace): the debit must answer ``ok``
        by then, or the slip is refused and the debit rolled back.
        """
        # One send of a slip at a time in this process: a re-send waits for the first to
        # finish and hears its answer, never finds its debit half done. A player's other
        # slips go on meanwhile (ten bets in the last two seconds are ten debits in
        # flight, not ten in a row): each slip brings its own mirror deposit into the
        # ledger just before its bets are judged, and takes no more than it, so no slip
        # can spend another's money.
        key = (slip.player_id, self.slip_key(slip))
        await self._turns.take(key)
        try:
            return await self._place_slip(identity, slip, arrived_at, window_end)
        finally:
            self._turns.pass_on(key)

    async def answer_again(self, slip: SlipRequest, arrived_at: int, *,
                           in_turn: bool = False) -> p.SlipAccepted | Rejection | None:
        """If ``slip`` was sent before (a re-send: same player, same key), the answer its
        first send earned; else None. Asked before any check of the betting window, so a
        client that lost the answer of an accepted slip hears it again after betting
        closed, as with the internal wallet — not that its standing bet was refused.
        ``in_turn``: the caller holds the player's turn already (see :meth:`place_slip`)."""
        prior = await self.log.debit_of(slip.player_id, slip.table, self.slip_key(slip))
        if prior is None:
            return None
        key = (slip.player_id, self.slip_key(slip))
        if not in_turn and key in self._turns:
            # the first send may be finishing its debit right now: wait for it
            await self._turns.take(key)
            self._turns.pass_on(key)
            prior = await self.log.debit_of(slip.player_id, slip.table,
                                            self.slip_key(slip)) or prior
        return await self._again(prior, slip, arrived_at)

    async def _place_slip(self, identity: Identity, slip: SlipRequest, arrived_at: int,
                          window_end: int) -> p.SlipAccepted | Rejection:
        now = self.clock()
        if arrived_at >= window_end or now >= window_end:
            again = await self.answer_again(slip, arrived_at, in_turn=True)
            return Rejection("betting_closed") if again is None else again
        call = self._debit(identity, slip, now, window_end)
        sent = await self.send_debit(call)
        if isinstance(sent, WalletCall):  # sent before (a re-send), or never sent now
            return await self._again(sent, slip, arrived_at)
        reply = sent
        now = self.clock()
        self.metrics.inc(f"livetable_wallet_debits_{reply.status or 'unknown'}_total")
        if reply.ok and now <= call.deadline:
            return await self._debited(call, reply, slip, arrived_at, now)
        if reply.status is not None and not reply.ok:
            await self.log.answer_debit(call, "refused", reply.text, now, closed_by="refused")
            if reply.status == "insufficient_funds" and reply.balance is not None:
                return Rejection("insufficient_funds", None, (call.amount, reply.balance))
            if reply.status == "insufficient_funds":
                return Rejection("insufficient_funds")
            return Rejection("wallet_refused", None, (reply.status,))
        # unknown outcome (or an ok past the window): the player hears it as soon as the
        # log says so; the sweeper rolls the debit back (it rolls back every unknown debit)
        why = reply.text if not reply.ok else f"ok after the betting window: {reply.text}"
        if await self.log.answer_debit(call, "unknown", why, now):
            self.ask_sweep()
        return Rejection("wallet_unavailable")

    def _debit(self, identity: Identity, slip: SlipRequest, now: int,
               window_end: int) -> WalletCall:
        """The slip's debit as the log keeps it (``pending``), with the body to send."""
        currency = self.currency_of(identity)
        bets = [DebitBet(bet_id=b.bet_id, spot=b.spot, amount=b.amount,
                         deducted=b.amount * BetSpot(b.spot).deducted_multiple)
                for b in slip.bets]
        total = sum(b.deducted for b in bets)
        tx_id = debit_tx_id()
        body = ENCODER.encode(Debit(
            tx_id=tx_id, player_id=operator_player_id(slip.player_id), currency=currency,
            amount=total, table_id=slip.table, round_id=slip.round_id, bets=bets))
        return WalletCall(
            tx_id=tx_id, method="debit", player_id=slip.player_id, currency=currency,
            table_id=slip.table, round_id=slip.round_id, amount=total, body=body,
            state="pending", created_at=now, updated_at=now, slip_key=self.slip_key(slip),
            deadline=min(window_end, now + int(self.settings.wallet_timeout * 1000)))

    def _gate(self, player_id: str) -> DebitGate:
        """The line of debits to the player's operator's wallet (operator/gate.py)."""
        return self._line(self.wallets.of(player_id))

    def _line(self, wallet: OperatorWallet) -> DebitGate:
        """The line of debits to ``wallet`` (lending the outbox idle places if apart)."""
        gate = self._gates.get(wallet.operator_id)
        if gate is None:
            gate = self._gates[wallet.operator_id] = DebitGate(
                wallet.debits.connections, self.clock,
                ceiling_ms=self.settings.wallet_timeout * 1000 / 2,
                lends=wallet.outbox is not wallet.debits)
        return gate

    async def send_debit(self, call: WalletCall) -> Reply | WalletCall:
        """Write the debit, then send it once a place in its wallet's line comes free in
        time (operator/gate.py): the reply; or the debit the log holds for the slip
        instead — its first send's (a re-send), or this one never sent (``refused`` with
        :data:`NOT_SENT`: nothing moved, nothing to roll back, a re-send hears the same).
        A place is the call on the wire only: the log's writes are made outside it."""
        prior = await self.log.begin_debit(call)
        if prior is not None:
            return prior
        gate = self._gate(call.player_id)
        if not await gate.enter(call.deadline):
            if await self.log.answer_debit(call, "refused", NOT_SENT, self.clock(),
                                           closed_by="refused"):
                self.metrics.inc("livetable_wallet_debits_not_sent_total")
            return await self.log.debit_of(call.player_id, call.table_id,
                                            call.slip_key or "") or call
        took: float | None = None
        try:
            sent = self.clock()
            reply = self._health.heard(await self.wallets.of(call.player_id).debits.call(
                "debit", call.body, (call.deadline - sent) / 1000))
            took = self.clock() - sent  # a timeout too: the line learns the wallet is slow
            return reply
        finally:
            gate.leave(took)

    async def _debited(self, call: WalletCall, reply: Reply, slip: SlipRequest,
                       arrived_at: int, now: int) -> p.SlipAccepted | Rejection:
        """The debit answered ``ok`` in time: the store takes the slip's bets."""
        if not await self.log.answer_debit(call, "ok", reply.text, now):
            # the sweeper gave up on it first (and queued its rollback)
            return Rejection("wallet_unavailable")
        # the debit's mirror deposit goes with the slip, in the store's group commit
        # with every other slip (one transaction for the batch, not a call per slip)
        paid = msgspec.structs.replace(
            slip, deposit=MirrorDeposit(mirror_id(call.tx_id), call.amount, now))
        answer = await self.store.place_slip(paid, arrived_at)
        if isinstance(answer, Rejection):
            # debited, then refused here (the round closed meanwhile, a limit): the
            # money goes back, the player hears the store's reason
            await self.close_debits([rollback_of(call, now)], now)
            self.ask_sweep()
        elif reply.balance is not None:
            answer.balance = reply.balance
        return answer

    async def _again(self, prior: WalletCall, slip: SlipRequest,
                     arrived_at: int) -> p.SlipAccepted | Rejection:
        """A slip sent again (same key): the answer its debit earned, never a second one."""
        answer = None
        with contextlib.suppress(msgspec.DecodeError):
            answer = ANSWER_DECODER.decode(prior.answer or "")
        if prior.state == "ok" and (prior.closed_by or "").startswith("r-"):
            # rolled back (refused after its ok, or its round cancelled): never placed
            # again — its money went back to the operator
            return Rejection("wallet_unavailable")
        if prior.state == "ok":
            # its bets are in the ledger (the per-player turn let the first finish): the
            # store answers as it first did
            again = await self.store.place_slip(slip, arrived_at)
            if isinstance(again, p.SlipAccepted) and answer is not None \
                    and answer.balance is not None:
                again.balance = answer.balance
            return again
        if prior.state == "pending":
            return Rejection("wallet_pending")
        if prior.state == "refused":
            if prior.answer == NOT_SENT:  # never sent: the answer its first send heard
                return Rejection("wallet_unavailable")
            if answer is not None and answer.status == "insufficient_funds":
                return Rejection("insufficient_funds")
            return Rejection("wallet_refused", None, (answer.status if answer else "?",))
        return Rejection("wallet_unavailable")

    # --- closing debits -----------------------------------------------------------------

    async def close_debits(self, closings: list[Closing], now: int) -> None:
        """Close ``closings`` :data:`CLOSE_CHUNK` at a time, waking the outbox after each:
        the first credits are on the wire while the next are written."""
        for start in range(0, len(closings), CLOSE_CHUNK):
            await self._close_chunk(closings[start:start + CLOSE_CHUNK], now)
            self._wake.set()

    async def _close_chunk(self, closings: list[Closing], now: int) -> None:
        """Take each closing's money out of the ledger (one store call for them all), then
        queue the calls of those done (one log write): each closes the debits it names.
        One the ledger cannot do is logged and left open (the audit says more)."""
        if not closings:
            return
        errors = await self.store.withdraw_many([c.withdrawal for c in closings], now)
        queued = []
        for closing, error in zip(closings, errors, strict=True):
            if error is None:
                queued.append(closing.call)
            else:
                log.error("wallet: %s %s: the ledger does not hold what it moves out (%s); "
                          "left open (the audit says more)", closing.call.method,
                          closing.call.tx_id, error)
        if queued:
            await self.log.enqueue(queued, now)

    async def sweep(self) -> None:
        """Close what is due: debits nobody answered or whose outcome is unknown (rolled
        back), and the debits of ended rounds (one credit per player for the bets in the
        ledger, a rollback for the rest) — in batches: one store call and one log write
        for every :data:`CLOSE_CHUNK` rollbacks, and as many for each ended round's
        closings. One batch that fails (logged) does not hold up the others.

        It reads the rounds with open debits first, and the debits only of those that
        ended (or that hold one in doubt): a round in play holds thousands at the close of
        betting, which every sweep, four a second, read and let be."""
        now = self.clock()
        unknown = {d.tx_id: d for d in await self.log.expire_debits(now - TAKEOVER_MS, now)}
        states: dict[str, str | None] = {}  # ended rounds (None: a table's tips)
        doubtful = []
        for round_id, in_doubt in await self.log.open_rounds(OPEN_ROUNDS):
            view = await self.store.round_view(round_id)
            if view is None or view.state in ("settled", "cancelled"):
                states[round_id] = None if view is None else view.state
            elif in_doubt:
                doubtful.append(round_id)
        by_round: dict[str, list[WalletCall]] = defaultdict(list)
        for debit in (await self.log.open_debits(5000, list(states), doubtful)
                      if states or doubtful else ()):
            if debit.state == "unknown":  # its gateway answered the player and left it
                unknown.setdefault(debit.tx_id, debit)
            elif debit.tx_id not in unknown:
                by_round[debit.round_id].append(debit)
        rollbacks = [rollback_of(d, now) for d in unknown.values()]
        await self._isolated(self.close_debits(rollbacks, now), f"{len(unknown)} unknown debits")
        for round_id, debits in by_round.items():
            await self._isolated(self._close_round(round_id, debits, states[round_id], now),
                                 f"round {round_id}")

    async def _isolated(self, work: Coroutine[Any, Any, None], what: str) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except InsufficientBalance:
            log.exception("wallet: %s: the ledger does not hold what this seamless call "
                          "moves out; left open (the audit says more)", what)
        except Exception:
            log.exception("wallet: closing %s failed; retried on the next sweep", what)

    async def _close_round(self, round_id: str, debits: list[WalletCall], state: str | None,
                           now: int) -> None:
        """Close the open debits of a round that ended as ``state`` (:func:`~livetable.
        operator.closing.close_round`): one read of its settlements, then :meth:`_close`.
        A table's tips (no round of the game): those ``ok`` a while are :attr:`keep_tips`'s."""
        if (debits[0].slip_key or "").startswith(TIP_KEYS):
            due = [d for d in debits if d.state == "ok" and d.updated_at < now - TAKEOVER_MS]
            return None if self.keep_tips is None or not due else await self.keep_tips(due)
        if state is None:  # no round the store knows
            return
        settled = {(player_id, b.bet_id): b
                   for player_id, b in await self.store.round_settlements(round_id)}
        plan = close_round(await self.installation(), round_id, state == "settled", debits,
                           settled, now)
        for debit in plan.takeovers:  # won from its gateway, or left to it
            if await self.log.answer_debit(debit, "unknown", "no answer by the deadline", now):
                plan.closings.append(rollback_of(debit, now))
        await self.close_debits(plan.closings, now)

    async def deliver(self) -> int:
        """Send every queued credit and rollback that is due (at most the outbox's limit
        at once) and wait for their answers; returns how many were answered ``ok``. For
        tools and tests: the loop (:meth:`run`) never waits."""
        return sum(await asyncio.gather(*await self.outbox.send_due()))

    def ask_sweep(self) -> None:
        """A rollback was queued: deliver it now, not at the next interval."""
        self._sweep_asked = True
        self._wake.set()

    def settled(self) -> None:
        """A table settled bets: sweep now, so that their credits are queued at once,
        not at the next interval (up to 250 ms later)."""
        self.ask_sweep()

    # --- the loop -------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="wallet-outbox")

    async def run(self, interval: float = 0.25) -> None:
        """Sweep and start deliveries, forever, never waiting on an answer; a failure (the
        store down) is logged and retried. The sweep is a task of its own, one at a time:
        the outbox delivers a round's first closings while the sweep writes the next."""
        loop = asyncio.get_running_loop()
        swept = -interval
        sweeping: asyncio.Task[None] | None = None
        try:
            while True:
                check_cancelled()  # a store client may have swallowed it (livetable/tasks.py)
                self._wake.clear()
                try:
                    # a delivery ending wakes the loop only to send more; the sweep keeps
                    # its interval unless asked (a rollback queued, bets settled)
                    if (sweeping is None or sweeping.done()) and (
                            self._sweep_asked or loop.time() - swept >= interval):
                        self._sweep_asked = False
                        swept = loop.time()
                        sweeping = asyncio.create_task(self._sweep_once(),
                                                       name="wallet-sweep")
                    await self.outbox.send_due()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("wallet delivery failed; retrying")
                await wait_set(self._wake, interval)  # not wait_for: it can lose a stop
        finally:
            await cancel(sweeping)

    async def _sweep_once(self) -> None:
        try:
            await self.sweep()
        except Exception:
            log.exception("wallet sweep failed; retrying")
        finally:
            self._wake.set()  # another sweep may have been asked meanwhile

    async def stop(self) -> None:
        await cancel(self._task)
        self._task = None
        for task in list(self.outbox.deliveries):
            await cancel(task)  # still queued in the log: sent again after a restart
        await self.wallets.aclose()
