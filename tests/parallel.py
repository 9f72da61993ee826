"""How the tests share out over pytest-xdist's workers (``bin/test`` passes ``-n``;
pyproject.toml sets ``--dist loadfile --no-loadscope-reorder``); tests/conftest.py plugs in
the two hooks below.

The unit of work is a test file, never less: a file's tests share its module-scoped servers
(redis-server, PostgreSQL, a live table) and some follow on from the one before, so all of a
file's tests run on one worker, in their order. The browser tests (tests/e2e/) are two units
of several files each (:data:`BROWSER_UNITS`; every other file in turn): so at most two
chromiums and two end-to-end servers run at once — the browser tests' timeouts are set for a
page that has a core to itself, more or less — while the browser tests, a third of the
suite's time, still do not all wait on one worker. The tests that time a real-time video
pipeline share one of those units (:data:`REALTIME`), so that two pipelines never compete
for the cores: short of CPU, their segments run long and the page's video falls behind.
The units go out longest first, roughly (:data:`FIRST`), so that a long one does not start
last and keep the run waiting on it.
(xdist's own ``loadgroup`` would group from markers, but it renames the tests' node ids,
which pytest 9 no longer lets a plugin do.)

Without xdist (``-n 0``, or plain ``pytest``) none of this applies: the tests run in one
process, in collection order.
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

#: The files whose tests run ffmpeg in real time (the studio's test card, the HLS packager)
#: and check what comes out by its timing (segment lengths, the picture's clock against the
#: reveals): all in the last browser unit, so that no two such pipelines compete for the
#: cores. (The first unit's files take longer, so the last has room for them.)
REALTIME = ("tests/e2e/test_video.py", "tests/integration/test_media.py")

#: The order the units go out to the workers: the browser tests (each of their units is
#: the longest of the run), then the unit tests (a few files of minutes: the benchmark
#: harness's quick run, the 10,000-round simulation, the store contract; the rest seconds),
#: then the integration files, each under two minutes, which fill in around the rest.
#: Within each, collection order.
FIRST = ("e2e", "unit", "integration")


class FileScheduling(LoadFileScheduling):
    """xdist's ``loadfile``, but the browser tests' files are dealt into
    :data:`BROWSER_UNITS` units, in turn, in the order they come, and the last of them
    takes the :data:`REALTIME` files."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self.browser_files: dict[str, int] = {}  # each browser file: its place among them

    def _split_scope(self, nodeid: str) -> str:
        file = super()._split_scope(nodeid)
        if file in REALTIME:
            return f"{BROWSER}#{BROWSER_UNITS - 1}"
        if not file.startswith(BROWSER):
            return file
        place = self.browser_files.setdefault(file, len(self.browser_files))
        return f"{BROWSER}#{place % BROWSER_UNITS}"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FileScheduling | None:
    return FileScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def _rank(item: pytest.Item) -> int:
    part = item.path.relative_to(TESTS).parts[0]
    return FIRST.index(part) if part in FIRST else len(FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Each worker collects the tests itself and xdist schedules them in the order collected
    # (all workers sort alike, so their collections agree); a serial run keeps its order.
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)
