"""What the primary promises of a commit, checked where it matters: before a bet is taken.

Why. An acknowledged bet must survive the loss of the primary, and it does only if the
commit waited for a synchronous standby: ``synchronous_commit`` ``on`` (or
``remote_write`` / ``remote_apply``) *and* a standby named by
``synchronous_standby_names`` streaming in ``sync`` or ``quorum`` state. With
``synchronous_standby_names`` empty a streaming standby is asynchronous: commits return
before it has them, and a failover lost 389 and 434 acknowledged bets (2 of 2 runs) while
the audit on the promoted standby was clean — nothing flagged the loss. So livetable does
not take PostgreSQL's word for it once; it asks, in the transaction of every batch of slips
(:func:`check`: one more statement, the same round trip that sets the batch's deadline),
and refuses the batch as an outage (the players are answered ``unavailable`` and resend)
when the promise is not kept. Readiness asks the same question (:func:`problem_of`) and
says ``synchronous replication`` in ``/readyz`` and ``livetable_postgres_sync_standbys``.

A single PostgreSQL (development, or an operator who accepts losing acknowledged bets in
a failover) is an explicit opt-in, logged at start: ``--postgres-replication none``
(``LIVETABLE_POSTGRES_REPLICATION=none``). Then nothing is asked.

The role livetable connects as must see ``pg_stat_replication``'s ``sync_state``: a
superuser, or a member of ``pg_monitor`` (PostgreSQL hides the column from others, and a
standby it cannot see is a standby it cannot count on).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

from livetable.store.base import StoreError

log = logging.getLogger("livetable.store")

#: ``sync``: every bet waits for a synchronous standby (the default); ``none``: a single
#: PostgreSQL, opted into (see the module's docstring).
Replication = Literal["sync", "none"]

#: The values of ``synchronous_commit`` under which a commit waits for the standby.
WAITS_FOR_STANDBY = ("on", "remote_write", "remote_apply")

#: What the primary promises, as one row: the session's ``synchronous_commit``,
#: ``synchronous_standby_names``, the standbys in ``sync`` or ``quorum`` state, and those
#: whose state this role may not see.
QUERY = (
    "SELECT current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names'), "
    "count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')), "
    "count(*) FILTER (WHERE sync_state IS NULL) FROM pg_stat_replication")


@dataclass(frozen=True)
class Promise:
    """What the primary said of its commits (one row of :data:`QUERY`)."""

    synchronous_commit: str
    standby_names: str
    sync_standbys: int
    hidden: int

    def configured(self) -> str | None:
        """What in the primary's configuration means no commit waits for a standby (it
        does not heal by itself: refused at start), or None."""
        if self.synchronous_commit not in WAITS_FOR_STANDBY:
            return (f"synchronous_commit is {self.synchronous_commit!r}: a commit does not "
                    f"wait for a standby (set it to 'on')")
        if not self.standby_names.strip():
            return ("synchronous_standby_names is empty: every standby is asynchronous, "
                    "and a failover loses acknowledged bets (name the standby, e.g. '*')")
        return None

    def problem(self) -> str | None:
        """Why a commit now would not be on a standby before it returns, or None."""
        configured = self.configured()
        if configured is not None:
            return configured
        if self.sync_standbys == 0 and self.hidden:
            return ("pg_stat_replication's sync_state is hidden from this role: grant it "
                    "pg_monitor so livetable can see its synchronous standby")
        if self.sync_standbys == 0:
            return ("no standby is streaming in sync or quorum state "
                    "(pg_stat_replication): commits wait for one that is not there")
        return None


def promise_of(row: Any) -> Promise:
    return Promise(str(row[0]), str(row[1]), int(row[2]), int(row[3]))


async def read(con: Any) -> Promise:
    """What the primary behind ``con`` promises now."""
    return promise_of(await con.fetchrow(QUERY))


def problem_of(replication: Replication, promise: Promise | None) -> str | None:
    """Why bets are refused under ``replication`` (None: they are not), as readiness and
    the log say it: ``synchronous replication: …``."""
    if replication == "none" or promise is None:
        return None
    found = promise.problem()
    return None if found is None else f"synchronous replication: {found}"


class Unpromised(StoreError):
    """At start: the primary is configured so that no commit waits for a standby, and this
    process was not told it runs on one PostgreSQL (``--postgres-replication none``)."""


async def at_start(con: Any, replication: Replication) -> None:
    """Refuse a primary configured never to wait for a standby (it does not heal by itself:
    a process that started on it would refuse every bet), or log the opt-out."""
    if replication == "none":
        log.warning("PostgreSQL without a synchronous standby (--postgres-replication none): "
                    "a failover can lose acknowledged bets")
        return
    promise = await read(con)
    wrong = promise.configured()
    if wrong is not None:
        raise Unpromised(f"synchronous replication: {wrong}; or run on one PostgreSQL, "
                         f"accepting that risk, with --postgres-replication none "
                         f"(LIVETABLE_POSTGRES_REPLICATION=none)")
    found = promise.problem()
    if found is not None:  # a standby not streaming yet heals: bets wait for it
        log.error("synchronous replication: %s; bets are refused until it is", found)


#: Readiness's write: one row, committed as a bet is (it waits for the standby).
_PROBE = ("INSERT INTO meta (key, value) VALUES ('readyz', $1) "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value")


async def probe(con: Any, replication: Replication,
                within: float) -> tuple[float | None, str | None]:
    """Readiness on PostgreSQL: a write's commit, timed (None: not within ``within`` s; a
    read saw nothing of commits hung 45 s behind a stalled standby, or failing on a full
    disk), and why bets are refused now (None: they are not)."""
    began = time.perf_counter()
    found = problem_of(replication, await read(con) if replication == "sync" else None)
    # the read and the commit within ``within`` together: on a loaded machine the commit,
    # hung on a lost standby, ran past the readiness probe's own limit after a slow read,
    # and /readyz lost the reason (the replication) it had just found
    left = max(0.01, within - (time.perf_counter() - began))
    began = time.perf_counter()
    try:
        async with asyncio.timeout(left):
            await con.execute(_PROBE, str(time.time_ns() // 1_000_000))
    except TimeoutError:
        con.terminate()  # left mid-statement: never back to the pool as it is
        return None, found
    return time.perf_counter() - began, found
