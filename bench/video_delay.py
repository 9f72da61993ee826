"""Glass-to-glass delay of the test stream, and what keeping the game in step with it costs.

    .venv/bin/python bench/video_delay.py [--seconds 45] [--restarts 5]

Everything runs on this machine, on loopback: the media server of deploy/media/ (nginx-rtmp
and the ffmpeg packager), the test card of ``livetable test-stream`` (960x540, 25 fps,
x264 veryfast, 1 s keyframes) pushed into it over RTMP, ``livetable serve`` with table t1's
stream, and the table page in Debian's chromium through Playwright.

What it measures:

* **glass to glass** — the test card writes its capture time into the picture (a strip of
  32 cells, livetable.cli.media); the page reads it off the <video> frame on screen (canvas)
  and compares it with the clock: the whole chain, camera to the picture in the page.
* **the delay the page measures** — ``serverNow() − playingDate`` (program-date-time), what
  the page holds reveals by; and its error: program-date-time minus the true capture time.
* **the packager's date error across restarts** — the same error, on the first segments of
  several fresh publishes (each restart dates the stream anew).
* **what the sync costs** — how long reveals are held, how late after the earliest allowed
  moment they are released, the time the delay line adds per frame, and chromium's CPU with
  the video playing against the same table without video.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    cpu_of,
    free_port,
    machine,
    percentile,
    stop_process,
    write_json,
)
from livetable.cli.media import CELL, CLOCK_BITS, MediaServer, card_command  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
LIVETABLE = ROOT / ".venv" / "bin" / "livetable"
PDT = re.compile(r"#EXT-X-PROGRAM-DATE-TIME:(\S+)\n(?:#[^\n]*\n)*(\S+\.m4s)")
READ_CLOCK = """() => {
  const v = document.querySelector('[data-testid=video-el]');
  const video = window.livetableVideo;
  if (!v || v.videoWidth < 640 || !video || !video.hls) return null;
  const c = window.__c || (window.__c = document.createElement('canvas'));
  c.width = v.videoWidth; c.height = v.videoHeight;
  const g = c.getContext('2d', { willReadFrequently: true });
  g.drawImage(v, 0, 0);
  const row = g.getImageData(0, v.videoHeight - HALF, 640, 1).data;
  let value = 0;
  for (let i = 0; i < BITS; i++) value = value * 2 + (row[(i * CELL + HALF) * 4] > 128 ? 1 : 0);
  const pd = video.hls.playingDate;
  return { now: Date.now(), clock: value, delay: video.delayMs,
           playing: pd ? pd.getTime() : null, state: video.state };
}""".replace("HALF", str(CELL // 2)).replace("BITS", str(CLOCK_BITS)).replace("CELL", str(CELL))
GATE_COST = """() => {
  const video = window.livetableVideo;
  const n = 200000, frame = { type: 'card_dealt', table: 't1', epoch: 1, seq: 1 };
  const t0 = performance.now();
  for (let i = 0; i < n; i++) video._gate('event', frame, () => {});
  return (performance.now() - t0) / n * 1e6;  // ns per frame
}"""


def mod32(a: int, b: int) -> int:
    return (a - b + 2**31) % 2**32 - 2**31


def stats(values: Sequence[float]) -> dict[str, float]:
    v = sorted(values)
    if not v:
        return {"n": 0}
    return {"n": len(v), "min": round(v[0], 1), "p50": round(percentile(v, 50), 1),
            "p90": round(percentile(v, 90), 1), "max": round(v[-1], 1),
            "mean": round(sum(v) / len(v), 1)}


def descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    text = f.read()
                parents[int(entry)] = int(text[text.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def read_clock(init: bytes, segment: bytes, width: int, height: int) -> int:
    gray = subprocess.run(["ffmpeg", "-v", "error", "-i", "-", "-frames:v", "1", "-f",
                           "rawvideo", "-pix_fmt", "gray", "-"], input=init + segment,
                          capture_output=True, check=True).stdout
    row = (height - CELL // 2) * width
    value = 0
    for i in range(CLOCK_BITS):
        value = value * 2 + (gray[row + i * CELL + CELL // 2] > 128)
    return value


def packager_date_errors(media: MediaServer, restarts: int) -> list[float]:
    """Program-date-time minus capture time of a fresh publish's first listed segment."""
    errors: list[float] = []
    for i in range(restarts):
        name = f"restart{i}"
        card = subprocess.Popen(card_command(["-f", "flv", media.publish_url(name)],
                                             width=960, height=540, seconds=8),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = media.playlist_url(name)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                time.sleep(0.5)
                try:
                    with urllib.request.urlopen(url, timeout=3) as r:
                        segments = PDT.findall(r.read().decode())
                except OSError:
                    continue
                if segments:
                    date, seg = segments[0]
                    base = url.rsplit("/", 1)[0]
                    with urllib.request.urlopen(f"{base}/init.mp4") as r:
                        init = r.read()
                    with urllib.request.urlopen(f"{base}/{seg}") as r:
                        segment = r.read()
                    dated = datetime.fromisoformat(date.replace("+0000", "+00:00"))
                    errors.append(mod32(round(dated.timestamp() * 1000) % 2**32,
                                        read_clock(init, segment, 960, 540)))
                    break
        finally:
            stop_process(card)
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--restarts", type=int, default=5)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / f"video-{stamp}.json")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="livetable-video-bench-"))
    media = MediaServer(work / "media", free_port(), free_port()).start()
    card = subprocess.Popen(card_command(["-f", "flv", media.publish_url("t1")],
                                         width=960, height=540, label="bench t1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    server = subprocess.Popen(
        [str(LIVETABLE), "serve", "--port", str(port), "--data-dir", str(work), "--tables", "2",
         "--betting-seconds", "5", "--reveal-interval", "1",
         "--stream", f"t1={media.playlist_url('t1')}"],
        stdout=(work / "server.log").open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "LIVETABLE_BETWEEN_ROUNDS": "4"})
    result: dict[str, Any] = {"machine": machine(), "seconds": args.seconds}
    try:
        time.sleep(4)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            me = os.getpid()

            def cpu_window(table: str, seconds: float) -> float:
                ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                page = ctx.new_page()
                page.goto(f"http://127.0.0.1:{port}/table.html?table={table}")
                page.wait_for_timeout(5000)
                pids = [q for q in descendants(me) if q not in (card.pid, server.pid)]
                before = cpu_of(pids)
                page.wait_for_timeout(seconds * 1000)
                used = cpu_of(pids) - before
                ctx.close()
                return round(used / seconds * 100, 1)

            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            page = ctx.new_page()
            page.goto(f"http://127.0.0.1:{port}/table.html?table=t1")
            page.wait_for_function(
                "window.livetableVideo && window.livetableVideo.state === 'playing'",
                timeout=30000)
            page.wait_for_timeout(3000)
            samples = []
            media_pids = [card.pid, *descendants(media.process.pid), media.process.pid] \
                if media.process else [card.pid]
            cpu0, t0 = cpu_of(media_pids), time.monotonic()
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                s = page.evaluate(READ_CLOCK)
                if s and s["state"] == "playing":
                    samples.append(s)
                time.sleep(0.2)
            studio_cpu = (cpu_of(media_pids) - cpu0) / (time.monotonic() - t0) * 100
            log = page.evaluate("window.livetableVideo.log")
            gate_ns = page.evaluate(GATE_COST)
            ctx.close()
            with_video = cpu_window("t1", 20)
            without = cpu_window("t2", 20)
            browser.close()
        g2g = [mod32(s["now"] % 2**32, s["clock"]) for s in samples]
        page_delay = [s["delay"] for s in samples if s["delay"] is not None]
        pdt_error = [mod32(s["playing"] % 2**32, s["clock"]) for s in samples if s["playing"]]
        playing = [e for e in log if e["state"] == "playing"]
        result.update({
            "glass_to_glass_ms": stats(g2g),
            "page_delay_ms": stats(page_delay),
            "pdt_minus_capture_on_screen_ms": stats(pdt_error),
            "held_ms": stats([e["released"] - e["at"] for e in playing]),
            "released_after_allowed_ms": stats([e["videoAt"] - e["at"] - 300 for e in playing]),
            "gate_ns_per_frame": round(gate_ns, 1),
            "chromium_cpu_percent": {"t1_with_video": with_video, "t2_without": without},
            "studio_cpu_percent": round(studio_cpu, 1),
        })
        result["packager_date_error_ms_per_restart"] = packager_date_errors(media, args.restarts)
    finally:
        stop_process(server)
        stop_process(card)
        media.stop()
    write_json(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
