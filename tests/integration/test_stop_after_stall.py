"""A graceful stop ends within its drain time, whatever PostgreSQL did before.

Seen in the fault runs (docs/operations.md §9): a SIGTERM after a PostgreSQL stall took over
15 s — past the time an orchestrator allows before SIGKILL — the stop waiting on calls hung
on the store's connections (the pool closes only once every connection is given back, and a
call hangs up to its 30 s command timeout). Now each part of the stop has the time left of
one deadline (``Services.stop_within``); what still hangs then is left behind and the
store's connections are cut.

PostgreSQL here is reached through a TCP proxy that holds bytes (tests/e2e/tcpproxy.py): the
table's runner and a reader are both waiting on it when the stop comes.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pg_util import fresh_database, shared_pg

from livetable.config import Settings
from livetable.services import Services

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from tcpproxy import TcpProxy  # tests/e2e is not a package

SECRET = b"stop-after-stall-0123456789abcdef"
STOP_WITHIN = 1.0


async def test_a_stop_with_calls_hung_on_postgresql_ends_within_its_deadline(
        tmp_path: Path) -> None:
    port = shared_pg().primary.port
    with TcpProxy(port) as proxy:
        url = fresh_database().replace(f":{port}/", f":{proxy.port}/")
        settings = Settings(data_dir=tmp_path, secret=SECRET, postgres_url=url,
                            postgres_replication="none")
        services = Services(settings)
        services.stop_within = STOP_WITHIN
        await services.start()
        hung: asyncio.Task[object] | None = None
        try:
            assert services.runners and all(r.alive for r in services.runners.values())
            proxy.stall()  # the stall: nothing passes, nothing is closed
            hung = asyncio.ensure_future(services.store.audit())  # a call waiting on it
            await asyncio.sleep(0)
            # the deadline, and a margin for a busy machine; the calls hung would hold the
            # stop for their 30 s command timeout
            async with asyncio.timeout(STOP_WITHIN + 4):
                await services.stop()
        finally:
            proxy.restore()
            if hung is not None:
                hung.cancel()
                await asyncio.gather(hung, return_exceptions=True)
