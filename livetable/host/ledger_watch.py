"""The periodic ledger audit of an engine: a ledger that no longer adds up, or a store that
is not the one this process started on, holds this process's tables until it is right again.

A finding is not an outage. An unreachable store is ``/readyz``'s business (the audit just
could not run); a failed audit or a changed identity is a finding: the tables are held (a
round in play is paused — except on a store that is not ours, where nothing more is
written), ``/readyz`` turns red (``checks.ledger``) and ``livetable_ledger_ok`` goes to 0,
until an audit passes again and the tables are released. The watch keeps the two facts
readiness reads: the identity the process started on, and the problem in force.
"""

from __future__ import annotations

import asyncio
import logging

from livetable.host.runner import TableRunner
from livetable.metrics import Metrics
from livetable.store.base import Store
from livetable.tasks import check_cancelled

log = logging.getLogger("livetable.app")


class LedgerWatch:
    """The audits of one store, and the tables they hold (``runners``: the process's own,
    shared with its :class:`~livetable.services.Services`)."""

    def __init__(self, store: Store, metrics: Metrics, runners: dict[str, TableRunner]) -> None:
        self.store = store
        self.metrics = metrics
        self.runners = runners
        #: The store's identity when this process started on it (see Store.identity).
        self.identity: str | None = None
        #: Why the ledger is not to be trusted now (a failed audit, a changed store), if so.
        self.problem: str | None = None

    async def watch(self, interval: float) -> None:
        """Audit the ledger every ``interval`` seconds. A failure holds this
        process's tables (a round in play is paused), turns /readyz red and shows in
        /metrics, until an audit passes again."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.check()
                check_cancelled()  # a store's client may have swallowed it (livetable/tasks.py)
            except asyncio.CancelledError:
                raise
            except Exception:  # an unreachable store is /readyz's business, not a finding
                log.exception("ledger audit could not run")

    async def check(self) -> str | None:
        """One audit (and identity check); returns the problem found, if any."""
        current = await self.store.identity()
        pause = True
        problem: str | None
        if current != self.identity:
            problem = (f"the store's identity changed (started on {self.identity}, "
                       f"now {current}): a wiped or different store")
            pause = False  # write nothing to a store that is not ours
        else:
            report = await self.store.audit()
            problem = None if report.ok else "ledger audit failed: " + "; ".join(
                report.problems[:5])
        self.metrics.inc("livetable_ledger_audits_total")
        if problem is not None:
            if problem != self.problem:
                log.error("%s: holding tables %s", problem, ",".join(self.runners) or "-")
            self.problem = problem
            self.metrics.inc("livetable_ledger_audit_failures_total")
            self.metrics.set_gauge("livetable_ledger_ok", 0.0)
            for runner in list(self.runners.values()):
                await runner.halt(problem, pause=pause)
        elif self.problem is not None:
            log.warning("ledger audit passes again: releasing the tables")
            self.problem = None
            self.metrics.set_gauge("livetable_ledger_ok", 1.0)
            for runner in self.runners.values():
                runner.release()
        return problem
