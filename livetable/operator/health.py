"""Whether the operator's wallet answers: readiness's view of a seamless wallet.

Degraded, not down: rounds still deal and settle while the wallet is silent, and what it
is owed waits in the outbox (operator/outbox.py). So ``/readyz`` says why it looks down,
in livetable's words only — never the wallet's text, which a public endpoint must not show.
"""

from __future__ import annotations

from collections.abc import Callable

from livetable.operator.client import Reply

#: The wallet counts as failing after this many calls in a row without an answer...
FAILING_CALLS = 3
#: ...as long as the last of them is this recent (ms): one not called since is not known down.
FAILING_FOR_MS = 60_000


class WalletHealth:
    """Calls in a row whose outcome was unknown (no answer, a non-200, garbage), and the
    last one's time and reason."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.failing = 0
        self.failed_at = 0
        self.failure = ""

    def heard(self, reply: Reply) -> Reply:
        """Count ``reply``: any status the contract knows (a refusal too) says the wallet
        answers; an unknown outcome says it may not."""
        if reply.status is not None:
            self.failing = 0
        else:
            self.failing += 1
            self.failed_at = self.clock()
            self.failure = reply.reason or "no answer"  # public (/readyz): not its text
        return reply

    def trouble(self) -> str | None:
        """None while the wallet answers; else why it looks down: :data:`FAILING_CALLS`
        calls in a row without an answer, the last within :data:`FAILING_FOR_MS`."""
        if self.failing < FAILING_CALLS or self.clock() - self.failed_at > FAILING_FOR_MS:
            return None
        return (f"degraded: the last {self.failing} wallet calls had no answer "
                f"(the last {(self.clock() - self.failed_at) / 1000:.0f} s ago: "
                f"{self.failure})")
