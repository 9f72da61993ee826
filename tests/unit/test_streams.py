"""A table's live video in its configuration and its snapshot.

``--stream TABLE=URL`` (repeatable) or ``LIVETABLE_STREAMS="t1=URL,t2=URL"`` gives a table
a video; its snapshot then carries ``stream: {hls: URL}``, else ``stream: null``. The video
is configuration, not history: a restart with another setting (or none) shows that one.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from livetable import protocol as p
from livetable.bus import MemoryBus, TableBatch
from livetable.cli import build_parser, main
from livetable.cli.arguments import UsageError, settings_of
from livetable.config import Settings, StreamError, load_settings, parse_streams
from livetable.host.runner import TableRunner
from livetable.store import SQLiteStore

URL = "https://live.example.com/live/t1/index.m3u8"


def test_streams_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVETABLE_STREAMS", f"t1={URL}, t2=/live/t2/index.m3u8,")
    monkeypatch.setenv("LIVETABLE_TABLES", "2")
    assert load_settings().streams == {"t1": URL, "t2": "/live/t2/index.m3u8"}
    monkeypatch.delenv("LIVETABLE_STREAMS")
    assert load_settings().streams == {}
    assert Settings().streams == {}


@pytest.mark.parametrize(("entry", "says"), [
    ("t1", "TABLE=URL"),
    ("=http://x/a.m3u8", "TABLE=URL"),
    ("t1=", "TABLE=URL"),
    ("t1=ftp://x/a.m3u8", "must start with"),
    ("t1=live/t1.m3u8", "must start with"),
    ("t1=//evil.example/a.m3u8", "must start with"),
    ("t1=javascript:alert(1)", "must start with"),
    ('t1=/live/a".m3u8', "a space, quote"),
])
def test_a_bad_stream_says_what_is_wrong(entry: str, says: str) -> None:
    with pytest.raises(StreamError, match=says):
        parse_streams([entry])


def test_two_urls_for_one_table_are_refused() -> None:
    with pytest.raises(StreamError, match="two streams for table 't1'"):
        parse_streams(["t1=/a.m3u8", "t1=/b.m3u8"])


def test_flags_replace_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    def settings(*flags: str) -> Settings:
        return settings_of(build_parser().parse_args(["serve", "--tables", "2", *flags]))

    monkeypatch.setenv("LIVETABLE_STREAMS", "t1=/env.m3u8")
    assert settings("--stream", "t1=/flag.m3u8", "--stream", "t2=/t2.m3u8").streams == {
        "t1": "/flag.m3u8", "t2": "/t2.m3u8"}
    with pytest.raises(UsageError, match=r"^--stream: a stream is TABLE=URL"):
        settings("--stream", "nope")
    monkeypatch.setenv("LIVETABLE_STREAMS", "t1")
    with pytest.raises(UsageError, match=r"^LIVETABLE_STREAMS: a stream is TABLE=URL"):
        settings()  # a bad environment: a usage error too


def test_serve_refuses_a_stream_for_an_unknown_table(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["serve", "--data-dir", str(tmp_path), "--tables", "2",
                 "--stream", "t1=/live/t1/index.m3u8", "--stream", "t9=/live/t9/index.m3u8"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "livetable serve: --stream for t9: no such table (tables: t1,t2)"


async def _snapshot_of(store: SQLiteStore, stream: p.StreamView | None) -> dict[str, object]:
    bus = MemoryBus()
    batches: list[TableBatch] = []
    bus.subscribe(batches.append)
    runner = TableRunner("t1", store, bus, mode="manual", stream=stream)
    await runner.start()
    await runner.stop()
    snapshot: dict[str, object] = msgspec.json.decode(batches[-1].snapshot)
    return snapshot


async def test_the_snapshot_carries_the_stream_of_this_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "db.sqlite3")
    try:
        first = await _snapshot_of(store, p.StreamView(hls=URL))
        assert first["stream"] == {"hls": URL}
        # restarted without --stream: the stored state must not bring the old video back
        assert (await _snapshot_of(store, None))["stream"] is None
        # and with another one: that one
        again = await _snapshot_of(store, p.StreamView(hls="/live/t1/index.m3u8"))
        assert again["stream"] == {"hls": "/live/t1/index.m3u8"}
    finally:
        await store.close()
