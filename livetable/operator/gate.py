"""The line of debits waiting to be sent to one operator's wallet
(docs/decisions.md#the-seamless-wallet-at-table-speed).

Why. A seamless slip is accepted only on a debit answered ``ok`` before its deadline
(operator/seamless.py). Under more load than the machine carries, every debit started
took longer, more of them missed their deadline, and each miss cost more than a success
(the log written twice, the ledger's withdrawal, a rollback sent): measured, 500 players
× 10 bets accepted 823 of 5,000 and 2,000 × 10 next to none — the server kept starting
debits that could no longer finish in time. So the debits in flight to a wallet are
bounded (:attr:`DebitGate.limit`: its debit connections), the rest wait here in line, each
only as long as a call started then could still be answered before its deadline
(:meth:`DebitGate.enter`); one that cannot is never sent, and its slip is refused at
once, ``wallet_unavailable`` — never a debit in doubt, never a rollback.

How long a call takes is learnt from the calls made (:attr:`DebitGate.typical_ms`, a
moving average of their times, timeouts too, at least :data:`MIN_CALL_MS`); a debit is
sent only with :data:`HEADROOM` times that left: a slower wallet or a busier machine makes
the line refuse sooner, instead of sending calls that time out (each a debit in doubt, a
rollback, and a connection dropped and made again).

Idle places are lent to the outbox (operator/outbox.py). Once betting closes the debit
connections sit idle while a round's credits queue, so the outbox may deliver through the
debit client while no debit waits in line (:meth:`DebitGate.borrow`), at most
:func:`lendable` places at once: a borrowed place counts in :attr:`DebitGate.busy`, so
debits and credits together never exceed the debit connections, and since a quarter of
the places are never lent, a debit arriving while credits borrow finds one free at once
as long as fewer than a quarter are debits in flight. A borrowed place is given back
(:meth:`DebitGate.give_back`) when its call ends — bounded by the call's deadline — and
goes first to a debit in line.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

#: The least time a debit is given to be answered (ms): one with less left is not sent.
MIN_CALL_MS = 20
#: The weight of the newest call in :attr:`DebitGate.typical_ms`.
WEIGHT = 0.1
#: A debit is sent only with this many typical calls' time left before its deadline.
HEADROOM = 1.5


def lendable(limit: int) -> int:
    """How many of ``limit`` debit places the outbox may borrow at once: three quarters.
    (Half kept a 5,000-player close at 20 ms a call to 2.1–2.2 s, three quarters to
    1.7 s: docs/benchmarks.md. A debit never waits long for a lent place: none is lent
    while one waits, and a place given back goes to the debit first.)"""
    return limit * 3 // 4


def _give_up(future: asyncio.Future[bool]) -> None:
    """A debit's time in line ran out before a place came free."""
    if not future.done():
        future.set_result(False)


class DebitGate:
    """At most ``limit`` debits in flight to one wallet; the others wait in line (first
    come, first sent), each until its deadline (see the module's docstring)."""

    def __init__(self, limit: int, clock: Callable[[], int], *,
                 ceiling_ms: float = 1000.0, lends: bool = True) -> None:
        """``lends``: whether the outbox may borrow places (not when it calls through
        the same connections as the debits)."""
        self.limit = max(1, limit)
        self.clock = clock
        #: The typical call is never counted longer than this (ms): a run of timeouts
        #: must not make the line refuse every debit for ever after.
        self.ceiling_ms = ceiling_ms
        #: places held: debits on the wire and places lent to the outbox
        self.busy = 0
        #: places lent to the outbox (part of :attr:`busy`), at most :attr:`lendable`
        self.borrowed = 0
        #: the most places lent at once
        self.lendable = lendable(self.limit) if lends else 0
        self.typical_ms = float(MIN_CALL_MS)
        #: debits in line (the deque keeps the ones given up on until they come up)
        self.waiting = 0
        self._line: deque[tuple[int, asyncio.Future[bool]]] = deque()

    @property
    def call_ms(self) -> float:
        """The time a debit must have left to be sent (ms)."""
        return HEADROOM * max(MIN_CALL_MS, self.typical_ms)

    def in_time(self, deadline: int, wait_ms: float = 0.0) -> bool:
        """Whether a debit sent after ``wait_ms`` could still be answered by
        ``deadline`` (ms)."""
        return self.clock() + wait_ms + self.call_ms <= deadline

    def expected_wait_ms(self) -> float:
        """How long a debit joining the line now should wait for a place: the places
        come free ``limit`` per typical call."""
        return (self.waiting + 1) * max(MIN_CALL_MS, self.typical_ms) / self.limit

    async def enter(self, deadline: int) -> bool:
        """Wait for a place: True once the caller holds one (it must call :meth:`leave`
        after its call), False if none came free in time for a call to be answered by
        ``deadline`` — the debit must not be sent."""
        if not self.in_time(deadline):
            return False
        if self.busy < self.limit and not self.waiting:
            self.busy += 1
            return True
        if not self.in_time(deadline, self.expected_wait_ms()):
            return False  # the line ahead is longer than its time: refused at once
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._line.append((deadline, future))
        wait = (deadline - self.call_ms - self.clock()) / 1000
        self.waiting += 1
        # no place by then: False (one loop timer, cheaper than asyncio.timeout, which
        # every debit waiting in a busy line paid)
        timer = loop.call_later(max(0.0, wait), _give_up, future)
        self._hand_on()  # a place may be free (those ahead given up on)
        try:
            return await future
        except BaseException:
            if future.done() and not future.cancelled() and future.result():
                self.leave(None)  # handed a place as it was cancelled: give it on
            raise
        finally:
            timer.cancel()
            self.waiting -= 1
            if not future.done():
                future.cancel()  # skipped by leave()

    def leave(self, took_ms: float | None) -> None:
        """Give the place back; ``took_ms``: how long the call took, answered or not
        (None: not sent). The first in line still in time gets the place; those
        no longer in time are told so."""
        if took_ms is not None:
            took = min(self.ceiling_ms, took_ms)
            self.typical_ms += WEIGHT * (took - self.typical_ms)
        self.busy -= 1
        self._hand_on()

    @property
    def spare(self) -> int:
        """Places the outbox may borrow now: none while a debit waits in line, else the
        free places, up to :attr:`lendable` lent at once."""
        if self.waiting:
            return 0
        return max(0, min(self.lendable - self.borrowed, self.limit - self.busy))

    def borrow(self) -> bool:
        """Lend the outbox a place if one is :attr:`spare`: True if lent (the caller must
        :meth:`give_back` it when its call ends)."""
        if not self.spare:
            return False
        self.busy += 1
        self.borrowed += 1
        return True

    def give_back(self) -> None:
        """A lent place back (its call ended): to the first debit in line, if any. A
        credit's time does not count in :attr:`typical_ms` (the debits' own)."""
        self.borrowed -= 1
        self.busy -= 1
        self._hand_on()

    def _hand_on(self) -> None:
        """Free places to the first in line still in time; those no longer in time are
        told so."""
        while self._line and self.busy < self.limit:
            deadline, future = self._line.popleft()
            if future.done():
                continue
            if not self.in_time(deadline):
                future.set_result(False)
                continue
            self.busy += 1
            future.set_result(True)
