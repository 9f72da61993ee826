"""How the tests share out over pytest-xdist's workers (``bin/test`` passes ``-n``;
pyproject.toml sets ``--dist loadfile --no-loadscope-reorder``); tests/conftest.py plugs in
the two hooks below.

The unit of work is a test file, never less: a file's tests share its module-scoped servers
(redis-server, PostgreSQL, a live table), which would otherwise start again on every worker
that ran one of them. (The tests do not depend on each other's order: pytest-randomly
shuffles them within their file.) The browser tests (tests/e2e/) are :data:`BROWSER_UNITS`
units of several files each (every other file in turn), each with its chromium and its
end-to-end server: two at a time on two cores. (With one unit the browser tests alone took
about ten minutes and the whole run waited on them. Two units were tried before, when a
page resuming after a cut missed its timeout in two runs of four; two units are what
bin/test runs now (the README has the suite's time): a browser test that misses a timeout
only beside another unit has a defect to fix, not a reason to run one at a time.) The
tests that time a real-time video pipeline share the last of those units
(:data:`REALTIME`), so that two pipelines never compete for the cores: short of CPU, their
segments run long and the page's video falls behind. The units go out longest
first, roughly (:data:`FIRST`), so that a long one does not start last and keep the run
waiting on it.
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

#: The files whose tests run ffmpeg in real time (the studio's test card, the HLS packager)
#: and check what comes out by its timing (segment lengths, the picture's clock against the
#: reveals): all in the last browser unit, so that no two such pipelines compete for the
#: cores.
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
