"""A throwaway ``redis-server`` for tests: our own process on a free port, never 6379.

    with start_redis(tmp_path) as server:      # or: server = start_redis(tmp_path)
        url = fresh_database()                 # the money: PostgreSQL (tests/pg_util.py)
        ...
        server.kill()       # SIGKILL: a crash, no shutdown save
        server.restart()    # the same port and directory: an AOF test reads back what survived

The server keeps no RDB snapshots (``--save ""``); with ``appendonly=True`` it keeps an AOF in
its directory, fsynced per ``appendfsync`` (``always`` by default, so that whatever Redis
acknowledged survives a SIGKILL of the server).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from procutil import free_port, kill, stop

REDIS_SERVER = os.environ.get("LIVETABLE_REDIS_SERVER") or shutil.which("redis-server") \
    or "/usr/bin/redis-server"

STARTUP_TIMEOUT_S = 10.0


def redis_available() -> bool:
    return Path(REDIS_SERVER).exists()


def _ping(port: int, auth: tuple[str, str] | None = None) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            if auth is not None:  # inline commands: user and password hold no spaces
                s.sendall(f"AUTH {auth[0]} {auth[1]}\r\n".encode())
                if not s.recv(64).startswith(b"+OK"):
                    return False
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process owned by a test; its data lives in ``directory``."""

    def __init__(self, directory: Path, port: int, *, appendonly: bool = False,
                 appendfsync: str = "always", config: Path | None = None,
                 auth: tuple[str, str] | None = None) -> None:
        """``config``: a redis.conf read first (the flags below override it); ``auth``:
        (user, password) that :attr:`url` and the start-up PING use, for a server whose
        config turns the default user off."""
        self.directory = Path(directory)
        self.port = port
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.config = config
        self.auth = auth
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        user = "" if self.auth is None else f"{self.auth[0]}:{self.auth[1]}@"
        return f"redis://{user}127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _command(self) -> list[str]:
        return [
            REDIS_SERVER,
            *([str(self.config)] if self.config is not None else []),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
            "--daemonize", "no",
        ]

    def start(self) -> RedisServer:
        if self.running:
            raise RuntimeError(f"redis-server on port {self.port} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}; "
                                   f"see {self.directory / 'redis.log'}")
            if _ping(self.port, self.auth):
                return self
            time.sleep(0.01)
        self.kill()
        raise RuntimeError(f"redis-server on port {self.port} did not answer PING")

    def kill(self) -> None:
        """SIGKILL: the server dies as in a crash (nothing flushed on the way out)."""
        kill(self.process)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM); falls back to SIGKILL if it takes too long."""
        stop(self.process)

    def restart(self) -> RedisServer:
        """Start again on the same port and directory (stopping it cleanly if it still runs;
        call :meth:`kill` first to test a crash)."""
        self.stop()
        return self.start()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()


def start_redis(tmp_path: Path, appendonly: bool = False, *,
                appendfsync: str = "always", config: Path | None = None,
                auth: tuple[str, str] | None = None) -> RedisServer:
    """Start a fresh ``redis-server`` in ``tmp_path`` on a free port and wait for PING."""
    last: Exception | None = None
    for _ in range(5):  # another process may grab the free port between probe and bind
        server = RedisServer(tmp_path, free_port(), appendonly=appendonly,
                             appendfsync=appendfsync, config=config, auth=auth)
        try:
            return server.start()
        except RuntimeError as exc:
            last = exc
            with contextlib.suppress(Exception):
                server.kill()
    raise RuntimeError(f"could not start redis-server: {last}")
