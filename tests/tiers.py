"""The test tiers: which tests ``bin/test --fast`` runs, and a check that they deserve it.

A test is in the **fast** tier (marker ``fast``, given here at collection) when it lives in
``tests/unit/`` and carries none of the markers that say it waits on something real:

* ``process`` — it starts a process (redis-server, PostgreSQL, chromium, ffmpeg, a
  ``multiprocessing`` child, a subprocess of the CLI). Every test in ``tests/integration/``
  and ``tests/e2e/`` gets it here, by its directory;
* ``sleeps`` — it waits on the wall clock (``time.sleep`` or ``asyncio.sleep`` with a delay
  above zero, in the test or in the code it drives), so its time is not its CPU's;
* ``slow`` — minutes of CPU (the 10,000-round simulation); ``bin/test`` runs it.

So a new test file in ``tests/unit/`` is fast unless marked (``pytestmark =
pytest.mark.process`` below the module's imports, or the marker on one test), and a new file
in ``tests/integration/`` or ``tests/e2e/`` never is. Nothing is listed by file name
(tests/README.md).

The marking is checked, cheaply: while a fast-tier test runs (its fixtures too), starting a
process (:func:`subprocess.Popen`, :func:`os.fork`, ``os.posix_spawn``, a
``multiprocessing`` process) or a sleep above zero seconds is recorded, and the test then
fails with what it did and how to mark it. ``asyncio.sleep(0)`` — a yield to the loop — is
not a sleep. The check sees calls through the modules' attributes (``time.sleep``,
``asyncio.sleep``), not a name imported beforehand with ``from time import sleep``. It
counts what the test's own threads do — the one it runs in and any started while it runs
— not a thread that was running before it began: a thread an earlier test left behind
(one waiting on a process it stopped: subprocess's ``wait`` sleeps 1, 2, 4 … ms) once
failed a unit test that ran after it.
"""

from __future__ import annotations

import asyncio
import multiprocessing.process
import os
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent

FAST = "fast"
PROCESS = "process"
SLEEPS = "sleeps"
SLOW = "slow"
#: The directories whose every test starts processes (servers, browsers).
PROCESS_DIRS = ("integration", "e2e")
#: The directory of the fast tier's candidates.
UNIT_DIR = "unit"

_NOT_FAST = (PROCESS, SLEEPS, SLOW)
#: The running fast-tier test's findings (one list for all its threads), or None.
_watching: list[str] | None = None
#: The threads that were running when that test began, but for its own: not the test's.
#: (Thread objects, not idents: a thread started later may be given a gone one's ident.)
_elders: frozenset[threading.Thread] = frozenset()


def tier_of(item: pytest.Item) -> str | None:
    """The marker this module gives ``item``: ``process`` by directory, ``fast`` for an
    unmarked unit test, else none."""
    try:
        part = item.path.relative_to(TESTS).parts[0]
    except ValueError:
        return None
    if part in PROCESS_DIRS:
        return PROCESS
    if part == UNIT_DIR and not any(item.get_closest_marker(m) for m in _NOT_FAST):
        return FAST
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: the markers are given before ``-m fast`` deselects by them
    for item in items:
        tier = tier_of(item)
        if tier is not None:
            item.add_marker(tier)


def _note(what: str) -> None:
    if _watching is not None and threading.current_thread() not in _elders:
        _watching.append(what)


def _sleep_watched(original: Callable[..., Any]) -> Callable[..., Any]:
    def sleep(seconds: float) -> None:
        if seconds > 0:
            _note(f"time.sleep({seconds})")
        original(seconds)

    return sleep


def _asleep_watched(original: Callable[..., Any]) -> Callable[..., Any]:
    async def sleep(delay: float, result: Any = None) -> Any:
        if delay > 0:
            _note(f"asyncio.sleep({delay})")
        return await original(delay, result)

    return sleep


def _spawn_watched(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def spawn(*args: Any, **kwargs: Any) -> Any:
        _note(f"{name}{_what(args)}")
        return original(*args, **kwargs)

    return spawn


def _what(args: tuple[Any, ...]) -> str:
    for arg in args:
        if isinstance(arg, (list, tuple)) and arg:
            return f" {' '.join(str(a) for a in arg)[:120]!r}"
    return "()"


_PATCHED = False


def _patch_once() -> None:
    """Wrap the calls that start a process or sleep; the wrappers note them only while a
    fast-tier test runs (:data:`_watching`), so the rest of the run is unchanged."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    time.sleep = _sleep_watched(time.sleep)
    asyncio.sleep = asyncio.tasks.sleep = _asleep_watched(asyncio.sleep)
    popen = subprocess.Popen
    popen._execute_child = _spawn_watched("subprocess", popen._execute_child)  # type: ignore[attr-defined]  # CPython's private spawn step, under every Popen
    os.fork = _spawn_watched("os.fork", os.fork)
    os.posix_spawn = _spawn_watched("os.posix_spawn", os.posix_spawn)
    os.posix_spawnp = _spawn_watched("os.posix_spawnp", os.posix_spawnp)
    base = multiprocessing.process.BaseProcess
    base.start = _spawn_watched("multiprocessing", base.start)  # type: ignore[method-assign]  # the same method, noted


@contextmanager
def _watched(item: pytest.Item) -> Iterator[list[str]]:
    global _watching, _elders
    if item.get_closest_marker(FAST) is None:
        yield []
        return
    _patch_once()
    found: list[str] = []
    me = threading.current_thread()
    elders = frozenset(t for t in threading.enumerate() if t is not me)
    outer = _watching, _elders
    _watching, _elders = found, elders
    try:
        yield found
    finally:
        _watching, _elders = outer


def _verdict(item: pytest.Item, found: list[str]) -> None:
    if found:
        seen = sorted(set(found))
        pytest.fail(
            f"{item.nodeid} is in the fast tier (tests/tiers.py) but "
            f"{'started a process' if any('sleep' not in f for f in seen) else 'slept'}: "
            f"{', '.join(seen[:5])}. Mark it @pytest.mark.process or @pytest.mark.sleeps "
            "(pytestmark = ... for a whole module), or move it to tests/integration/.",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _watched(item) as found:
        result = yield
    item.stash[_FOUND] = found
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _watched(item) as found:
        result = yield
    _verdict(item, item.stash.get(_FOUND, []) + found)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    with _watched(item) as found:
        result = yield
    _verdict(item, found)
    return result


_FOUND = pytest.StashKey[list[str]]()
