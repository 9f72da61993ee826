"""How the tests share out over pytest-xdist's workers (``bin/test`` passes ``-n``;
pyproject.toml sets ``--dist loadfile --no-loadscope-reorder``); tests/conftest.py plugs in
the two hooks below.

The unit of work is a test file, never less: a file's tests share its module-scoped servers
(redis-server, PostgreSQL, a live table) and some follow on from the one before, so all of a
file's tests run on one worker, in their order. The browser tests (tests/e2e/) are one unit:
one chromium and one end-to-end server at a time, as in a serial run (a second would share
the two cores with the first and with the integration tests' servers, and the browser tests'
timeouts are set for one). Most of the suite's time is a few long units, so the longest go
out first (:data:`FIRST`): the worker that takes the browser tests starts on them at once
rather than finding them at the end of the queue. (xdist's own ``loadgroup`` would group
from markers, but it renames the tests' node ids, which pytest 9 no longer lets a plugin
do.)

Without xdist (``-n 0``, or plain ``pytest``) none of this applies: the tests run in one
process, in collection order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

TESTS = Path(__file__).resolve().parent

#: The browser tests, one unit of work under xdist.
BROWSER = "tests/e2e/"

#: The order the units go out to the workers: the browser tests (the longest unit), the
#: integration files (each waits on real rounds, several for a minute or more), then the
#: unit tests, short enough to fill in around the rest. Within each, collection order.
FIRST = ("e2e", "integration", "unit")


class FileScheduling(LoadFileScheduling):
    """xdist's ``loadfile``, but the browser tests are one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return BROWSER if nodeid.startswith(BROWSER) else super()._split_scope(nodeid)


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
