"""The studio ingest of deploy/media/, run for real: a test card over RTMP into Debian's nginx
with libnginx-mod-rtmp, packaged by ffmpeg into fMP4 HLS with EXT-X-PROGRAM-DATE-TIME."""

from __future__ import annotations

import itertools
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from procutil import free_port, stop

from livetable.cli.media import CELL, CLOCK_BITS, MEDIA_DIR, MediaServer, card_command

PDT = re.compile(r"#EXT-X-PROGRAM-DATE-TIME:(\S+)\n(?:#[^\n]*\n)*(\S+\.m4s)")


@pytest.fixture
def media(tmp_path: Path) -> Iterator[MediaServer]:
    server = MediaServer(tmp_path / "media", free_port(), free_port()).start()
    try:
        yield server
    finally:
        server.stop()


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return bytes(answer.read())


def read_clock(init: bytes, segment: bytes, width: int, height: int) -> int:
    """The capture time (ms mod 2**32) of a segment's first frame, from the test card's
    clock strip."""
    gray = subprocess.run(["ffmpeg", "-v", "error", "-i", "-", "-frames:v", "1", "-f",
                           "rawvideo", "-pix_fmt", "gray", "-"], input=init + segment,
                          capture_output=True, check=True).stdout
    row = (height - CELL // 2) * width
    value = 0
    for i in range(CLOCK_BITS):
        value = value * 2 + (gray[row + i * CELL + CELL // 2] > 128)
    return value


def test_rtmp_in_low_latency_hls_out(media: MediaServer) -> None:
    width, height = 640, 360
    card = subprocess.Popen(
        card_command(["-f", "flv", media.publish_url("t1")], width=width, height=height,
                          preset="ultrafast", bitrate="600k", seconds=20),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = media.playlist_url("t1")
        deadline = time.monotonic() + 20
        playlist = ""
        while len(PDT.findall(playlist)) < 3:
            assert time.monotonic() < deadline, f"no playlist of 3 segments: {playlist!r}"
            time.sleep(0.3)
            try:
                playlist = fetch(url).decode()
            except OSError:
                continue
        received = time.time()
    finally:
        stop(card)

    assert playlist.startswith("#EXTM3U")
    assert "#EXT-X-ENDLIST" not in playlist  # live
    assert '#EXT-X-MAP:URI="init.mp4"' in playlist  # fMP4
    assert "#EXT-X-TARGETDURATION:1\n" in playlist  # one-second segments: low latency
    segments = PDT.findall(playlist)
    dates = [datetime.fromisoformat(d.replace("+0000", "+00:00")).timestamp()
             for d, _ in segments]
    # dated on the wall clock, one second apart, the newest a few seconds old at most
    assert all(abs(b - a - 1) < 0.2 for a, b in itertools.pairwise(dates))
    assert -1 < received - dates[-1] < 10
    init = fetch(url.replace("index.m3u8", "init.mp4"))
    name = segments[-1][1]
    segment = fetch(url.replace("index.m3u8", name))
    assert init[4:8] == b"ftyp" and segment[4:8] in (b"styp", b"moof")
    # the card's clock is readable through the whole chain, and its time is near the date
    # the packager gave the segment (their difference is measured in docs/benchmarks.md)
    captured = read_clock(init, segment, width, height)
    dated = round(dates[-1] * 1000) % 2**CLOCK_BITS
    assert abs(captured - dated) < 3_000
    # the segments are served with the headers a page on another origin needs
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert "no-cache" in answer.headers["Cache-Control"]
        assert answer.headers["Content-Type"] == "application/vnd.apple.mpegurl"


@pytest.mark.parametrize("name", ["../escape", "a/b", "", "t1;rm", "t 1"])
def test_the_packager_refuses_a_stream_name_that_is_not_a_table_id(
        tmp_path: Path, name: str) -> None:
    # nginx-rtmp passes the publisher's stream key to the packager, which makes a directory
    # of it: a key like ../escape must not write outside the HLS root.
    done = subprocess.run([str(MEDIA_DIR / "package"), name, str(tmp_path / "hls"), "1"],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert "refusing stream name" in done.stderr
    assert not (tmp_path / "hls").exists() and not (tmp_path / "escape").exists()


def test_the_container_entrypoint_makes_a_configuration_nginx_accepts(tmp_path: Path) -> None:
    # deploy/media/Dockerfile runs this entrypoint with its environment; the same template
    # as above, filled in by envsubst instead of livetable.cli.media.
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "MEDIA_DIR": str(tmp_path),
           "MEDIA_TEMPLATE": str(MEDIA_DIR / "nginx.conf.template"), "RTMP_PORT": "1935",
           "RTMP_LISTEN": f"127.0.0.1:{free_port()}", "HTTP_LISTEN": f"127.0.0.1:{free_port()}",
           "PUBLISH_ALLOW": "10.0.0.0/8", "PACKAGER": str(MEDIA_DIR / "package"),
           "RTMP_MODULE": "/usr/lib/nginx/modules/ngx_rtmp_module.so"}
    done = subprocess.run([str(MEDIA_DIR / "entrypoint"), "-t"], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr
    conf = (tmp_path / "nginx.conf").read_text()
    assert "allow publish 10.0.0.0/8;" in conf and "exec_push " + env["PACKAGER"] + " $name" in conf
    assert "${" not in conf  # every placeholder filled in
