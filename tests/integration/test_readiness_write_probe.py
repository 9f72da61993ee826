"""A write probe that does not answer even within ``/readyz``'s own bound (a loaded loop, a
slow pool) is a commit not answered, not a store that refused it: a loaded run said
"commit failed: no answer within 0.7 s", and nothing about the standby."""
from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from livetable.config import Settings
from livetable.server.health import COMMIT_PROBE_TIMEOUT, READY_PROBE_TIMEOUT, readiness
from livetable.services import Services


async def test_a_probe_hung_past_the_bound_is_an_unanswered_commit(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret=b"unit-test-secret-0123456789abcdef")
    svc = Services(settings, roles=("gateway",))
    await svc.start()
    try:
        calls: list[float] = []

        async def hangs(within: float) -> tuple[float | None, str | None]:
            calls.append(within)
            await asyncio.sleep(30)
            return 0.0, None

        async def answers(within: float) -> tuple[float | None, str | None]:
            return None, "the synchronous standby is not streaming"

        svc.settings = msgspec.structs.replace(settings, postgres_replication="sync")
        svc.write_probe = hangs
        ready, checks = await readiness(svc)
        assert calls == [COMMIT_PROBE_TIMEOUT]
        assert not ready
        assert checks["store"] == f"SQLite commit: no answer within {READY_PROBE_TIMEOUT:g} s"
        assert checks["replication"] == "not known: the write probe did not answer"
        assert svc.metrics.gauge("livetable_store_commit_seconds") == READY_PROBE_TIMEOUT

        svc.write_probe = answers  # the probe's own bound: its finding is told
        ready, checks = await readiness(svc)
        assert not ready
        assert checks["store"] == f"SQLite commit: no answer within {COMMIT_PROBE_TIMEOUT:g} s"
        assert checks["replication"] == "the synchronous standby is not streaming"
    finally:
        await svc.stop()
