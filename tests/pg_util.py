"""Throwaway PostgreSQL servers for tests: a primary and, when asked, a synchronous standby,
our own processes on free loopback ports (never 5432), from Debian's server binaries.

    url = fresh_database()                # a new database on the session's one server
    cluster = start_pg()                  # a primary alone, of the caller's own
    cluster = start_pg(standby=True)      # and a streaming standby, synchronous once it is up
    cluster = start_pg(standby=True, synchronous=False)  # an asynchronous one (a misconfig)
    cluster.url                           # a multi-host libpq URL (target_session_attrs)
    cluster.primary.kill()                # SIGKILL the postmaster and every backend: a crash
    cluster.standby.promote()             # the standby takes over
    cluster.stop()

Why this shape. PostgreSQL refuses to run as root (CI runs as root), so the servers run as
the ``postgres`` user (``runuser -u postgres --``) in a directory that user owns, made under
/tmp (pytest's own tmp folders are closed to other users). ``synchronous_standby_names`` is
set only once the standby streams: before that a commit on the primary would wait for a
standby that is not there. Killing a server kills the postmaster *and* its backends by PID
(read from ``postmaster.pid`` and /proc), as the loss of the machine would: a backend left
behind would keep answering its connection. ``fsync=off``: the tests kill processes, not
the machine, so what a server wrote is in the OS's cache either way.

One server per test session (:func:`shared_pg`): a test that does not kill PostgreSQL takes
a database of its own on it (:func:`fresh_database`, ``CREATE DATABASE``: about 0.1 s)
rather than a server of its own (a copy, a start and a stop: seconds on a busy machine).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from procutil import free_port

STARTUP_TIMEOUT_S = 30.0
USER = "livetable"


def pg_bin() -> Path | None:
    """The newest Debian server binaries (/usr/lib/postgresql/<major>/bin), if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parts[-3]))
    return Path(found[-1]).parent if found else None


def pg_available() -> bool:
    return pg_bin() is not None


def _as_owner(command: list[str]) -> list[str]:
    """Run as ``postgres`` when we are root (PostgreSQL refuses root), else as ourselves."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in Path(task).read_text().split()]
    return found


class PgServer:
    """One postmaster owned by a test, its data in ``directory``."""

    def __init__(self, directory: Path, port: int, log: Path) -> None:
        self.directory = directory
        self.port = port
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def _bin(self, name: str) -> str:
        found = pg_bin()
        assert found is not None, "no PostgreSQL server binaries"
        return str(found / name)

    def start(self, *settings: str) -> PgServer:
        command = [self._bin("postgres"), "-D", str(self.directory), "-p", str(self.port),
                   "-c", "listen_addresses=127.0.0.1",
                   "-c", f"unix_socket_directories={self.directory.parent}",
                   "-c", "fsync=off", "-c", "max_connections=200",
                   "-c", "shared_buffers=64MB", "-c", "wal_level=replica",
                   "-c", "max_wal_senders=4", "-c", "wal_sender_timeout=5s",
                   "-c", "wal_receiver_status_interval=1s"]
        for setting in settings:
            command += ["-c", setting]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(_as_owner(command), stdout=out, stderr=out)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}; "
                                   f"see {self.log}")
            # ours, not another test worker's server that took the port first
            if self.sql("SHOW data_directory", check=False) == str(self.directory.resolve()):
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"postgres on port {self.port} did not answer; see {self.log}")

    def sql(self, query: str, *, check: bool = True, database: str = "postgres") -> str:
        """Run ``query`` with psql; its output, unaligned (empty if it failed unchecked)."""
        done = subprocess.run(
            [self._bin("psql"), "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER,
             "-d", database, "-Atc", query], capture_output=True, text=True, timeout=30)
        if check and done.returncode != 0:
            raise RuntimeError(f"psql on port {self.port}: {done.stderr.strip()}")
        return done.stdout.strip() if done.returncode == 0 else ""

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.directory / "postmaster.pid").read_text().split()[0])
        return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process it started, by PID: a crash."""
        pid = self.postmaster_pid()
        if pid is not None:
            for victim in [pid, *_children(pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait(timeout=10)
        with contextlib.suppress(OSError):
            (self.directory / "postmaster.pid").unlink()

    def stop(self) -> None:
        """A fast shutdown (SIGINT to the postmaster); SIGKILL if it takes too long."""
        pid = self.postmaster_pid()
        if pid is not None and self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        self.kill()

    def promote(self) -> None:
        """Make this standby the primary, and wait until it takes writes."""
        self.sql("SELECT pg_promote(true, 30)")
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while self.sql("SELECT pg_is_in_recovery()") != "f":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby on port {self.port} was not promoted")
            time.sleep(0.05)


class PgCluster:
    """A primary and an optional synchronous standby, in one directory of their own."""

    def __init__(self, root: Path, primary: PgServer, standby: PgServer | None) -> None:
        self.root = root
        self.primary = primary
        self.standby = standby

    @property
    def url(self) -> str:
        """Both servers in one libpq URL: a client follows the one that takes writes."""
        ports = [self.primary.port] + ([self.standby.port] if self.standby else [])
        hosts = ",".join(f"127.0.0.1:{port}" for port in ports)
        return f"postgresql://{USER}@{hosts}/postgres?target_session_attrs=read-write"

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            if server is not None:
                server.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _run(command: list[str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(_as_owner(command), stdout=out, stderr=out, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed; see {log}")


def _wait_sync(primary: PgServer) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while primary.sql("SELECT sync_state FROM pg_stat_replication") != "sync":
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not become synchronous")
        time.sleep(0.05)


_templates: dict[Path, Path] = {}


def _template(found: Path) -> Path:
    """A fresh cluster directory made by ``initdb`` once per process, copied for each
    cluster (``initdb`` takes seconds on a busy machine; a copy, a fraction of one)."""
    if found not in _templates:
        root = Path(tempfile.mkdtemp(prefix="livetable-pg-template-"))
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(root, owner.pw_uid, owner.pw_gid)
        _run([str(found / "initdb"), "-D", str(root / "data"), "-U", USER, "--auth=trust",
              "-E", "UTF8", "--no-sync", "--no-instructions"], root / "initdb.log")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _templates[found] = root / "data"
    return _templates[found]


def _start_on_a_free_port(data: Path, log: Path, tries: int = 5) -> PgServer:
    """A server on a port free a moment ago: with tests on several workers another may take
    it first (postgres then exits: start again on another), as redis_util's start does."""
    for attempt in range(tries):
        try:
            return PgServer(data, free_port(), log).start()
        except RuntimeError:
            if attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def start_pg(*, standby: bool = False, synchronous: bool = True) -> PgCluster:
    """A fresh primary (and a standby, synchronous unless told otherwise) on free ports, as
    ``postgres``."""
    found = pg_bin()
    if found is None:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql "
                           "(bin/setup --test installs them)")
    root = Path(tempfile.mkdtemp(prefix="livetable-pg-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    log = root / "postgres.log"
    subprocess.run(["cp", "-a", str(_template(found)), str(root / "primary")], check=True)
    primary = _start_on_a_free_port(root / "primary", root / "primary.log")
    second: PgServer | None = None
    try:
        if standby:
            _run([str(found / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port),
                  "-U", USER, "-D", str(root / "standby"), "-R", "-X", "stream", "-c", "fast",
                  "--no-sync"], log)
            second = _start_on_a_free_port(root / "standby", root / "standby.log")
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while primary.sql("SELECT state FROM pg_stat_replication") != "streaming":
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby does not stream")
                time.sleep(0.05)
            if not synchronous:
                return PgCluster(root, primary, second)
            # only now: a commit waits for the standby's flush from here on
            primary.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
            primary.sql("ALTER SYSTEM SET synchronous_commit = 'on'")
            primary.sql("SELECT pg_reload_conf()")
            _wait_sync(primary)
    except BaseException:
        PgCluster(root, primary, second).stop()
        raise
    return PgCluster(root, primary, second)


_shared: PgCluster | None = None
_databases = itertools.count(1)


def shared_pg() -> PgCluster:
    """The one PostgreSQL primary of this test process, started at the first call and
    stopped when the process exits. Never kill it: a test that does starts its own."""
    global _shared
    if _shared is None:
        _shared = start_pg()
        atexit.register(_shared.stop)
    return _shared


def fresh_database() -> str:
    """A new, empty database on :func:`shared_pg`: its URL (the store migrates it)."""
    server = shared_pg().primary
    name = f"lt_{os.getpid()}_{next(_databases)}"
    server.sql(f"CREATE DATABASE {name}")
    return f"postgresql://{USER}@127.0.0.1:{server.port}/{name}"
