"""The five measurements. Each function starts its own server process(es), drives the load
generator, stops what it started, and returns a JSON-able dict.

* :func:`fanout` — N viewers on one server process; per event: delivery latency, server
  CPU per delivered frame, memory per idle connection; livetable / bare websockets /
  socket.io side by side.
* :func:`profile_fanout` — the same fan-out on livetable under cProfile: the top functions.
* :func:`bet_intake` — players firing bets in the last two seconds of a real countdown
  (``livetable serve``): ack latency, and every bet accounted for.
* :func:`settlement` — one round holding many bets, dealt by a dealer console over
  ``/ws/dealer``: from the last reveal until every ``bet_settled`` is delivered.
* :func:`reconnect_storm` — every client dropped at once and resuming: time until all are
  back in step, and the gaps in seq (must be 0).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pstats
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    LOADGEN_CORE,
    PYTHON,
    ROOT,
    SERVER_CORE,
    RedisServer,
    ServerProcess,
    cpu_seconds,
    free_port,
    loadavg,
    pin,
    process_tree,
    rss_bytes,
    stat_cpu_seconds,
    stop_process,
    summary_ms,
    tree_cpu_seconds,
    wait_port,
)
from bench.loadgen import LoadGen

PATHS = {"livetable": "/ws", "ws": "/", "livetable-gcfreeze": "/ws",
         "livetable-gcoff": "/ws", "livetable-gctune": "/ws",
         "sio": "/socket.io/?EIO=4&transport=websocket"}
KIND_NAMES = {"livetable": "livetable gateway", "ws": "bare websockets.broadcast",
              "sio": "python-socketio + AsyncRedisManager",
              "livetable-gcfreeze": "livetable, gc.freeze() before publishing",
              "livetable-gcoff": "livetable, gc.disable() while publishing",
              "livetable-gctune": "livetable, gc.freeze() + gc.set_threshold(50000, 20, 100)"}
#: The client protocol each server kind speaks.
CLIENT_KIND = {"livetable": "livetable", "ws": "ws",
               "sio": "sio", "livetable-gcfreeze": "livetable", "livetable-gcoff": "livetable",
               "livetable-gctune": "livetable"}
SPOTS = ["P1", "P2", "P3", "P4", "P5", "P1_PAIR", "P2_PAIR", "P3_PAIR", "P4_PAIR", "P5_PAIR"]
AMOUNTS = [10, 20, 25, 50]


def _ints(blobs: list[bytes]) -> array[int]:
    out = array("q")
    for blob in blobs:
        out.frombytes(blob)
    return out


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def bench_server(kind: str, work: Path, redis_url: str = "",
                 name: str = "") -> tuple[ServerProcess, int]:
    port = free_port()
    data = _fresh(work / f"data-{name or kind}")
    argv = [PYTHON, "-m", "bench.fanout_server", "--kind", kind, "--port", str(port),
            "--data-dir", str(data)]
    if redis_url:
        argv += ["--redis-url", redis_url]
    return ServerProcess(argv, log=work / f"server-{name or kind}.log"), port


def connect(lg: LoadGen, kind: str, port: int | list[int], n: int,
            tokens: list[str] | None = None, concurrency: int = 100,
            timeout: float = 60.0) -> dict[str, Any]:
    """Connect ``n`` clients; ``port`` a list: client i to the server on ``port[i % len]``
    (the players spread over several gateways)."""
    ports = port if isinstance(port, list) else [port]
    urls = [f"ws://127.0.0.1:{p}{PATHS[kind]}" for p in ports]
    per_worker = []
    for start, count in lg.split(n):
        share: dict[str, Any] = {"start": start, "count": count}
        if tokens is not None:
            share["tokens"] = tokens[start:start + count]
        per_worker.append(share)
    t0 = time.monotonic()
    answers = lg.call("connect", per_worker=per_worker, kind=CLIENT_KIND[kind],
                      url=urls[0], urls=urls if len(urls) > 1 else None,
                      concurrency=concurrency, timeout=timeout)
    errors: Counter[str] = Counter()
    for a in answers:
        errors.update(a["errors"])
    return {"connected": sum(a["connected"] for a in answers),
            "failed": sum(a["failed"] for a in answers),
            "seconds": round(time.monotonic() - t0, 2), "errors": dict(errors)}


# --- 1. fan-out ---------------------------------------------------------------------------


def fanout_point(lg: LoadGen, kind: str, n: int, work: Path, redis_url: str, events: int,
                 interval: float, pad: int, profile_to: Path | None = None) -> dict[str, Any]:
    gc_mode = ""
    gc_modes = {"gcfreeze": "freeze", "gcoff": "disable", "gctune": "tune"}
    if kind.rsplit("-", 1)[-1] in gc_modes:  # experiments: livetable with its GC tamed
        kind, gc_mode = kind.rsplit("-", 1)[0], gc_modes[kind.rsplit("-", 1)[1]]
    server, port = bench_server(kind, work, redis_url, name=f"{kind}-{n}{gc_mode}")
    try:
        time.sleep(0.3)
        idle = server.call({"cmd": "info"})
        conn = connect(lg, kind, port, n)
        time.sleep(1.0)  # idle: nothing sent yet but the handshakes (and welcome)
        loaded = server.call({"cmd": "info"})
        connected = conn["connected"]
        if gc_mode:
            server.call({"cmd": "gc", "mode": gc_mode})
        lg.call("record", on=True)
        if profile_to is not None:
            server.call({"cmd": "profile_start"})
        stat0 = stat_cpu_seconds(server.pid)
        cpu_s0, cpu_l0, t0 = cpu_seconds(server.pid), lg.cpu(), time.monotonic()
        published = server.call({"cmd": "publish", "count": events, "interval": interval,
                                 "pad": pad}, timeout=events * interval + 300)
        waited = lg.call("wait_seq", seq=published["head"], timeout=120.0)
        cpu_s1, cpu_l1, t1 = cpu_seconds(server.pid), lg.cpu(), time.monotonic()
        stat1 = stat_cpu_seconds(server.pid)
        if profile_to is not None:
            server.call({"cmd": "profile_stop", "path": str(profile_to)}, timeout=120)
        lg.call("record", on=False)
        collected = lg.call("collect")
        seqs, lat = _ints([c["seq"] for c in collected]), _ints([c["ns"] for c in collected])
        per_event: dict[int, int] = {}
        for s, ns in zip(seqs, lat, strict=True):
            if ns > per_event.get(s, -1):
                per_event[s] = ns
        delivered = len(lat)
        server_cpu = cpu_s1 - cpu_s0
        loadgen_cpu = cpu_l1 - cpu_l0
        result = {
            "kind": kind + ("-" + {v: k for k, v in gc_modes.items()}[gc_mode]
                            if gc_mode else ""),
            "n": n,
            "connected": connected,
            "connect": conn,
            "events": events,
            "interval_s": interval,
            "payload_bytes": payload_size(kind, pad),
            "expected": connected * events,
            "delivered": delivered,
            "gaps": sum(w["gaps"] for w in waited),
            "dups": sum(w["dups"] for w in waited),
            "latency_ms": summary_ms(lat),
            "fanout_complete_ms": summary_ms(per_event.values()),
            "window_s": round(t1 - t0, 2),
            "server_cpu_s": round(server_cpu, 3),
            "server_cpu_stat_s": round(stat1 - stat0, 2),
            "loadgen_cpu_s": round(loadgen_cpu, 3),
            "server_cpu_us_per_frame": round(server_cpu / delivered * 1e6, 2) if delivered
            else None,
            "loadgen_cpu_us_per_frame": round(loadgen_cpu / delivered * 1e6, 2) if delivered
            else None,
            "rss_idle_mib": round(idle["rss"] / 2**20, 1),
            "rss_loaded_mib": round(loaded["rss"] / 2**20, 1),
            "server_connections": loaded["connections"],
            "kib_per_connection": round((loaded["rss"] - idle["rss"]) / 1024 / connected, 2)
            if connected else None,
            "rss_after_mib": round(rss_bytes(server.pid) / 2**20, 1),
        }
        lg.call("close")
        return result
    finally:
        server.stop()


def payload_size(kind: str, pad: int) -> int:
    from bench.fanout_server import ENCODER, event

    body = len(ENCODER.encode(event(1_700_000_000_000, 1000, pad)))
    return body + len('42["hand_revealed",]') if kind == "sio" else body


def fanout(lg: LoadGen, work: Path, sizes: list[int], kinds: list[str], events: int,
           interval: float, pad: int) -> list[dict[str, Any]]:
    results = []
    redis = RedisServer(work / "redis-sio").start() if "sio" in kinds else None
    try:
        for n in sizes:
            for kind in kinds:
                _log(f"fan-out: {KIND_NAMES[kind]}, {n} viewers")
                try:
                    point = fanout_point(lg, kind, n, work, redis.url if redis else "",
                                         events, interval, pad)
                except Exception as exc:  # one failed point must not lose the others
                    _log(f"fan-out {kind} {n}: FAILED {exc!r}")
                    with contextlib.suppress(Exception):
                        lg.call("close")
                    point = {"kind": kind, "n": n, "error": repr(exc)}
                results.append(point)
                _log(f"  {summarize_point(point)}")
                time.sleep(0.5)  # let the kernel reap the closed sockets
    finally:
        if redis is not None:
            redis.stop()
    return results


def summarize_point(p: dict[str, Any]) -> str:
    if "error" in p:
        return f"error {p['error']}"
    lat = p["latency_ms"]
    return (f"connected {p['connected']}/{p['n']}, delivered {p['delivered']}/{p['expected']}, "
            f"p50 {lat.get('p50')} ms p99 {lat.get('p99')} ms max {lat.get('max')} ms, "
            f"server {p['server_cpu_us_per_frame']} µs/frame, "
            f"loadgen {p['loadgen_cpu_us_per_frame']} µs/frame, "
            f"{p['kib_per_connection']} KiB/conn, gaps {p['gaps']}")


# --- 5. where the time goes -------------------------------------------------------------


def profile_fanout(lg: LoadGen, work: Path, n: int, events: int, interval: float,
                   pad: int, top: int = 25) -> dict[str, Any]:
    _log(f"profile: livetable fan-out to {n} viewers under cProfile")
    path = work / "fanout.prof"
    point = fanout_point(lg, "livetable", n, work, "", events, interval, pad, profile_to=path)
    summary = profile_summary(path, top)
    return {"n": n, "events": events, "delivered": point.get("delivered"),
            "us_per_frame_under_profile": round(summary["profiled_cpu_s"]
                                                / point["delivered"] * 1e6, 2)
            if point.get("delivered") else None, **summary, "point": point}


def profile_bets(lg: LoadGen, work: Path, players: int, per_player: int, betting_s: float,
                 top: int = 25) -> dict[str, Any]:
    """Bet intake with ``livetable serve`` under cProfile for the betting window."""
    _log("profile: bet intake under cProfile")
    path = work / "bets.prof"
    result = bet_intake(lg, work, players, per_player, betting_s, profile_to=path)
    summary = profile_summary(path, top)
    return {**summary, "bets": result}


def profile_summary(path: Path, top: int = 25) -> dict[str, Any]:
    """The top functions of a cProfile dump, by own and by cumulative time, and own time
    summed by package."""
    stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]  # pstats keeps it, untyped
    rows = []
    layers: Counter[str] = Counter()
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]  # untyped internals
        rows.append({"function": f"{_short(file)}:{line}({func})", "calls": nc,
                     "tottime_s": round(tt, 4), "cumtime_s": round(ct, 4),
                     "tottime_share": round(tt / total, 4) if total else 0})
        layers[_layer(file, func)] += tt
    text = io.StringIO()
    pstats.Stats(str(path), stream=text).sort_stats("tottime").print_stats(top)
    return {
        "profiled_cpu_s": round(total, 3),
        "top_tottime": sorted(rows, key=lambda r: r["tottime_s"], reverse=True)[:top],
        "top_cumtime": sorted(rows, key=lambda r: r["cumtime_s"], reverse=True)[:top],
        "layers": {k: round(v / total, 4) for k, v in layers.most_common()},
        "pstats_text": text.getvalue()[-12000:],
    }


def _short(file: str) -> str:
    """A profile entry's file, without the machine's directories."""
    for marker in ("site-packages/", "/livetable/", "/bench/"):
        if marker in file:
            tail = file.split(marker, 1)[1]
            return tail if marker == "site-packages/" else marker.strip("/") + "/" + tail
    match = re.search(r"lib/python3\.\d+/(.*)", file)
    return match.group(1) if match else file


def _layer(file: str, func: str = "") -> str:
    for name in ("livetable", "starlette", "uvicorn", "websockets", "msgspec", "asyncio",
                 "sqlite3", "bench"):
        if f"/{name}/" in file:
            return name
    if "sqlite3" in func:
        return "sqlite3 (C)"
    return "builtins/other" if file.startswith("~") or "<" in file else "other python"


# --- livetable serve --------------------------------------------------------------------


class LivetableServe:
    """``livetable serve`` as a subprocess on a free port, with its own data directory."""

    def __init__(self, work: Path, name: str, args: list[str], env: dict[str, str],
                 redis_url: str = "", profile_to: Path | None = None,
                 command: str = "serve") -> None:
        self.port = free_port()
        self.data = _fresh(work / f"data-{name}")
        self.log = work / f"serve-{name}.log"
        self.log_from = self.log.stat().st_size if self.log.exists() else 0  # this run's
        self.profile_to = profile_to
        argv = [PYTHON, "-m", "livetable.cli", command, "--port", str(self.port),
                "--data-dir", str(self.data), "--log-level", "warning", *args]
        if profile_to is not None:  # the same, with cProfile switched by SIGUSR1 / SIGUSR2
            argv[1:3] = ["-m", "bench.serve_profiled", str(profile_to)]
        # The load generator's thousands of clients come from three loopback addresses:
        # lift the per-address connection cap (a protection against one host, not a
        # capacity limit) so that every player connects.
        env = {**_env_without_livetable(), "LIVETABLE_CONNECTIONS_PER_ADDRESS": "0", **env}
        self.env_secret = b""
        if redis_url:
            argv += ["--redis", redis_url]
            # with --redis every process must share LIVETABLE_SECRET (no file is written)
            # (the caller's, when several processes must share it: start_serves)
            self.env_secret = (env.get("LIVETABLE_SECRET")
                               or secrets.token_urlsafe(32)).encode()
            env["LIVETABLE_SECRET"] = self.env_secret.decode()
            # ... and the shoe key (an engine with --redis refuses to start without one)
            env.setdefault("LIVETABLE_SHOE_KEY", secrets.token_hex(32))
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=open(self.log, "ab"),  # noqa: SIM115
                                     stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(self.port, timeout=30)
        except TimeoutError:
            stop_process(self.proc)
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"livetable serve did not start: {' | '.join(tail)}") from None
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        deadline = time.monotonic() + 30
        while not self.env_secret and not (self.data / "secret").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("no secret file")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def secret(self) -> bytes:
        """The server's signing secret: <data-dir>/secret (embedded), or the shared
        LIVETABLE_SECRET the harness gave it (scale-out)."""
        return self.env_secret or (self.data / "secret").read_bytes().strip()

    def table(self) -> dict[str, Any]:
        return dict(self.http.get("/api/tables/t1").json())

    def warnings(self) -> dict[str, int]:
        """This process's warnings so far that say a table moved or stalled: its lease
        lost (another engine may then take the table, and cancel a round in betting),
        its runner fenced off, its bus subscription lost (3 s without a word from Redis:
        a starved event loop)."""
        text = self.log.read_bytes()[self.log_from:].decode(errors="replace")
        return {"lease_lost": text.count("lease lost"),
                "fenced": text.count("is older than"),
                "bus_lost": text.count("subscription lost")}

    def readiness(self) -> dict[str, Any]:
        """``/readyz``'s answer (``ready`` and its ``checks``)."""
        return dict(self.http.get("/readyz").json())

    def wait_ready(self, table: str = "t1", timeout: float = 60.0) -> None:
        """Until ``/readyz`` says ready and the gateway knows ``table``."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                last = self.readiness()
                if last.get("ready") and table in last["checks"].get("tables_known", []):
                    return
            time.sleep(0.1)
        raise TimeoutError(f"livetable serve on port {self.port} not ready with {table} "
                           f"after {timeout:g} s: {last}")

    def profile(self, on: bool) -> None:
        """Start (SIGUSR1) or stop and write (SIGUSR2) the server's profile."""
        if self.profile_to is None:
            return
        self.proc.send_signal(signal.SIGUSR1 if on else signal.SIGUSR2)
        if not on:
            deadline = time.monotonic() + 30
            while not self.profile_to.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # let the write finish

    def stop(self) -> None:
        self.http.close()
        stop_process(self.proc)


def start_serves(work: Path, name: str, args: list[str], env: dict[str, str],
                 redis_url: str = "", gateways: int = 1,
                 profile_to: Path | None = None,
                 role: str = "serve") -> list[LivetableServe]:
    """``gateways`` ``livetable serve`` processes (scale-out when more than one: every one a
    gateway, the table's lease holder its engine). They share the signing secret, so that a
    token verifies on all, and the shoe key; each starts once the one before is ready and
    knows t1 (the first takes the lease and writes the table's state, which the others'
    gateways read). ``profile_to``: the first process only. ``role``: what the processes
    after the first run, ``serve`` (gateway and standby engine) or ``gateway`` (no engine:
    none can take the first one's lease)."""
    if gateways > 1:
        if not redis_url:
            raise ValueError("several gateways need the Redis bus (a scale-out store)")
        env = {"LIVETABLE_SECRET": secrets.token_urlsafe(32),
               "LIVETABLE_SHOE_KEY": secrets.token_hex(32), **env}
    serves: list[LivetableServe] = []
    try:
        for i in range(gateways):
            serves.append(LivetableServe(work, name if i == 0 else f"{name}-gw{i}", args, env,
                                         redis_url=redis_url,
                                         profile_to=profile_to if i == 0 else None,
                                         command="serve" if i == 0 else role))
            if gateways > 1:
                serves[-1].wait_ready()
    except BaseException:
        for serve in serves:
            serve.stop()
        raise
    return serves


def cpu_snapshot(serves: list[LivetableServe], lg: LoadGen, redis: RedisServer | None = None,
                 database: Any = None) -> dict[str, Any]:
    """CPU seconds so far of each server process (with its children: the SQLite writer),
    of each one's own threads alone, of PostgreSQL (primary and standby, every backend),
    of Redis and of the load generator's workers."""
    postgres = None
    if database is not None:
        pids = [server.postmaster_pid() for server in (database.primary, database.standby)
                if server is not None]
        postgres = sum(tree_cpu_seconds(pid) for pid in pids if pid is not None)
    return {"servers": [tree_cpu_seconds(s.pid) for s in serves],
            "mains": [cpu_seconds(s.pid) for s in serves],
            "postgres": postgres,
            "redis": (cpu_seconds(redis.proc.pid)
                      if redis is not None and redis.proc is not None else None),
            "loadgen": lg.cpu()}


def cpu_spent(before: dict[str, Any], after: dict[str, Any], count: int,
              prefix: str = "") -> dict[str, Any]:
    """What :func:`cpu_snapshot` counted between two readings: seconds, and µs per one of
    ``count`` (bets), keys prefixed with ``prefix``."""
    servers = [b - a for a, b in zip(before["servers"], after["servers"], strict=True)]
    mains = [b - a for a, b in zip(before["mains"], after["mains"], strict=True)]

    def per(seconds: float | None) -> float | None:
        return round(seconds / count * 1e6, 1) if seconds is not None and count else None

    out: dict[str, Any] = {
        "server_cpu_s": round(sum(servers), 3),
        # the server processes alone (without their SQLite writer processes, if any)
        "server_main_cpu_s": round(sum(mains), 3),
        "server_cpu_us_per_bet": per(sum(servers)),
        "server_cpu_per_process_s": [round(x, 3) for x in servers],
    }
    for part in ("postgres", "redis", "loadgen"):
        spent = (after[part] - before[part] if before[part] is not None
                 and after[part] is not None else None)
        out[f"{part}_cpu_s"] = round(spent, 3) if spent is not None else None
        out[f"{part}_cpu_us_per_bet"] = per(spent)
    return {f"{prefix}{k}": v for k, v in out.items()}


def serve_warnings(serves: list[LivetableServe]) -> list[dict[str, int]]:
    return [serve.warnings() for serve in serves]


def leases_held(serves: list[LivetableServe]) -> list[Any]:
    """Each process's leases (``/readyz``): which one ran the table."""
    held = []
    for serve in serves:
        try:
            held.append(serve.readiness()["checks"].get("leases_held"))
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            held.append(f"{type(exc).__name__}")
    return held


def _env_without_livetable() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("LIVETABLE_")}


def guest_tokens(secret: bytes, n: int, prefix: str) -> list[str]:
    from livetable.auth import mint

    return [mint(secret, "guest", f"g_{prefix}{i}", f"Bench {i}", 3600) for i in range(n)]


def player_tokens(secret: bytes, n: int, prefix: str) -> list[str]:
    """Operator players' tokens (a seamless wallet takes no guests)."""
    from livetable.auth import mint

    return [mint(secret, "player", f"{prefix}{i}", f"Bench {i}", 3600, currency="THB")
            for i in range(n)]


# --- 2. bet intake ----------------------------------------------------------------------


#: The stores that run ``livetable serve --redis``: the PostgreSQL store, Redis its bus (the
#: Redis ledger was retired; its rows in docs/benchmarks.md are history).
SCALE_OUT = ("postgres",)


def store_env(store: str, database: Any = None) -> dict[str, str]:
    """The server's environment for a store of the bets and settlement parts: ``sqlite``
    (the default: its writer in a child process), ``sqlite-thread`` (the writer a thread
    of the server, ``LIVETABLE_SQLITE_WRITER=thread``), or ``postgres`` (the
    ledger in ``database``, a primary with a synchronous standby, and Redis the bus)."""
    if store == "postgres":
        return {"LIVETABLE_POSTGRES_URL": database.url}
    return {"LIVETABLE_SQLITE_WRITER": "thread"} if store == "sqlite-thread" else {}


def start_postgres() -> Any:
    """A PostgreSQL primary and synchronous standby of the bench's own (tests/pg_util.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pg_util import start_pg  # the tests' helper

    return start_pg(standby=True)


def start_operator(work: Path, latency_ms: float, methods: str,
                   env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The reference operator (``livetable operator-demo``) answering each call of
    ``methods`` (``debit``, ``*``: every call) after about ``latency_ms`` (uniform in
    [0.5, 1.5] × it: its ``slow`` fault at rate 1); ``env`` gets the server's seamless
    wallet settings for it."""
    op_port, wallet_secret = free_port(), secrets.token_urlsafe(16)
    faults = (["--fault", f"{methods}:slow=1", "--slow", str(latency_ms / 1000)]
              if latency_ms > 0 else [])
    log = work / "operator.log"
    operator = subprocess.Popen(
        [PYTHON, "-m", "livetable.cli", "operator-demo", "--port", str(op_port),
         "--secret", wallet_secret, "--initial-balance", str(10**9), *faults],
        cwd=ROOT, stdout=open(log, "ab"),  # noqa: SIM115
        stderr=subprocess.STDOUT, env=_env_without_livetable())
    try:
        wait_port(op_port, timeout=30)
    except BaseException as exc:  # stopped, never left running; its log says why
        stop_process(operator)
        exc.add_note(f"the reference operator's log:\n{log.read_text()[-2000:]}")
        raise
    env.update({"LIVETABLE_WALLET": "seamless", "LIVETABLE_WALLET_SECRET": wallet_secret,
                "LIVETABLE_WALLET_URL": f"http://127.0.0.1:{op_port}/wallet"})
    if os.environ.get("BENCH_WALLET_CONNECTIONS"):  # else the server's default (1,024)
        env["LIVETABLE_WALLET_CONNECTIONS"] = os.environ["BENCH_WALLET_CONNECTIONS"]
    return operator


def bet_intake(lg: LoadGen, work: Path, players: int, per_player: int, betting_s: float,
               window_s: float = 2.0, store: str = "sqlite",
               profile_to: Path | None = None,
               wallet_latency_ms: float | None = None,
               spy_to: Path | None = None, gateways: int = 1,
               role: str = "serve", pinned: bool = False) -> dict[str, Any]:
    """Bet intake; with ``wallet_latency_ms``, in seamless mode against the reference
    operator (``livetable operator-demo``) answering each debit after about that long
    (uniform in [0.5, 1.5] × the latency: its ``slow`` fault at rate 1). ``gateways``
    (a scale-out store): that many ``livetable serve`` processes, player i on the i mod
    N-th (the profile and the spy watch the first, which holds the table's lease).
    ``pinned``: the servers (with SQLite's writer) on :data:`SERVER_CORE`, the reference
    operator on :data:`LOADGEN_CORE` (where the caller put the load generator): the
    server's CPU is then its own. PostgreSQL is left to the kernel: with it on the server's
    core that core was saturated (half the seamless bets refused, not sent in time), and on
    the load generator's it was worse (docs/benchmarks.md, "The first bets of a cold pool")."""
    wallet = "" if wallet_latency_ms is None else f", seamless wallet {wallet_latency_ms:g} ms"
    across = f" across {gateways} gateways" if gateways > 1 else ""
    _log(f"bet intake ({store}{wallet}): {players} players × {per_player} bets in the last "
         f"{window_s:g} s of a {betting_s:g} s countdown{across}")
    redis = RedisServer(work / "redis-bets").start() if store in SCALE_OUT else None
    database = start_postgres() if store == "postgres" else None
    env = {"LIVETABLE_BETWEEN_ROUNDS": "1", **store_env(store, database)}
    operator: subprocess.Popen[bytes] | None = None
    try:  # whatever fails to start, what did start is stopped
        if wallet_latency_ms is not None:
            operator = start_operator(work, wallet_latency_ms, "debit", env)
        serves = start_serves(work, f"bets-{store}{'-wallet' if wallet else ''}",
                              ["--betting-seconds", str(betting_s), "--reveal-interval",
                               "0.3"], env, redis_url=redis.url if redis else "",
                              gateways=gateways, profile_to=profile_to, role=role)
    except BaseException:
        _stop_services(redis, database, operator)
        raise
    serve = serves[0]
    if pinned:
        pin([pid for one in serves for pid in process_tree(one.pid)], SERVER_CORE)
        if operator is not None:
            pin(process_tree(operator.pid), LOADGEN_CORE)
    try:
        secret = serve.secret()
        tokens = (guest_tokens(secret, players, "bets") if wallet_latency_ms is None
                  else player_tokens(secret, players, "w"))
        conn = connect(lg, "livetable", [s.port for s in serves], players, tokens)
        margin_ms = 250
        while True:  # a round in betting, with the whole window still ahead
            snap = serve.table()
            now_ms = time.time_ns() // 1_000_000
            closes = snap.get("closes_at")
            if (snap.get("phase") == "betting" and closes
                    and closes - now_ms > window_s * 1000 + margin_ms + 300):
                break
            time.sleep(0.1)
        end_ns = (closes - margin_ms) * 1_000_000
        start_ns = end_ns - int(window_s * 1e9)
        serve.profile(True)
        if redis is not None:
            redis.slowlog_start()
        spy = _spy(serve.pid, spy_to, start_ns, window_s + 6) if spy_to is not None else None
        load0 = loadavg()
        cpu0 = cpu_snapshot(serves, lg, redis, database)
        op0 = cpu_seconds(operator.pid) if operator is not None else 0.0
        answers = lg.call("bets", round_id=snap["round_id"], start_ns=start_ns, end_ns=end_ns,
                          per_peer=per_player, seed=7, timeout=60.0, spots=SPOTS,
                          amounts=AMOUNTS)
        cpu1 = cpu_snapshot(serves, lg, redis, database)
        op1 = cpu_seconds(operator.pid) if operator is not None else 0.0
        serve.profile(False)
        if spy is not None:
            spy.join()
        # the round's close and settlement too: wait for the next round to open
        time.sleep(max(0.0, (closes + 1_500) / 1000 - time.time()) + 3.0)
        debits = wallet_debits(serve) if wallet_latency_ms is not None else None
        slowlog = redis.slowlog_longest() if redis is not None else None
        held = leases_held(serves) if redis is not None else None
        codes: Counter[str] = Counter()
        for a in answers:
            codes.update(a["codes"])
        sent = sum(a["sent"] for a in answers)
        acks = _ints([a["ack_ns"] for a in answers])
        sent_at = _ints([a["sent_ns"] for a in answers])
        answered = sum(v for k, v in codes.items()
                       if k not in ("no_answer", "not_sent", "connection_lost"))
        client_errors: Counter[str] = Counter()
        for a in answers:
            client_errors.update(a["errors"])
        lg.call("close")
        return {
            "store": store, "gateways": gateways, "role": role, "leases_held": held,
            "server_warnings": serve_warnings(serves),
            "players": players, "connected": conn["connected"],
            "connect": conn, "bets": sent, "per_player": per_player,
            "betting_seconds": betting_s, "window_s": window_s,
            "window": f"[closes_at - {window_s * 1000 + margin_ms:g} ms, "
                      f"closes_at - {margin_ms} ms]",
            "codes": dict(codes), "answered": answered,
            "client_errors": dict(client_errors),  # error frames and connection failures
            "accounted": answered == sent == players * per_player,
            "ack_ms": summary_ms(acks),
            "ack_by_quarter_second": ack_timeline(start_ns, sent_at, acks),
            "accepted_pct": round(100 * codes.get("accepted", 0) / sent, 2) if sent else None,
            "redis_longest_command": slowlog,
            # every server process (and per process), PostgreSQL, Redis, the load generator
            **cpu_spent(cpu0, cpu1, sent),
            "wallet_latency_ms": wallet_latency_ms,
            # the server's debits by outcome (its metrics): ok, refused codes, unknown
            # (timeouts and the like), not_sent (no place in the wallet's line in time)
            "wallet_debits": debits,
            "loadavg": [load0[0], loadavg()[0]],  # the machine's 1-min load, before/after
            "pinned": pinned,
            # the reference operator's own CPU over the same burst: the bench measures
            # livetable only while this stays well below a core
            "operator_cpu_s": round(op1 - op0, 3) if operator is not None else None,
            "operator_cpu_us_per_bet": (round((op1 - op0) / sent * 1e6, 1)
                                        if operator is not None and sent else None),
        }
    finally:
        for one in serves:
            one.stop()
        _stop_services(redis, database, operator)
        if spy_to is not None:  # the logs beside the samples
            for log in (serve.log, work / "operator.log"):
                if log.exists():
                    shutil.copy(log, spy_to.with_suffix(f".{log.stem}.log"))


def wallet_debits(serve: LivetableServe) -> dict[str, float]:
    """The server's ``livetable_wallet_debits_<outcome>_total`` counters, by outcome."""
    out: dict[str, float] = {}
    for line in serve.http.get("/metrics").text.splitlines():
        if line.startswith("livetable_wallet_debits_") and "_total" in line:
            name, _, value = line.partition(" ")
            out[name.removeprefix("livetable_wallet_debits_").split("_total")[0]] = float(value)
    return out


def _spy(pid: int, out: Path, start_ns: int, seconds: float) -> threading.Thread:
    """py-spy sampling ``pid`` (every thread, idle ones too: a server that waits shows
    where) from ``start_ns`` (wall clock) for ``seconds``, collapsed stacks to ``out``
    (``pip install py-spy``). ``BENCH_SPY_RATE`` samples a second (default 100),
    ``BENCH_SPY_IDLE=0`` only the samples that run (CPU, not waits), ``BENCH_SPY_NATIVE=1``
    C frames too."""
    spy = Path(PYTHON).parent / "py-spy"

    def record(target: int, to: Path) -> subprocess.Popen[bytes]:
        idle = ["--idle"] if os.environ.get("BENCH_SPY_IDLE", "1") != "0" else []
        return subprocess.Popen([str(spy), "record", "--pid", str(target), *idle,
                                 "--threads", "--format", "raw", "--rate",
                                 os.environ.get("BENCH_SPY_RATE", "100"),
                                 "--nonblocking",
                                 *(["--native"] if os.environ.get("BENCH_SPY_NATIVE") else []),
                                 "--duration", str(int(seconds + 0.999)),
                                 "--output", str(to)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def run() -> None:
        time.sleep(max(0.0, start_ns / 1e9 - time.time() - 0.2))
        # the server, and its children (the SQLite writer process) each to a file
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        spies = [record(pid, out)] + [record(int(c), out.with_suffix(f".child-{c}.txt"))
                                      for c in children]
        for one in spies:
            one.wait()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def ack_timeline(start_ns: int, sent_at: array[int], acks: array[int],
                 step_ns: int = 250_000_000) -> list[dict[str, float]]:
    """The acks by when their bet was sent, in quarter seconds of the window: shows whether
    a high p99 is a queue that grew through the burst or one stall."""
    bins: dict[int, list[int]] = {}
    for at, ack in zip(sent_at, acks, strict=True):
        bins.setdefault(max(0, (at - start_ns) // step_ns), []).append(ack)
    return [{"from_ms": k * step_ns // 1_000_000, **summary_ms(v)}
            for k, v in sorted(bins.items())]


# --- 3. settlement ----------------------------------------------------------------------

#: One round dealt by the bench's dealer: burn, then P1…P5, Banker, twice. Banker 7H KD (7,
#: no special); P1 9S KC wins 1:1; P2 2H 3D loses; P3 4C 3S ties; P4 AH KH (AK flush) wins
#: 2:1; P5 8D 8C loses, and its pair bet wins 11:1.
ROUND_CARDS = ["QS", "9S", "2H", "4C", "AH", "8D", "7H", "KC", "3D", "3S", "KH", "8C", "KD"]
OPENING_CARD = "2C"


class Dealer:
    """A dealer console on /ws/dealer (websockets' sync client, in the harness process)."""

    def __init__(self, port: int, token: str, timeout: float = 60.0) -> None:
        from websockets.sync.client import connect as ws_connect

        self.timeout = timeout
        # The console is read only between commands: through a long intake on a busy
        # machine its frames wait unread. No keepalive pings (their pongs would wait behind
        # those frames: "keepalive ping timeout" killed the console in a 20 s intake) and
        # no cap on the frames kept (with one, the reader stops reading the socket).
        self.ws = ws_connect(f"ws://127.0.0.1:{port}/ws/dealer", max_size=2**24,
                             open_timeout=30, ping_interval=None, max_queue=None)
        self.events: list[dict[str, Any]] = []
        self.ws.send(json.dumps({"type": "hello", "v": 1, "table": "t1", "token": token}))
        self.wait_for("welcome")

    def wait_for(self, kind: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"dealer: no {kind} in {timeout or self.timeout:g} s")
            frame = json.loads(self.ws.recv(timeout=left))
            if frame.get("type") == "error":
                raise RuntimeError(f"dealer: {frame}")
            if frame.get("type") == kind:
                return dict(frame)
            self.events.append(frame)

    def command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        self.ws.send(json.dumps(cmd))
        return self.wait_for("ack")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


def _stop_services(redis: RedisServer | None, database: Any,
                   operator: subprocess.Popen[bytes] | None = None) -> None:
    if operator is not None:
        stop_process(operator)
    if redis is not None:
        redis.stop()
    if database is not None:
        database.stop()


def settlement(lg: LoadGen, work: Path, players: int, per_player: int,
               store: str = "sqlite", timeout: float = 180.0,
               gateways: int = 1, role: str = "serve") -> dict[str, Any]:
    across = f" across {gateways} gateways" if gateways > 1 else ""
    _log(f"settlement ({store}): {players} players × {per_player} bets in one round{across}")
    redis = RedisServer(work / "redis-settle").start() if store in SCALE_OUT else None
    database = start_postgres() if store == "postgres" else None
    try:
        serves = start_serves(work, f"settle-{store}", ["--mode", "manual"],
                              store_env(store, database),
                              redis_url=redis.url if redis else "", gateways=gateways,
                              role=role)
    except BaseException:
        _stop_services(redis, database)
        raise
    serve = serves[0]  # the lease holder: the dealer's console is on it
    dealer = None
    try:
        from livetable.auth import mint

        secret = serve.secret()
        dealer = Dealer(serve.port, mint(secret, "dealer", "bench-dealer", "Dealer", 3600,
                                         tables=["t1"]),
                        timeout=min(timeout, 60.0))
        dealer.command({"type": "start_shoe"})
        dealer.command({"type": "card", "card": OPENING_CARD})
        dealer.command({"type": "open_betting", "betting_ms": 600_000})
        opened = [e for e in dealer.events if e.get("type") == "round_opened"]
        # in scale-out the event comes over the bus, and may arrive after the ack
        round_id = (opened[-1] if opened else dealer.wait_for("round_opened"))["round_id"]
        tokens = guest_tokens(secret, players, "settle")
        conn = connect(lg, "livetable", [s.port for s in serves], players, tokens)
        if redis is not None:
            redis.slowlog_start()
        now = time.time_ns()
        cpu0, t0 = cpu_snapshot(serves, lg, redis, database), time.monotonic()
        answers = lg.call("bets", round_id=round_id, start_ns=now, end_ns=now,
                          per_peer=per_player, seed=11, timeout=timeout, spots=SPOTS,
                          amounts=AMOUNTS)
        intake_s, cpu_in = time.monotonic() - t0, cpu_snapshot(serves, lg, redis, database)
        codes: Counter[str] = Counter()
        for a in answers:
            codes.update(a["codes"])
        client_errors: Counter[str] = Counter()
        for a in answers:
            client_errors.update(a["errors"])
        accepted_per_worker = [a["accepted"] for a in lg.call("accepted")]
        accepted = sum(accepted_per_worker)
        intake = {"store": store, "gateways": gateways, "role": role, "players": players,
                  "connected": conn["connected"],
                  "bets": sum(a["sent"] for a in answers), "codes": dict(codes),
                  "client_errors": dict(client_errors), "accepted": accepted,
                  "intake_s": round(intake_s, 2)}
        try:
            dealer.command({"type": "close_betting"})
            for card in ROUND_CARDS:
                dealer.command({"type": "card", "card": card})
            for _ in range(5):
                dealer.command({"type": "reveal"})
        except Exception as exc:  # what the intake did is still worth reporting
            lg.call("close")
            return {**intake, "error": f"{type(exc).__name__}: {exc}",
                    "server_warnings": serve_warnings(serves),
                    "dealer_events": [e.get("type") for e in dealer.events][-20:]}
        cpu1 = cpu_snapshot(serves, lg, redis, database)
        reveal_ns = time.time_ns()
        dealer.ws.send(json.dumps({"type": "reveal"}))
        settled = lg.call("await_settled", per_worker=[{"expected": e}
                                                      for e in accepted_per_worker],
                          timeout=timeout)
        cpu2 = cpu_snapshot(serves, lg, redis, database)
        ack = dealer.wait_for("ack")
        del ack
        slowlog = redis.slowlog_longest() if redis is not None else None
        held = leases_held(serves) if redis is not None else None
        settled_ns = _ints([s["settled_ns"] for s in settled])
        round_ns = _ints([s["round_settled_ns"] for s in settled])
        delivered = len(settled_ns)
        first_round = min(round_ns) if round_ns else 0
        last_settled = max(settled_ns) if settled_ns else 0
        lg.call("close")
        settle_cpu = cpu_spent(cpu1, cpu2, accepted, prefix="settle_")
        return {
            "store": store, "gateways": gateways, "role": role, "leases_held": held,
            "server_warnings": serve_warnings(serves),
            "players": players, "connected": conn["connected"],
            "connect": conn, "bets": sum(a["sent"] for a in answers), "codes": dict(codes),
            "client_errors": dict(client_errors),
            "accepted": accepted,
            "intake_s": round(intake_s, 2),
            "intake_bets_per_s": round(accepted / intake_s) if intake_s else None,
            **cpu_spent(cpu0, cpu_in, accepted, prefix="intake_"),
            "ack_ms": summary_ms(_ints([a["ack_ns"] for a in answers])),
            "bet_settled_delivered": delivered,
            "all_delivered": delivered == accepted,
            "returned_total": sum(s["returned"] for s in settled),
            "reveal_to_first_round_settled_ms": round((first_round - reveal_ns) / 1e6, 1),
            "reveal_to_last_round_settled_ms": round((max(round_ns) - reveal_ns) / 1e6, 1)
            if round_ns else None,
            "round_settled_to_last_bet_settled_ms": round((last_settled - first_round) / 1e6, 1),
            "reveal_to_last_bet_settled_ms": round((last_settled - reveal_ns) / 1e6, 1),
            "bet_settled_since_reveal_ms": summary_ms(v - reveal_ns for v in settled_ns),
            # the server processes (each, and alone: without their SQLite writer
            # processes, if any), PostgreSQL, Redis and the load generator's workers: on
            # one machine they share its cores
            **settle_cpu,
            "redis_longest_command": slowlog,  # over the intake and the settlement
            "gaps": sum(s["gaps"] for s in settled),
        }
    finally:
        if dealer is not None:
            dealer.close()
        for one in serves:
            one.stop()
        _stop_services(redis, database)


# --- 4. reconnect storm -----------------------------------------------------------------


def _by_second(since_ns: Iterable[int]) -> list[int]:
    counts: Counter[int] = Counter(int(ns // 1_000_000_000) for ns in since_ns)
    return [counts.get(i, 0) for i in range(max(counts, default=-1) + 1)]


def reconnect_storm(lg: LoadGen, work: Path, n: int, interval: float = 0.5,
                    pause: float = 0.5, profile_to: Path | None = None,
                    kind: str = "livetable") -> dict[str, Any]:
    """``kind``: livetable's bench server, or bench/transport_servers.py's small app on
    another transport (``uvicorn``, ``websockets``, ``picows``: hello → welcome at the
    head, no replay, no gateway) — what the storm costs the transport alone."""
    _log(f"reconnect storm ({kind}): {n} players dropped at once, resuming; events every "
         f"{interval * 1000:g} ms throughout")
    server, port = bench_server(kind, work, name=f"storm-{kind}-{n}")
    try:
        secret = server.ready.get("secret")
        tokens = guest_tokens(secret.encode(), n, "storm") if secret else None
        conn = connect(lg, "livetable", port, n, tokens)
        server.call({"cmd": "publish", "count": 1_000_000, "interval": interval, "pad": 0,
                     "wait": False})
        time.sleep(1.0)
        if profile_to is not None:
            server.call({"cmd": "profile_start"})
        cpu0, tree0, lcpu0 = cpu_seconds(server.pid), tree_cpu_seconds(server.pid), lg.cpu()
        storm = lg.call("storm", pause=pause, concurrency=250, timeout=120.0,
                        call_timeout=300)
        cpu1, tree1, lcpu1 = cpu_seconds(server.pid), tree_cpu_seconds(server.pid), lg.cpu()
        if profile_to is not None:
            server.call({"cmd": "profile_stop", "path": str(profile_to)}, timeout=120)
        time.sleep(0.5)
        head = server.call({"cmd": "stop_publish"})["head"]
        final = lg.call("wait_seq", seq=head, timeout=60.0)
        drop = min(s["drop_ns"] for s in storm)
        caught = _ints([s["caught_up_ns"] for s in storm])
        welcomed = _ints([s["welcome_ns"] for s in storm])
        handshaken = _ints([s["handshake_ns"] for s in storm])
        behind = sum(1 for v in caught if v == 0)
        lg.call("close")
        last_seqs = sorted({x for f in final for x in f["last_seqs"]})
        return {
            "n": n, "connected": conn["connected"], "connect": conn,
            "event_interval_ms": interval * 1000, "pause_ms": pause * 1000,
            "reconnected": sum(s["reconnected"] for s in storm),
            "resumed_true": sum(s["resumed_true"] for s in storm),
            "resumed_false": sum(s["resumed_false"] for s in storm),
            "not_caught_up": behind,
            "all_in_step_ms": round((max(caught) - drop) / 1e6, 1) if not behind else None,
            "caught_up_since_drop_ms": summary_ms(v - drop for v in caught if v),
            "welcome_since_drop_ms": summary_ms(v - drop for v in welcomed if v),
            "handshake_since_drop_ms": summary_ms(v - drop for v in handshaken if v),
            # how many came back in each second after the drop: the curve, not its ends
            "caught_up_by_second": _by_second(v - drop for v in caught if v),
            "gaps": sum(f["gaps"] for f in final),
            "dups": sum(f["dups"] for f in final),
            "head": head, "final_last_seqs": last_seqs[:5],
            "all_at_head": last_seqs == [head],
            "server_cpu_s": round(cpu1 - cpu0, 3),
            # its children's: livetable's SQLite writer process
            "writer_cpu_s": round(tree1 - tree0 - (cpu1 - cpu0), 3),
            "loadgen_cpu_s": round(lcpu1 - lcpu0, 3),
            "loadgen_gc_pause_s": [round(s["gc_pause_s"], 3) for s in storm],
            "loadgen_gc_longest_s": [round(s["gc_longest_s"], 3) for s in storm],
            "errors": {k: v for f in final for k, v in f["errors"].items()},
        }
    finally:
        server.stop()
