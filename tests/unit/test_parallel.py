"""How tests/parallel.py shares the browser files out: two units of about the same length,
the real-time video files in the last, the same units whatever order the files came in."""

from __future__ import annotations

import random

from parallel import (
    BROWSER_UNITS,
    FILE_SECONDS,
    REALTIME,
    SECONDS_A_TEST,
    TESTS,
    _rank,
    share_out,
    unit_of,
)


def browser_files() -> dict[str, int]:
    """Every browser file (and the real-time ones), with a made-up number of tests each."""
    files = sorted(f"tests/e2e/{path.name}" for path in (TESTS / "e2e").glob("test_*.py"))
    return {file: 3 for file in [*files, *REALTIME]}


def seconds(file: str) -> int:
    return FILE_SECONDS.get(file.rsplit("/", 1)[-1], SECONDS_A_TEST * 3)


def test_the_units_are_even_and_the_realtime_files_share_the_last() -> None:
    files = browser_files()
    units = share_out(files)
    assert set(units) == set(files)
    assert {units[file] for file in REALTIME} == {BROWSER_UNITS - 1}
    loads = [sum(seconds(f) for f, unit in units.items() if unit == u)
             for u in range(BROWSER_UNITS)]
    assert max(loads) - min(loads) <= max(seconds(f) for f in files), loads


def test_the_units_do_not_follow_the_order_drawn() -> None:
    files = browser_files()
    shuffled = list(files.items())
    random.Random(7).shuffle(shuffled)
    assert share_out(dict(shuffled)) == share_out(files)


def test_a_file_not_listed_counts_by_its_tests() -> None:
    files = {"tests/e2e/test_new_a.py": 100, "tests/e2e/test_new_b.py": 100,
             "tests/e2e/test_dealer_feedback.py": 1}
    units = share_out(files)
    assert units["tests/e2e/test_new_a.py"] != units["tests/e2e/test_new_b.py"]


def test_the_scale_out_files_are_one_unit_and_the_others_their_own() -> None:
    assert unit_of("tests/integration/test_scaleout_failover.py", {}) == (
        unit_of("tests/integration/test_scaleout_fanout.py", {}))
    assert unit_of("tests/integration/test_pg_failover.py", {}) == (
        "tests/integration/test_pg_failover.py")
    assert unit_of("tests/e2e/test_video.py", {"tests/e2e/test_video.py": 1}) == "tests/e2e/#1"


def test_the_units_go_out_before_the_files() -> None:
    """The browser units, then the cluster unit, then the unit files, then the integration
    ones (each longest first)."""
    class Item:
        def __init__(self, path: str) -> None:
            self.path = TESTS.parent / path

    order = ["tests/e2e/test_video.py", "tests/integration/test_scaleout_fanout.py",
             "tests/unit/test_simulation.py", "tests/unit/test_engine.py",
             "tests/integration/test_pg_failover.py"]
    shuffled = order[::-1]
    assert sorted(shuffled, key=lambda path: _rank(Item(path))) == order  # type: ignore[arg-type]
