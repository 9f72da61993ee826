"""How the tests share out over pytest-xdist's workers (``bin/test`` passes ``-n``;
pyproject.toml sets ``--dist loadfile --no-loadscope-reorder``); tests/conftest.py plugs in
the two hooks below.

The unit of work is a test file, never less: a file's tests share its module-scoped servers
(redis-server, PostgreSQL, a live table), which would otherwise start again on every worker
that ran one of them. (The tests do not depend on each other's order: pytest-randomly
shuffles them within their file.) The browser tests (tests/e2e/) are :data:`BROWSER_UNITS`
units of several files each, each with its chromium and its end-to-end server: two at a
time on two cores. (With one unit the browser tests alone took about ten minutes and the
whole run waited on them. A browser test that misses a timeout only beside another unit
has a defect to fix, not a reason to run one at a time.) The files are shared out by the
time each took in a full run (:data:`FILE_SECONDS`), longest first, each to the unit
with the least so far: the same units whatever order pytest-randomly drew, and of about
the same length, so that neither keeps the run waiting (dealt in turn, in the drawn order,
one unit took 550 s and the other 360). The tests that time a real-time video pipeline
share the last of those units (:data:`REALTIME`), so that two pipelines never compete for
the cores: short of CPU, their segments run long and the page's video falls behind. The
scale-out files, each with its cluster of processes, are one unit too (:data:`CLUSTER`),
run one after another. The browser units go out first, then the cluster unit, then the
unit files and then the integration ones, each longest first (:data:`FIRST`), to whichever
worker is free.
(xdist's own ``loadgroup`` would group from markers, but it renames the tests' node ids,
which pytest 9 no longer lets a plugin do.)

Without xdist (``-n 0``, or plain ``pytest``) none of this applies: the tests run in one
process, in collection order (shuffled by pytest-randomly, unless ``-p no:randomly``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

TESTS = Path(__file__).resolve().parent

#: Where the browser tests are, and how many units of work they make under xdist.
BROWSER = "tests/e2e/"
BROWSER_UNITS = 2

#: Seconds each file took in a full run, by name (a timeline of each test's start and end,
#: bin/test, 2026-12-06; the browser files' on three workers, the others' on four), the
#: files of ten seconds or more: the browser units are balanced by it (:func:`share_out`),
#: and the other files go out longest first (:data:`FIRST`), so that no long one starts
#: last and keeps the run waiting. A browser file not listed counts :data:`SECONDS_A_TEST`
#: a test, any other nothing: write its figure here once it has run (an old figure only
#: makes the run's end less even, never a test fail).
FILE_SECONDS = {
    # the browser files (and test_media.py, which shares the last browser unit)
    "test_video.py": 112,
    "test_defects_found_playing.py": 98,
    "test_player.py": 85,
    "test_live_table.py": 72,
    "test_player_table.py": 67,
    "test_video_results.py": 55,
    "test_atmosphere.py": 42,
    "test_autoplay.py": 39,
    "test_screenshots.py": 35,
    "test_operator_player.py": 35,
    "test_dealer.py": 32,
    "test_tipping.py": 32,
    "test_operator_launch.py": 31,
    "test_verify_shoe.py": 30,
    "test_dealer_studio.py": 22,
    "test_rules_page.py": 22,
    "test_table_chat.py": 22,
    "test_many_tables.py": 19,
    "test_reality_check.py": 14,
    "test_table_history.py": 13,
    "test_chat_over_video.py": 9,
    "test_operator_chips.py": 8,
    "test_bet_tools.py": 7,
    "test_round_news.py": 6,
    "test_dealer_feedback.py": 5,
    "test_media.py": 6,
    # the others
    "test_simulation.py": 90,
    "test_operator_wallet.py": 87,
    "test_bench_quick.py": 75,
    "test_store_contract.py": 54,
    "test_operator_sessions.py": 41,
    "test_documented_commands.py": 41,
    "test_server_restart.py": 30,
    "test_pg_simulation.py": 29,
    "test_scaleout_redis_restart.py": 29,
    "test_restore_seamless.py": 28,
    "test_scaleout_failover.py": 28,
    "test_security_server.py": 27,
    "test_pg_contract.py": 25,
    "test_restore_backup.py": 24,
    "test_pg_failover.py": 24,
    "test_scaleout_postgres.py": 23,
    "test_pg_replication.py": 20,
    "test_ledger_watch.py": 18,
    "test_scaleout_gateway_loss.py": 18,
    "test_server_frames.py": 16,
    "test_sqlite_writer_process.py": 14,
    "test_deploy_redis_acl.py": 13,
    "test_scaleout_watchdog.py": 13,
    "test_fair_shoe_server.py": 12,
    "test_control_frame_floods.py": 11,
    "test_runner_store_failures.py": 11,
    "test_scaleout_fanout.py": 11,
    "test_secrets_in_logs.py": 10,
    "test_server_http.py": 10,
}
SECONDS_A_TEST = 6

#: The files whose tests each run a cluster (redis-server, PostgreSQL with its standby,
#: engines and gateways, as processes): one unit, its files one after another, so that no
#: two clusters compete for the cores. (On four workers, four such files once ran at once
#: at the run's end, and two of their hellos failed: one past its 5 s, one a race of the
#: rig that the load widened.)
CLUSTER = "tests/integration/test_scaleout_"

#: The files whose tests run ffmpeg in real time (the studio's test card, the HLS packager)
#: and check what comes out by its timing (segment lengths, the picture's clock against the
#: reveals): all in the last browser unit, so that no two such pipelines compete for the
#: cores.
REALTIME = ("tests/e2e/test_video.py", "tests/integration/test_media.py")

#: The order the work goes out to the workers: the browser units (each is the longest of
#: the run), then the unit files, then the integration files, each longest first
#: (:data:`FILE_SECONDS`). The unit files before the integration ones: a fast-tier test is
#: failed if any thread sleeps while it runs (tests/tiers.py), and a thread an earlier
#: integration test left behind once slept in a unit test run after it (1, 2, 4, 8, 16 ms:
#: the steps of subprocess's ``wait`` with a timeout).
FIRST = ("e2e", "unit", "integration")


def unit_of(file: str, browser_units: dict[str, int]) -> str:
    """The unit of work ``file`` belongs to: its browser unit, the cluster unit
    (:data:`CLUSTER`), or the file itself."""
    unit = browser_units.get(file)
    if unit is not None:
        return f"{BROWSER}#{unit}"
    return f"{CLUSTER}#" if file.startswith(CLUSTER) else file


def share_out(tests: dict[str, int]) -> dict[str, int]:
    """Each browser file's unit, given the files and how many tests each has: longest first
    (:data:`FILE_SECONDS`), each to the unit with the fewest seconds so far, the
    :data:`REALTIME` files' unit starting with theirs."""

    def seconds(file: str) -> int:
        return FILE_SECONDS.get(Path(file).name, SECONDS_A_TEST * tests[file])

    loads = [0] * BROWSER_UNITS
    units = {}
    for file in REALTIME:
        if file in tests:
            units[file] = BROWSER_UNITS - 1
            loads[-1] += seconds(file)
    for file in sorted(set(tests) - set(REALTIME), key=lambda f: (-seconds(f), f)):
        unit = loads.index(min(loads))
        units[file] = unit
        loads[unit] += seconds(file)
    return units


class FileScheduling(LoadFileScheduling):
    """xdist's ``loadfile``, but the browser tests' files (and the :data:`REALTIME` ones)
    are shared out into :data:`BROWSER_UNITS` units by :func:`share_out`."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.browser_units: dict[str, int] = {}  # each browser file: its unit

    def schedule(self) -> None:
        if self.collection is None and self.registered_collections:
            tests: dict[str, int] = {}
            for nodeid in next(iter(self.registered_collections.values())):
                file = super()._split_scope(nodeid)
                if file.startswith(BROWSER) or file in REALTIME:
                    tests[file] = tests.get(file, 0) + 1
            self.browser_units = share_out(tests)
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(super()._split_scope(nodeid), self.browser_units)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FileScheduling | None:
    return FileScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def _rank(item: pytest.Item) -> tuple[int, int]:
    """The browser units first, then the cluster unit (both the run's longest), then the
    rest (:data:`FIRST`)."""
    part = item.path.relative_to(TESTS).parts[0]
    if str(item.path).startswith(str(TESTS.parent / CLUSTER)):
        return 1, 0
    group = FIRST.index(part) if part in FIRST else len(FIRST)
    return (0 if group == 0 else group + 1), -FILE_SECONDS.get(item.path.name, 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Each worker collects the tests itself and xdist schedules them in the order collected
    # (all workers sort alike, so their collections agree); a serial run keeps its order.
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)
