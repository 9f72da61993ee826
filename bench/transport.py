"""Choose the websocket transport by measurement: livetable beside the same small app on
three transports, side by side in one run.

    .venv/bin/python -m bench.transport [--viewers 2000] [--fanout-viewers 3000]
        [--window 10] [--repeat 2] [--kinds livetable,uvicorn,websockets,picows]
        [--storm 5000] [--no-pin]

Kinds: ``livetable`` is ``livetable serve`` itself with its game running
(``--betting-seconds 1 --reveal-interval 0.1``, auto mode, 0.5 s between rounds), on
uvicorn's websocket protocol; ``livetable-picows`` the same on picows (``--ws-transport
picows``);
``uvicorn``, ``websockets`` and ``picows`` are bench/transport_servers.py's one small app
(hello → a livetable-sized welcome; each event framed once, the same bytes written to every
socket) on each transport.
livetable's figures minus ``uvicorn``'s are what the gateway costs; ``uvicorn``'s against
the other two are what the transport does.

For each kind, in turn (the order reversed on every other repeat, so that drift on a shared
machine does not favour one):

* **handshake** — ``--viewers`` viewers connect (TCP, upgrade, ``hello``, ``welcome``) from
  two load-generator processes: the server's CPU over the burst ÷ the viewers;
* **memory per idle viewer** — the server's RSS with them open and idle − before, ÷ them
  (``/proc``, no ``gc.collect`` in the server: the same for every kind);
* **CPU per delivered frame** — ``--fanout-viewers`` viewers; over ``--window`` seconds the
  server's CPU ÷ the table events the clients received (livetable: the game's own frames;
  the others: a 230-byte event at the rate the game sent in this run's livetable window,
  or 20 a second before it is known).

The server's main process is pinned to core 0 and the load generator's processes to core 1
(``--no-pin`` to leave them free): its CPU is then its own, though the kernel's loopback work
for a socket is charged to whichever side runs it. livetable's SQLite writer process is
reported apart (``writer_cpu_s``): it is the game's, not the transport's.

Then ``--storm`` viewers of livetable's bench server reconnect at once, resuming
(``bench.scenarios.reconnect_storm``; two load-generator processes, nothing pinned: it is
the whole system's recovery): all back in step, gaps, duplicates. Results: a JSON line per
point on stdout, and all of them in bench/results/transport-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    LOADGEN_CORE,
    SERVER_CORE,
    ServerProcess,
    cpu_seconds,
    free_port,
    loadavg,
    pin,
    process_tree,
    raise_nofile,
    rss_bytes,
    wait_port,
    write_json,
)
from bench.loadgen import LoadGen
from bench.scenarios import _env_without_livetable, _fresh, reconnect_storm

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
#: Rounds back to back (0.5 s between them, not 4 s), so the window always holds a game.
GAME_ENV = {"LIVETABLE_BETWEEN_ROUNDS": "0.5"}
#: livetable's kinds: its websocket transport (``--ws-transport``) in each.
TRANSPORTS = {"livetable": "uvicorn", "livetable-picows": "picows"}


class Server:
    """One kind's server process, pinned (or not), with what the bench asks of it."""

    def __init__(self, kind: str, work: Path, pinned: bool) -> None:
        self.kind = kind
        self.port = free_port()
        data = _fresh(work / f"data-{kind}")
        self.control: ServerProcess | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if kind.startswith("livetable"):
            argv = [PYTHON, "-m", "livetable.cli", "serve", "--port", str(self.port),
                    "--data-dir", str(data), "--log-level", "warning",
                    "--betting-seconds", "1", "--reveal-interval", "0.1"]
            env = {**_env_without_livetable(), "LIVETABLE_CONNECTIONS_PER_ADDRESS": "0",
                   "LIVETABLE_WS_TRANSPORT": TRANSPORTS[kind], **GAME_ENV}
            log = (work / f"serve-{kind}.log").open("ab")
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=raise_nofile)
            wait_port(self.port, timeout=30)
            time.sleep(1.0)  # the writer process is up and the first round under way
        else:
            self.control = ServerProcess(
                [PYTHON, "-m", "bench.fanout_server", "--kind", kind, "--port", str(self.port)],
                log=work / f"server-{kind}.log")
        if pinned:
            pin(process_tree(self.pid), SERVER_CORE)

    @property
    def pid(self) -> int:
        if self.proc is not None:
            return self.proc.pid
        assert self.control is not None
        return self.control.pid

    def cpu(self) -> tuple[float, float]:
        """(the main process's CPU seconds, its children's: livetable's SQLite writer)."""
        children = [p for p in process_tree(self.pid) if p != self.pid]
        return cpu_seconds(self.pid), sum(cpu_seconds(p) for p in children)

    def head(self) -> int:
        """The table's seq now: every viewer gets every event up to it."""
        if self.control is not None:
            return int(self.control.call({"cmd": "head"})["seq"])
        body = httpx.get(f"http://127.0.0.1:{self.port}/api/tables", timeout=10).json()
        return int(body["tables"][0]["seq"])

    def stop_publishing(self) -> None:
        if self.control is not None:
            self.control.call({"cmd": "stop_publish"})

    def publish(self, rate: float, seconds: float) -> None:
        if self.control is not None:
            self.control.call({"cmd": "publish", "count": int(rate * seconds) + 10,
                               "interval": 1 / rate, "pad": 0, "wait": False})

    def stop(self) -> None:
        if self.control is not None:
            self.control.call({"cmd": "stop_publish"})
            self.control.stop()
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def connect(lg: LoadGen, port: int, n: int) -> int:
    shares = [{"start": start, "count": count} for start, count in lg.split(n)]
    answers = lg.call("connect", per_worker=shares, kind="livetable",
                      url=f"ws://127.0.0.1:{port}/ws", urls=None, concurrency=100,
                      timeout=120.0)
    return sum(a["connected"] for a in answers)


def measure(kind: str, lg: LoadGen, work: Path, args: argparse.Namespace,
            rate: float) -> dict[str, Any]:
    server = Server(kind, work, args.pin)
    try:
        rss0, (cpu0, _) = rss_bytes(server.pid), server.cpu()
        t0 = time.monotonic()
        viewers = connect(lg, server.port, args.viewers)
        handshakes_s = time.monotonic() - t0
        cpu1, _ = server.cpu()
        time.sleep(1.0)
        rss1 = rss_bytes(server.pid)
        lg.call("close")
        time.sleep(1.0)
        fanned = connect(lg, server.port, args.fanout_viewers)
        time.sleep(1.0)
        server.publish(rate, args.window + 2)
        time.sleep(0.5)
        h0, (c0, w0), t0 = server.head(), server.cpu(), time.monotonic()
        time.sleep(args.window)
        h1, (c1, w1), t1 = server.head(), server.cpu(), time.monotonic()
        server.stop_publishing()
        # every viewer gets every event of the window (checked: none behind, no gap), so
        # the frames delivered are the events × the viewers, however late a busy load
        # generator reads them
        final = lg.call("wait_seq", seq=h1, timeout=60.0)
        behind = sum(1 for f in final for s in f["last_seqs"] if s < h1)
        gaps = sum(f["gaps"] + f["dups"] for f in final)
        lg.call("close")
        frames = (h1 - h0) * fanned
        return {
            "kind": kind, "viewers": viewers, "handshakes_s": round(handshakes_s, 2),
            "cpu_ms_per_handshake": round((cpu1 - cpu0) / max(1, viewers) * 1e3, 4),
            "kib_per_idle_viewer": round((rss1 - rss0) / 1024 / max(1, viewers), 2),
            "fanout_viewers": fanned, "frames": frames,
            "frames_per_viewer_per_s": round(frames / max(1, fanned) / (t1 - t0), 2),
            "cpu_us_per_frame": round((c1 - c0) / max(1, frames) * 1e6, 3),
            "server_cpu_share": round((c1 - c0) / (t1 - t0), 3),
            "writer_cpu_s": round(w1 - w0, 3), "gaps_and_dups": gaps, "behind": behind,
            "loadavg": loadavg(),
        }
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default="livetable,uvicorn,websockets,picows")
    parser.add_argument("--viewers", type=int, default=2000)
    parser.add_argument("--fanout-viewers", type=int, default=3000)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--storm", type=int, default=0)
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    raise_nofile()
    kinds = args.kinds.split(",")
    work = _fresh(Path("/tmp") / f"bench-transport-{os.getpid()}")
    lg = LoadGen(2)
    if args.pin:
        pin(lg.pids, LOADGEN_CORE)
    runs: list[dict[str, Any]] = []
    rate = 20.0
    try:
        for rep in range(args.repeat):
            for kind in kinds if rep % 2 == 0 else kinds[::-1]:
                point = measure(kind, lg, work, args, rate)
                if not point["frames"]:  # the publisher or the game stalled: once more
                    point = {**measure(kind, lg, work, args, rate), "retried": True}
                point["repeat"] = rep
                if kind.startswith("livetable") and point["frames_per_viewer_per_s"]:
                    rate = point["frames_per_viewer_per_s"]
                runs.append(point)
                print(json.dumps(point), flush=True)
        if args.pin:  # the storm is the whole system's recovery: nothing pinned
            pin(lg.pids, None)
        storm = reconnect_storm(lg, work, args.storm) if args.storm else None
        if storm is not None:
            print(json.dumps({"storm": storm}), flush=True)
    finally:
        lg.close()
    out = Path(args.out) / time.strftime("transport-%Y%m%dT%H%M%S.json")
    write_json(out, {"args": vars(args), "runs": runs, "storm": storm})
    print(f"written {out}")


if __name__ == "__main__":
    main()
