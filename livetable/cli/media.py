"""The studio side of the video, run locally: the media server and a test card.

In production the media server is its own container (deploy/media/: Debian's nginx with
libnginx-mod-rtmp, and ffmpeg packaging each camera's stream into HLS with
EXT-X-PROGRAM-DATE-TIME). ``livetable test-stream``, the tests and the benchmark run the very
same configuration (``deploy/media/nginx.conf.template``, ``deploy/media/package``) as a
child nginx in a directory of their own, and push a test card into it with ffmpeg: what a
newcomer sees is what a studio runs, with a synthetic camera.

The test card shows a running clock and, along its bottom edge, the same clock as 32
black-or-white cells (the capture time in ms, modulo 2**32, most significant bit left), so a
program can read when the frame on screen was made: glass-to-glass delay, and how far the
packager's EXT-X-PROGRAM-DATE-TIME is from the truth (bench/video_delay.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

REPO = Path(__file__).resolve().parents[2]
MEDIA_DIR = REPO / "deploy" / "media"
RTMP_MODULE = Path("/usr/lib/nginx/modules/ngx_rtmp_module.so")
FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf")
#: Cells of the machine-readable clock: CELL pixels square, CLOCK_BITS of them.
CELL = 20
CLOCK_BITS = 32


class MediaError(RuntimeError):
    """The media server or ffmpeg cannot run here; the message says what is missing."""


def require(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None and not Path(p).exists()]
    if missing:
        raise MediaError(f"not installed: {', '.join(missing)} (bin/setup --video installs "
                         f"Debian's ffmpeg, nginx and libnginx-mod-rtmp)")


def nginx_binary() -> str:
    for candidate in ("nginx", "/usr/sbin/nginx"):
        found = shutil.which(candidate)
        if found:
            return found
    raise MediaError("not installed: nginx (bin/setup --video installs Debian's nginx and "
                     "libnginx-mod-rtmp)")


def render_config(media_dir: Path, rtmp_port: int, http_port: int,
                  publish_allow: str = "127.0.0.1") -> str:
    """deploy/media/nginx.conf.template with this machine's paths and ports, listening on
    the loopback interface only (a development or test server)."""
    template = Template((MEDIA_DIR / "nginx.conf.template").read_text())
    text = template.safe_substitute(
        MEDIA_DIR=str(media_dir), RTMP_PORT=str(rtmp_port),
        RTMP_LISTEN=f"127.0.0.1:{rtmp_port}", HTTP_LISTEN=f"127.0.0.1:{http_port}",
        PUBLISH_ALLOW=publish_allow, PACKAGER=str(MEDIA_DIR / "package"),
        RTMP_MODULE=str(RTMP_MODULE))
    if os.geteuid() == 0:
        # As root nginx would run its worker (and so the packager) as "nobody", who cannot
        # write our directory; the container runs it unprivileged instead.
        text = text.replace("daemon off;", "daemon off;\nuser root;", 1)
    return text


@dataclass
class MediaServer:
    """A child nginx-rtmp serving ``http://127.0.0.1:{http_port}/live/NAME/index.m3u8``."""

    directory: Path
    rtmp_port: int = 1935
    http_port: int = 8090
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def hls_dir(self) -> Path:
        return self.directory / "hls"

    def publish_url(self, name: str) -> str:
        return f"rtmp://127.0.0.1:{self.rtmp_port}/live/{name}"

    def playlist_url(self, name: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.http_port}/live/{name}/index.m3u8"

    def start(self, timeout: float = 10.0) -> MediaServer:
        require("ffmpeg", str(RTMP_MODULE))
        nginx = nginx_binary()
        self.directory = self.directory.resolve()  # nginx reads paths from its prefix
        for sub in ("hls", "tmp"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        conf = self.directory / "nginx.conf"
        conf.write_text(render_config(self.directory, self.rtmp_port, self.http_port))
        log = (self.directory / "nginx.log").open("ab")
        self.process = subprocess.Popen([nginx, "-p", str(self.directory), "-c", str(conf)],
                                        stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        health = f"http://127.0.0.1:{self.http_port}/healthz"
        while True:
            if self.process.poll() is not None:
                raise MediaError(f"nginx exited ({self.process.returncode}): "
                                 f"{(self.directory / 'nginx.log').read_text()[-800:]}")
            try:
                with urllib.request.urlopen(health, timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise MediaError(f"the media server did not answer {health} in {timeout} s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # nginx's master stops its worker and the packagers
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def card_filter(width: int, height: int, fps: int, label: str) -> str:
    """An ffmpeg filter graph: a moving test pattern, the label, a running clock (UTC, ms)
    and the machine-readable clock strip; output pads [v] (video) and [a] (a quiet tone).

    The frame's timestamp is set from the wall clock as it is made (RTCTIME), so both clocks
    show when the frame was made — the moment a camera would have seen it."""
    if width < CELL * CLOCK_BITS:
        raise ValueError(f"the test card needs a width of at least {CELL * CLOCK_BITS}")
    font = f"fontfile={FONT}:" if FONT.exists() else ""
    bit = f"31-floor(X/{CELL})"
    ms = "mod(floor(T*1000+0.5),4294967296)"
    safe_label = "".join(c for c in label if c.isalnum() or c in " -_")[:40]
    return (
        f"testsrc2=s={width}x{height}:r={fps},format=yuv420p,realtime,"
        f"settb=1/1000,setpts='floor(RTCTIME/1000)',split[card][raw];"
        f"[raw]crop={CELL * CLOCK_BITS}:{CELL}:0:0,"
        f"geq=lum='255*mod(floor({ms}/pow(2,{bit})),2)':cb=128:cr=128[strip];"
        f"[card]drawtext={font}fontsize={height // 10}:fontcolor=white:box=1:"
        f"boxcolor=black@0.6:boxborderw=8:x=(w-tw)/2:y=h/2-th-8:"
        f"text='%{{pts\\:gmtime\\:0\\:%H\\\\\\:%M\\\\\\:%S}}.%{{eif\\:mod(t*1000\\,1000)\\:d\\:3}}',"
        f"drawtext={font}fontsize={height // 16}:fontcolor=white:box=1:boxcolor=black@0.6:"
        f"boxborderw=6:x=(w-tw)/2:y=h/2+12:text='{safe_label}'[text];"
        f"[text][strip]overlay=x=0:y=H-{CELL},setpts=PTS-STARTPTS[v];"
        f"sine=f=660:r=48000:samples_per_frame=960,volume=0.08,arealtime[a]"
    )


H264 = ["-c:v", "libx264", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
        "-profile:v", "main", "-sc_threshold", "0"]
VP9 = ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "1",
       "-pix_fmt", "yuv420p"]


def card_command(output: list[str], *, width: int = 960, height: int = 540, fps: int = 25,
                      label: str = "livetable test card", codec: str = "h264",
                      preset: str = "veryfast", bitrate: str = "1500k",
                      seconds: float | None = None) -> list[str]:
    """ffmpeg making the test card in real time, one keyframe a second (the packager cuts
    1 s segments at keyframes), encoded with ``codec`` (h264 or vp9), into ``output`` (the
    muxer's arguments: ``["-f", "flv", URL]`` for RTMP, or an HLS muxer's)."""
    video = {"h264": [*H264, "-preset", preset], "vp9": VP9}[codec]
    audio = ["-c:a", "aac", "-b:a", "64k"] if codec == "h264" else ["-c:a", "libopus",
                                                                    "-b:a", "64k"]
    limit = ["-t", f"{seconds:g}"] if seconds else []
    return ["ffmpeg", "-hide_banner", "-loglevel", "warning", "-nostdin",
            "-filter_complex", card_filter(width, height, fps, label),
            "-map", "[v]", "-map", "[a]", *video, "-b:v", bitrate,
            "-g", str(fps), "-keyint_min", str(fps), *audio, *limit, *output]


def hls_output(directory: Path, segment_seconds: float = 1.0, list_size: int = 6,
               live: bool = True) -> list[str]:
    """The HLS muxer arguments of deploy/media/package (fMP4, program-date-time), for an
    ffmpeg that writes HLS itself (the tests: a VP9 stream cannot travel over RTMP)."""
    directory.mkdir(parents=True, exist_ok=True)
    flags = "program_date_time+independent_segments+temp_file"
    flags += "+omit_endlist+delete_segments" if live else ""
    return ["-f", "hls", "-hls_time", f"{segment_seconds:g}",
            "-hls_list_size", str(list_size if live else 0),
            "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
            "-hls_segment_filename", str(directory / "%d.m4s"),
            "-hls_flags", flags, str(directory / "index.m3u8")]
