"""A stop's cancellation is never lost by a background loop's pause (livetable.tasks.wait_set).

On Python 3.11, ``asyncio.wait_for(event.wait(), t)`` runs the wait as a task of its own,
and a cancellation that lands in the turn that task ends is swallowed: wait_for returns the
wait's result (python/cpython#86296). The seamless wallet's loop paused so; its stop hung
20 minutes in a full run. Here the wait ends and the stop starts in the same step — the
schedule that loses the cancel — with no sleep: an Event whose ``wait`` starts the stop as
it returns.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Literal

from livetable.config import Settings
from livetable.metrics import Metrics
from livetable.operator.client import WalletClient
from livetable.operator.log_sqlite import SQLiteWalletLog
from livetable.operator.seamless import SeamlessWallet
from livetable.store.sqlite import SQLiteStore
from livetable.tasks import cancel, wait_set

ROOT = Path(__file__).resolve().parents[2]

#: How long a stop may take here before it is called hung (it takes a few loop turns).
HUNG = 5.0


class StopsAsItWakes(asyncio.Event):
    """A loop's wake-up event: the first time a wait on it ends, ``stop`` is started in the
    same step, so that its cancel reaches the loop's task as the wait returns."""

    def __init__(self, stop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        super().__init__()
        self._stop = stop
        self.stopping: asyncio.Task[None] | None = None
        self.woken = asyncio.Event()

    async def wait(self) -> Literal[True]:
        await super().wait()
        if self.stopping is None:
            self.stopping = asyncio.ensure_future(self._stop())
            self.woken.set()
        return True


async def stopped_in_time(wake: StopsAsItWakes, loop_task: asyncio.Task[Any] | None) -> bool:
    """Whether the stop that ``wake`` started returned; a hung loop is then cancelled again
    (a second cancel is not lost) so that the test ends either way."""
    await wake.woken.wait()
    assert wake.stopping is not None
    await asyncio.wait({wake.stopping}, timeout=HUNG)
    if wake.stopping.done():
        return True
    if loop_task is not None:
        loop_task.cancel()
    await asyncio.wait_for(wake.stopping, HUNG)
    return False


async def test_a_stop_as_the_seamless_wallets_loop_wakes_is_not_lost(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "lt.db")
    log = SQLiteWalletLog(tmp_path / "lt-wallet.db")
    url = "http://127.0.0.1:9/wallet"  # never called: nothing is owed
    settings = Settings(wallet="seamless", wallet_url=url, wallet_secret=b"s" * 32)
    wallet = SeamlessWallet(settings, store, log, WalletClient(
        url, b"s" * 32, timeout=1.0, connections=1), Metrics())
    wake = StopsAsItWakes(wallet.stop)
    wallet._wake = wake  # the first sweep's end wakes the loop, and stops the wallet
    wallet.start()
    loop_task = wallet._task
    try:
        assert await stopped_in_time(wake, loop_task), "the wallet's stop hung"
        assert loop_task is not None and loop_task.done()
    finally:
        await cancel(loop_task)
        await log.close()
        await store.close()


async def test_a_loop_pausing_with_wait_set_ends_on_a_cancel_as_its_wait_returns() -> None:
    turns = 0

    class CancelsAsItWakes(asyncio.Event):
        async def wait(self) -> Literal[True]:
            await super().wait()
            task.cancel()  # asked in the very step the wait ends
            return True

    async def loop() -> None:
        nonlocal turns
        while True:
            turns += 1
            await wait_set(wake, 60.0)
            wake.clear()

    wake = CancelsAsItWakes()
    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop waits
    wake.set()
    await asyncio.wait({task}, timeout=HUNG)
    if not task.done():
        task.cancel()  # a second cancel is not lost: the test ends either way
        raise AssertionError("the cancel was lost: the loop went on")
    assert task.cancelled() and turns == 1


async def test_wait_set_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0) is False
    event.set()
    assert await wait_set(event, 60.0) is True  # set already: no wait


def test_no_loop_of_livetable_pauses_with_wait_for_on_an_event() -> None:
    """``asyncio.wait_for(x.wait(), t)``, the shape that lost the wallet's stop: a loop's
    pause is :func:`livetable.tasks.wait_set`."""
    found = []
    for path in sorted((ROOT / "livetable").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "wait_for" and node.args
                    and isinstance(waited := node.args[0], ast.Call)
                    and isinstance(waited.func, ast.Attribute) and waited.func.attr == "wait"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "use livetable.tasks.wait_set: " + ", ".join(found)
