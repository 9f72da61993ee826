"""The marker of what a table announced (livetable/host/restores.py): what it answers,
and that it stays whole however it is cut short."""

from __future__ import annotations

import json
from pathlib import Path

from livetable.host.restores import Announced, acknowledge, unacknowledged


def test_a_store_behind_what_was_announced_is_named_and_nothing_else(tmp_path: Path) -> None:
    marker = Announced(tmp_path / "data" / "livetable.sqlite3")
    marker.open("store-a")  # the data directory is made (PostgreSQL makes no file there)
    marker.record("t1", 100, 40, 3)
    marker.close()
    again = Announced(tmp_path / "data" / "livetable.sqlite3")
    again.open("store-a")
    assert again.behind("t1", 100, 39) == (100, 40, 3)
    assert again.behind("t1", 99, 900) == (100, 40, 3)  # an older epoch is older
    assert again.behind("t1", 100, 40) is None and again.behind("t1", 101, 1) is None
    assert again.behind("t2", 1, 1) is None  # never announced here
    other = Announced(tmp_path / "data" / "livetable.sqlite3")
    other.open("store-b")  # another store has its own history
    assert other.behind("t1", 1, 1) is None


def test_the_marker_is_whole_after_a_shorter_write(tmp_path: Path) -> None:
    """Written in place: a shorter marker is padded over the longer one, never cut."""
    marker = Announced(tmp_path / "livetable.sqlite3")
    marker.open("s")
    marker.record("t1", 1_796_000_000_000, 123_456_789, 12)
    marker.record("t1", 5, 6, 7)
    marker.close()
    text = (tmp_path / "livetable-announced.json").read_text()
    assert json.loads(text) == {"store": "s", "tables": {"t1": [5, 6, 7]}}


def test_reports_wait_until_acknowledged(tmp_path: Path) -> None:
    marker = Announced(tmp_path / "livetable.sqlite3")
    marker.report("t1", "restored: shoe t1.1 retired")
    assert marker.unacknowledged() == {"t1": "restored: shoe t1.1 retired"}
    assert acknowledge(marker.reports) and unacknowledged(marker.reports) == {}
    assert (marker.reports / "acknowledged").is_dir()
