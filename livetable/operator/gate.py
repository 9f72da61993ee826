"""The line of debits waiting to be sent to one operator's wallet (issue 23).

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


class DebitGate:
    """At most ``limit`` debits in flight to one wallet; the others wait in line (first
    come, first sent), each until its deadline (see the module's docstring)."""

    def __init__(self, limit: int, clock: Callable[[], int], *,
                 ceiling_ms: float = 1000.0) -> None:
        self.limit = max(1, limit)
        self.clock = clock
        #: The typical call is never counted longer than this (ms): a run of timeouts
        #: must not make the line refuse every debit for ever after.
        self.ceiling_ms = ceiling_ms
        self.busy = 0
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
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._line.append((deadline, future))
        wait = (deadline - self.call_ms - self.clock()) / 1000
        self.waiting += 1
        self._hand_on()  # a place may be free (those ahead given up on)
        try:
            async with asyncio.timeout(max(0.0, wait)):
                return await future
        except TimeoutError:
            # handed a place just as the time ran out: it is the caller's
            return future.done() and not future.cancelled() and future.result()
        except BaseException:
            if future.done() and not future.cancelled() and future.result():
                self.leave(None)  # handed a place as it was cancelled: give it on
            raise
        finally:
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
