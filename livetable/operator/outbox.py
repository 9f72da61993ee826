"""The seamless wallet's outbox: credits and rollbacks delivered to the operator until it
answers ``ok`` (docs/design.md §5).

A round's credits and a refused debit's rollbacks are queued in the wallet log before
their first attempt (:meth:`livetable.operator.seamless.SeamlessWallet._close_chunk`); this
module only delivers what the log says is due, and records each answer there. Apart
from the debits' path so that it can be read and bounded on its own:

* **Concurrent, bounded.** Each call is a task of its own, at most :attr:`Outbox.limit`
  at once on the outbox clients' connections (a quarter of each wallet's pool), plus the
  places it borrows: a wallet that trickles one player's answer holds one place for at
  most the call's deadline, never the other players' credits. (One call at a time, a
  trickled credit had held the next three rounds' credits for 33, 25 and 17 s.)
* **Idle debit places borrowed.** Once betting closes the debit connections sit idle
  while a round's credits queue: with its own places all taken, the outbox delivers
  through the player's operator's *debit* client, on a place lent by that operator's
  line of debits (:meth:`livetable.operator.gate.DebitGate.borrow`) — only while no debit
  waits there, at most three quarters of its places, counted in its ``busy`` (debits and credits
  together never exceed the debit connections) and given back when the call ends. A
  5,000-player round's close at 20 ms a call: 32 places were a floor of 3.1 s; 32 + 72
  are 0.96 s.
* **Never lost, never doubled.** A call stays ``queued`` in the log until an ``ok`` is
  recorded, and is sent again — byte for byte, the same ``tx_id`` — after a back-off
  (:func:`backoff_ms`); the operator applies a ``tx_id`` once.
* **Never waited on.** The wallet's loop starts deliveries and goes on; a call answered
  wakes it to send more (``on_free``).
* **A place is the call on the wire, and the log is read ahead.** A place comes free when
  the operator answers, not when the answer is written, and the due calls are read from
  the log :data:`READ_AHEAD` places' worth at a time and kept until a place is free: one
  read per many deliveries, not one per delivery. (Measured on a 5,000-player round's
  close (docs/decisions.md#the-seamless-wallet-at-table-speed): a place held over its log write and
  a log read to fill it kept 32
  places to some 460 credits a second at 20 ms.)
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable

from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.operator.client import Reply
from livetable.operator.gate import DebitGate
from livetable.operator.log import WalletCall, WalletLog
from livetable.operator.wallets import OperatorWallet, OperatorWallets

log = logging.getLogger("livetable.wallet")
#: Due calls read from the log at a time, in places' worth.
READ_AHEAD = 4


def backoff_ms(attempts: int, cap_seconds: float, rng: random.Random) -> int:
    """Wait before delivery number ``attempts + 1``: 0.25 s doubling, capped, with jitter
    (so that a wallet coming back is not hit by every queued call at once)."""
    base = min(cap_seconds, 0.25 * 2 ** min(attempts, 20))
    return int(base * 1000 * (0.5 + rng.random() / 2))


class Outbox:
    """Deliveries of queued credits and rollbacks (see the module's docstring).
    ``heard`` counts each reply for the wallet's health; ``on_free`` is called when a
    delivery ends (a place came free); ``line_of``: an operator's line of debits, whose
    idle places the outbox may borrow (None: it borrows none)."""

    def __init__(self, settings: Settings, wallet_log: WalletLog, wallets: OperatorWallets,
                 metrics: Metrics, clock: Callable[[], int], heard: Callable[[Reply], Reply],
                 on_free: Callable[[], None],
                 line_of: Callable[[OperatorWallet], DebitGate] | None = None) -> None:
        self.settings = settings
        self.log = wallet_log
        #: each player's operator's wallet (operator/wallets.py): a credit goes to theirs
        self.wallets = wallets
        self.metrics = metrics
        self.clock = clock
        self.heard = heard
        self.on_free = on_free
        self.line_of = line_of
        self.rng = random.Random()
        #: tx_ids of the credits and rollbacks being delivered (on the wire, or their
        #: answer being written), and their tasks
        self.sending: set[str] = set()
        self.deliveries: set[asyncio.Task[bool]] = set()
        #: calls on the wire on the outbox's own connections (each holds a place)
        self.calling = 0
        #: calls on the wire on places borrowed from the lines of debits
        self.borrowed = 0
        #: due calls read from the log, not started yet
        self.ready: deque[WalletCall] = deque()

    @property
    def limit(self) -> int:
        """Credits and rollbacks in flight at once on the outbox's own places: the outbox
        clients' connections, every operator's together (more on borrowed places)."""
        return self.wallets.outbox_connections

    def _lines(self, lenders: list[OperatorWallet]) -> list[DebitGate]:
        """The lines of debits of ``lenders`` (the wallet's own: made on first use)."""
        assert self.line_of is not None  # lenders are asked for only with line_of
        return [self.line_of(wallet) for wallet in lenders]

    def _borrow(self, wallet: OperatorWallet) -> DebitGate | None:
        """A place lent by ``wallet``'s line of debits, or None (none when the outbox
        calls through the debits' own client: one wallet for both, or an operator this
        process was never told of, whose line is not made here)."""
        if self.line_of is None or wallet.debits is wallet.outbox:
            return None
        line = self.line_of(wallet)
        return line if line.borrow() else None

    async def send_due(self) -> list[asyncio.Task[bool]]:
        """Start the delivery of what is due, up to the free places (the outbox's own,
        then those the lines of debits lend): each call on its own, so a wallet slow to
        answer one player holds one place (for at most the call's deadline), never the
        others' deliveries."""
        lenders = self.wallets.lenders() if self.line_of is not None else []
        lines = self._lines(lenders)
        free = self.limit - self.calling + sum(line.spare for line in lines)
        if free <= 0:
            return []
        if len(self.ready) < free:
            # a call being delivered is still queued in the log: ask for enough to skip
            known = self.sending | {c.tx_id for c in self.ready}
            self.ready.extend(c for c in await self.log.due(
                self.clock(), READ_AHEAD * (self.limit + sum(line.lendable for line in lines))
                + len(known))
                if c.tx_id not in known)
        tasks = []
        kept: list[WalletCall] = []  # calls whose operator lends no place now, in order
        refused: set[str] = set()  # those operators (of those that may lend)
        while self.ready and (self.calling < self.limit or len(refused) < len(lenders)):
            call = self.ready.popleft()
            if call.tx_id in self.sending:
                continue
            line = None
            if self.calling >= self.limit:
                wallet = self.wallets.of(call.player_id)
                line = None if wallet.operator_id in refused else self._borrow(wallet)
                if line is None:
                    if wallet.debits is not wallet.outbox:
                        refused.add(wallet.operator_id)
                    kept.append(call)
                    continue
                self.borrowed += 1
            else:
                self.calling += 1
            self.sending.add(call.tx_id)
            task = asyncio.create_task(self._deliver_one(call, line),
                                       name=f"wallet-{call.tx_id}")
            self.deliveries.add(task)
            task.add_done_callback(self.deliveries.discard)
            tasks.append(task)
        self.ready.extendleft(reversed(kept))
        return tasks

    async def _deliver_one(self, call: WalletCall, line: DebitGate | None) -> bool:
        """Deliver ``call`` on the outbox's own connections, or (``line``) on a place
        borrowed from that line of debits, through the debit client."""
        try:
            wallet = self.wallets.of(call.player_id)
            try:
                reply = self.heard(await (wallet.outbox if line is None else wallet.debits)
                                   .call(call.method, call.body))
            finally:
                # its place is free: the answer is written meanwhile
                if line is None:
                    self.calling -= 1
                else:
                    self.borrowed -= 1
                    line.give_back()  # to the first debit in line, if one waits
                self.on_free()
            now = self.clock()
            # "rolled_back" to a credit cannot happen (only debits are rolled back); any
            # status but ok is retried: the operator must end up saying ok to this tx_id
            wait = backoff_ms(call.attempts, self.settings.wallet_retry_max, self.rng)
            await self.log.delivered(call, reply.ok, reply.text, now + wait, now)
            self.metrics.inc(f"livetable_wallet_{call.method}s_"
                             f"{'ok' if reply.ok else 'retried'}_total")
            if not reply.ok:
                log.warning("wallet %s %s: %s; next attempt in %.1f s", call.method,
                            call.tx_id, reply.text[:120], wait / 1000)
            return reply.ok
        except asyncio.CancelledError:
            raise
        except Exception:
            # the log could not take the answer (the store down): the call stays queued
            # and is sent again, the same tx_id, once the store is back
            log.exception("wallet %s %s: delivery not recorded; retried", call.method,
                          call.tx_id)
            return False
        finally:
            self.sending.discard(call.tx_id)
