"""What every part of the harness shares: limits, ports, /proc readings, percentiles, the
machine's description, and the subprocesses it owns (servers, redis-server).

Everything here talks only to loopback addresses. Each subprocess is started by the
harness, known by its pid, and stopped by that pid (never by name).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livetable.engine.effects import SettleRound
    from livetable.protocol import Limits

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def raise_nofile() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (we may not raise the hard one)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1_048_576
    for value in (1_048_576, want):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (value, max(value, hard)))
            break
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_port(port: int, host: str = "127.0.0.1", timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:g} s")


# --- /proc ----------------------------------------------------------------------------


def stat_cpu_seconds(pid: int) -> float:
    """utime + stime of /proc/<pid>/stat (every thread; counted in clock ticks of 10 ms)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        text = f.read()
    fields = text[text.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def cpu_seconds(pid: int) -> float:
    """CPU time of one process (all its threads, not its children), in seconds, to the
    nanosecond: the sum of /proc/<pid>/task/*/schedstat. Falls back to /proc/<pid>/stat
    (10 ms ticks — too coarse for a window of a few seconds)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError), \
                    open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    except (FileNotFoundError, PermissionError, ValueError, IndexError):
        return stat_cpu_seconds(pid)
    return total / 1e9 if total else stat_cpu_seconds(pid)


#: Where a pinned bench puts the server (and its store) and the load generator (and the
#: reference operator): apart, so that the server's CPU figures are its own.
SERVER_CORE, LOADGEN_CORE = 0, 1


def pin(pids: Iterable[int], core: int | None) -> None:
    """Each of ``pids`` (and its threads) onto ``core`` alone; None: back onto every core.
    A process gone meanwhile is skipped."""
    cores = set(range(os.cpu_count() or 1)) if core is None else {core}
    for pid in pids:
        for task in _tasks(pid):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(task, cores)


def _tasks(pid: int) -> list[int]:
    """``pid``'s threads (an affinity set on a process reaches only threads made later)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a server and its SQLite writer process)."""
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{here}/task"):
                with contextlib.suppress(OSError), \
                        open(f"/proc/{here}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its descendants (see :func:`cpu_seconds`)."""
    return sum(cpu_seconds(p) for p in process_tree(pid))


def cpu_of(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def stat_cpu_of(pids: Iterable[int]) -> float:
    return sum(stat_cpu_seconds(pid) for pid in pids)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // 1024
                break
    versions = {}
    for name in ("uvicorn", "starlette", "websockets", "picows", "python-socketio",
                 "python-engineio", "uvloop", "msgspec", "redis"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version
            versions[name] = version(name)
    redis_version = ""
    with contextlib.suppress(Exception):
        out = subprocess.run([redis_binary(), "--version"], capture_output=True, text=True,
                             timeout=5).stdout
        redis_version = out.split("v=")[1].split()[0]
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "mem_mib": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": versions,
        "redis_server": redis_version,
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
        "loadavg_at_start": loadavg(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# --- statistics -------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), int(-(-q * len(sorted_values) // 100))))
    return float(sorted_values[rank - 1])


def summary_ms(values_ns: Iterable[int]) -> dict[str, float]:
    """p50 / p90 / p99 / max / mean of nanosecond durations, in milliseconds."""
    values = sorted(values_ns)
    if not values:
        return {"n": 0}
    ms = 1e6
    return {
        "n": len(values),
        "p50": round(percentile(values, 50) / ms, 2),
        "p90": round(percentile(values, 90) / ms, 2),
        "p99": round(percentile(values, 99) / ms, 2),
        "max": round(values[-1] / ms, 2),
        "mean": round(sum(values) / len(values) / ms, 2),
    }


# --- subprocesses -----------------------------------------------------------------------


def redis_binary() -> str:
    return (os.environ.get("LIVETABLE_REDIS_SERVER") or shutil.which("redis-server")
            or "/usr/bin/redis-server")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0,
                 sig: int = signal.SIGTERM) -> None:
    """SIGTERM (or ``sig``), then SIGKILL after ``timeout`` — this one process, by its pid."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)


class RedisServer:
    """A throwaway redis-server on a free loopback port (never 6379), data in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = free_port()
            if self.port == 6379:
                continue
            self.proc = subprocess.Popen(
                [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self.directory),
                 "--maxclients", "10000", "--logfile", str(self.directory / "redis.log"),
                 # as deploy/redis.conf
                 "--hash-max-listpack-entries", "128"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_port(self.port, timeout=10)
                return self
            except TimeoutError:
                stop_process(self.proc)
        raise RuntimeError("could not start redis-server")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def slowlog_start(self, slower_than_us: int = 1_000) -> None:
        """Log every command that runs longer than ``slower_than_us`` from now on."""
        import redis

        with redis.Redis.from_url(self.url) as r:
            r.config_set("slowlog-log-slower-than", slower_than_us)
            r.config_set("slowlog-max-len", 100_000)
            r.slowlog_reset()

    def slowlog_longest(self) -> dict[str, Any]:
        """The longest command since :meth:`slowlog_start`, by Redis's own SLOWLOG
        (``{"ms": None}``: none ran longer than the threshold), with the five longest and
        how many ran 20 ms or longer (the issue's bound); a script is named by its SHA."""
        import redis

        with redis.Redis.from_url(self.url) as r:
            threshold = int(r.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"])
            entries = r.slowlog_get(100_000)
        if not entries:
            return {"ms": None, "below_ms": threshold / 1000, "logged": 0}
        scripts = livetable_scripts()

        def name(entry: dict[str, Any]) -> str:
            words = entry["command"].split() if entry["command"] else [b"?"]
            if words[0].upper() == b"EVALSHA" and len(words) > 1:
                return f"EVALSHA {scripts.get(words[1].decode(errors='replace'), '?')}"
            return str(words[0].decode(errors="replace"))

        ranked = sorted(entries, key=lambda e: e["duration"], reverse=True)
        return {"ms": round(ranked[0]["duration"] / 1000, 2), "command": name(ranked[0]),
                "longest": [[round(e["duration"] / 1000, 2), name(e)] for e in ranked[:5]],
                "at_least_20_ms": sum(e["duration"] >= 20_000 for e in entries),
                "logged": len(entries), "over_ms": threshold / 1000}


def livetable_scripts() -> dict[str, str]:
    """SHA → name of the Lua scripts livetable sends to Redis (the leases':
    ``lease_renew``, …): Redis names a script by the SHA-1 of its text."""
    import hashlib

    folder = Path(__file__).resolve().parents[1] / "livetable"
    return {hashlib.sha1(path.read_bytes()).hexdigest(): path.stem
            for path in sorted(folder.rglob("*.lua"))}


class ServerProcess:
    """A bench server subprocess driven by JSON lines: commands on its stdin, one reply
    line per command (and a first ``{"ready": ...}`` line) on its stdout."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 log: Path | None = None) -> None:
        self.log = log
        err = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=ROOT,
            env={**os.environ, **(env or {})}, text=True, bufsize=1)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 0
        self.ready: dict[str, Any] = self.reply(timeout=60)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def reply(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"bench server {self.pid}: no reply in {timeout:g} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"bench server {self.pid} exited "
                                   f"(code {self.proc.poll()}); see {self.log}")
            line = line.strip()
            if line.startswith("{"):
                return dict(json.loads(line))

    def send(self, command: dict[str, Any]) -> int:
        self._next_id += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**command, "id": self._next_id}) + "\n")
        self.proc.stdin.flush()
        return self._next_id

    def call(self, command: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        wanted = self.send(command)
        while True:
            answer = self.reply(timeout)
            if answer.get("id") == wanted:
                if "error" in answer:
                    raise RuntimeError(f"bench server: {answer['error']}")
                return answer

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.send({"cmd": "quit"})
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


# --- the store benchmarks' round (store_bench.py, settle_chunks.py) ------------------------
# livetable is imported when called, not here: settle_chunks.py --root puts another
# checkout first on sys.path before it asks.


def wide_limits() -> Limits:
    """Table limits no benchmark bet reaches."""
    from livetable.protocol import Limits

    return Limits(min=1, max=10**9, pair_min=1, pair_max=10**9, round_max=10**12)


def settle_effect(table: str, round_id: str) -> SettleRound:
    """The SettleRound of one fixed round (P1 9D 7C, …, Banker 6S 8S), by the rules: every
    spot a result, some won, some lost."""
    from livetable.engine.effects import SettleRound
    from livetable.rules import DEAL_ORDER, hand_of, parse_cards, settle_round

    cards = ["9D", "7C", "KH", "9H", "5C", "5S", "JD", "AC", "2H", "4H", "6S", "8S"]
    hands = {pos: hand_of(parse_cards(f"{cards[2 * i]} {cards[2 * i + 1]}"))
             for i, pos in enumerate(DEAL_ORDER)}
    spots: dict[str, tuple[str, int, int]] = {
        k.value: (v.outcome, v.odds, v.returned_multiple)
        for k, v in settle_round(hands).items()}
    return SettleRound(table=table, round_id=round_id, spots=spots,
                       cards={pos.value: [str(c) for c in hands[pos].cards]
                              for pos in DEAL_ORDER})
