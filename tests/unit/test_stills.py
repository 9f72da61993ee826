"""The lobby's stills of the tables' videos (livetable/server/stills.py): one frame of a real
HLS stream, grabbed by ffmpeg only when asked for and stale, one grab at a time."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from livetable.server import stills
from livetable.server.stills import Stills, grab_frame

#: ffmpeg makes the stream and grabs its stills
pytestmark = pytest.mark.process

FFMPEG = shutil.which("ffmpeg")


@pytest.fixture(scope="module")
def playlist(tmp_path_factory: pytest.TempPathFactory) -> str:
    assert FFMPEG, "ffmpeg is installed by bin/setup's apt packages"
    out = tmp_path_factory.mktemp("hls")
    subprocess.run([FFMPEG, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc=size=640x360:rate=25", "-t", "3", "-c:v", "libx264", "-preset",
                    "ultrafast", "-g", "25", "-f", "hls", "-hls_time", "1", "-hls_list_size",
                    "0", str(out / "index.m3u8")], check=True, timeout=60)
    return str(out / "index.m3u8")


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a baseline JPEG's SOF0 marker."""
    at = data.index(b"\xff\xc0")
    height, width = int.from_bytes(data[at + 5:at + 7]), int.from_bytes(data[at + 7:at + 9])
    return width, height


async def test_a_frame_of_the_stream_is_a_jpeg_320_wide(playlist: str) -> None:
    jpeg = await grab_frame(FFMPEG, playlist)
    assert jpeg is not None and jpeg.startswith(b"\xff\xd8")
    assert jpeg_size(jpeg) == (320, 180)


async def test_no_stream_no_still(tmp_path: Path) -> None:
    assert await grab_frame(FFMPEG, str(tmp_path / "nothing.m3u8")) is None
    assert await grab_frame(None, str(tmp_path / "nothing.m3u8")) is None
    kept = Stills(FFMPEG)
    assert await kept.still("t1", str(tmp_path / "nothing.m3u8"), wait=True) is None


async def test_grabbed_once_while_fresh_and_once_at_a_time(
        playlist: str, monkeypatch: pytest.MonkeyPatch) -> None:
    grabs: list[str] = []
    release = asyncio.Event()

    async def counted(ffmpeg: str | None, url: str) -> bytes | None:
        grabs.append(url)
        await release.wait()  # held: the askers meanwhile must not start another
        return b"\xff\xd8 still " + str(len(grabs)).encode()

    monkeypatch.setattr(stills, "grab_frame", counted)
    kept = Stills(FFMPEG)
    first = [asyncio.create_task(kept.still("t1", playlist)) for _ in range(5)]
    assert await asyncio.gather(*first) == [None] * 5  # none yet, and nobody waited
    assert len(grabs) == 1
    release.set()
    shot = await kept.still("t1", playlist, wait=True)
    assert shot is not None and shot.jpeg.endswith(b"1")
    assert (await kept.still("t1", playlist)) is shot and len(grabs) == 1  # fresh: kept
    shot.taken -= stills.FRESH_SECONDS + 1  # stale: the old one is served, a grab starts
    assert (await kept.still("t1", playlist)) is shot
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(grabs) == 2
    await kept.close()
