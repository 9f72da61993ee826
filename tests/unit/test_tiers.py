"""The tiers of tests/tiers.py: a unit test is fast unless marked, a test elsewhere starts
processes, and a fast-tier test that starts a process or sleeps is told so."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path
from typing import cast

import pytest
from tiers import FAST, PROCESS, SLEEPS, SLOW, TESTS, _verdict, _watched, tier_of

#: This test starts ``true`` and sleeps a millisecond, on purpose, inside a watch of its own.
pytestmark = pytest.mark.process


class _Item:
    """What the tiers read of a pytest item: where it is and its markers."""

    def __init__(self, path: Path, *markers: str) -> None:
        self.path = path
        self.markers = set(markers)
        self.nodeid = f"{path.name}::test_x"

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def item_at(path: Path, *markers: str) -> pytest.Item:
    return cast(pytest.Item, _Item(path, *markers))


def test_a_unit_test_is_fast_unless_marked_and_the_others_start_processes() -> None:
    unit = TESTS / "unit" / "test_new.py"
    assert tier_of(item_at(unit)) == FAST
    for marker in (PROCESS, SLEEPS, SLOW):
        assert tier_of(item_at(unit, marker)) is None
    for directory in ("integration", "e2e"):
        item = item_at(TESTS / directory / "test_new.py")
        assert tier_of(item) == PROCESS


def test_a_fast_test_that_starts_a_process_or_sleeps_fails_saying_so() -> None:
    item = item_at(TESTS / "unit" / "test_new.py", FAST)
    with _watched(item) as found:
        time.sleep(0.001)
        asyncio.run(asyncio.sleep(0.001))
        asyncio.run(asyncio.sleep(0))  # a yield, not a sleep
        subprocess.run(["true"], check=True)
    assert found == ["time.sleep(0.001)", "asyncio.sleep(0.001)", "subprocess 'true'"]
    with pytest.raises(pytest.fail.Exception, match=r"started a process.*pytest\.mark\.process"):
        _verdict(item, found)
    with pytest.raises(pytest.fail.Exception, match=r"but slept: time\.sleep"):
        _verdict(item, found[:1])
    _verdict(item, [])


def test_a_thread_older_than_the_test_is_not_the_tests() -> None:
    item = item_at(TESTS / "unit" / "test_new.py", FAST)
    go, done = threading.Event(), threading.Event()

    def sleeper() -> None:
        go.wait()
        time.sleep(0.001)
        done.set()

    left_behind = threading.Thread(target=sleeper)  # as an earlier test may leave one
    left_behind.start()
    with _watched(item) as found:
        go.set()
        done.wait()
        own = threading.Thread(target=time.sleep, args=(0.002,))  # the test's own thread
        own.start()
        own.join()
    left_behind.join()
    assert found == ["time.sleep(0.002)"]


def test_a_test_outside_the_fast_tier_is_not_watched() -> None:
    item = item_at(TESTS / "unit" / "test_new.py", SLEEPS)
    with _watched(item) as found:
        time.sleep(0.001)
    assert found == []
