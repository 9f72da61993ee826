"""A still of each table's live video, for the lobby: one frame grabbed from the table's
HLS stream by ffmpeg, kept in memory, served as a JPEG (``GET /api/tables/{id}/still.jpg``).

Why lazily, and why here. The video stays outside the game's processes (docs/video.md):
livetable only knows where a table's playlist is. A still costs one ffmpeg run (a playlist
read, a segment fetched, one frame decoded and scaled: 0.06 s of CPU for a 640x360 H.264
stream read from disk, measured on this project's 2-core machine, 3 runs; over HTTP the
segment's transfer adds its wait, not CPU),
so it is grabbed only when a page asks for it and the one kept is older than
:data:`FRESH_SECONDS` — no lobby open, no ffmpeg — and at most one grab per table runs at a
time (the askers meanwhile get the previous still). A grab that fails or takes longer than
:data:`GRAB_TIMEOUT` leaves the previous still in place; a table without a stream, or
without a still yet, is answered 404 and the page draws the table instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from dataclasses import dataclass

log = logging.getLogger("livetable.stills")

#: A still older than this is grabbed again when asked for.
FRESH_SECONDS = 10.0
#: The longest one grab may take (the playlist, a segment, a frame).
GRAB_TIMEOUT = 8.0
#: A still's width in pixels (its height keeps the picture's proportions).
WIDTH = 320


@dataclass
class Still:
    jpeg: bytes
    taken: float  # time.monotonic()


class Stills:
    """The latest still of each table (see the module docstring)."""

    def __init__(self, ffmpeg: str | None = None) -> None:
        self.ffmpeg = ffmpeg or shutil.which("ffmpeg")
        self._stills: dict[str, Still] = {}
        self._grabs: dict[str, asyncio.Task[None]] = {}

    async def still(self, table: str, playlist: str, *, wait: bool = False) -> Still | None:
        """The table's latest still (None if there is none yet); starts a grab when it is
        missing or stale. With ``wait``, a missing still is waited for (the first asker)."""
        kept = self._stills.get(table)
        if kept is None or time.monotonic() - kept.taken > FRESH_SECONDS:
            grab = self._grabs.get(table)
            if grab is None or grab.done():
                grab = asyncio.create_task(self._grab(table, playlist), name=f"still-{table}")
                self._grabs[table] = grab
            if kept is None and wait:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(grab), GRAB_TIMEOUT + 1)
                kept = self._stills.get(table)
        return kept

    async def _grab(self, table: str, playlist: str) -> None:
        jpeg = await grab_frame(self.ffmpeg, playlist)
        if jpeg is not None:
            self._stills[table] = Still(jpeg, time.monotonic())

    async def close(self) -> None:
        for grab in self._grabs.values():
            grab.cancel()
        for grab in self._grabs.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await grab


async def grab_frame(ffmpeg: str | None, playlist: str) -> bytes | None:
    """One frame of ``playlist`` (an HLS URL, or a file path) as a JPEG ``WIDTH`` pixels
    wide, or None (no ffmpeg, a stream that does not answer in time, no picture)."""
    if ffmpeg is None:
        return None
    proc = await asyncio.create_subprocess_exec(
        ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin",
        "-protocol_whitelist", "file,http,https,tcp,tls,crypto",
        "-live_start_index", "-1", "-i", playlist,
        "-frames:v", "1", "-vf", f"scale={WIDTH}:-2", "-q:v", "6", "-f", "image2pipe",
        "-vcodec", "mjpeg", "pipe:1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), GRAB_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        log.info("still of %s: no frame in %.0f s", playlist, GRAB_TIMEOUT)
        return None
    if proc.returncode != 0 or not out.startswith(b"\xff\xd8"):
        log.info("still of %s: ffmpeg said %s", playlist, err.decode(errors="replace")[-200:])
        return None
    return out
