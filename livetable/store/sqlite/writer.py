"""The SQLite ledger in a child process: the embedded store's writer off the server's GIL.

Why. The SQLite store runs every operation on one writer (store/sqlite/__init__.py). In a thread,
that writer shares the interpreter lock with the event loop: in a burst of 20,000 bets in
two seconds the writer spent 49 µs of CPU but 118 µs of wall time a slip, and the loop
waited as long for its turn — an ack p99 of 951 ms where the same burst, with the store's
work stubbed, is answered with a p99 of 6 ms (docs/benchmarks.md). A second
process has its own interpreter lock and its own core: the loop keeps the sockets, the
child keeps the ledger. ``livetable serve`` runs its ledger this way
(``LIVETABLE_SQLITE_WRITER=process``, the default); tests and tools that open a store
in-process keep the thread.

How. :class:`WriterProcess` starts ``python -c _CHILD FD`` (:func:`main`) with one end of
a socket pair, sends it the store's options (:class:`WriterOptions`: the state key among
them, never on the command line, where ``ps`` shows it) and waits for it to open the
database and run the migrations. From then on each call is one frame each way, behind a
head of its length and its call's id: the call out (a
:class:`~livetable.store.sqlite.ledger.calls.Call`, a typed Struct per operation of the ledger),
its answer back, both in msgpack (msgspec), the call decoded by the union of every call
and the answer by the call's own answer type — what a batch of slips costs this process
to send and read back is what its event loop pays, and pickle cost ten times as much
(13 µs against 1.3 µs a slip, measured). An exception comes back
pickled: any exception may cross. The child runs the calls one after another, as the
writer thread did. (So the store can keep two batches of slips in flight: the child starts
the next as soon as it has sent an answer, not once a busy event loop has read it.)

Each answer is matched to its call by the id the child copies from the request, never by
the order of a waiting list: a call is registered only once its frame is built (a value
that cannot be encoded fails that call alone, before anything is queued), and an answer
that names no waiting call is dropped with an error in the log. A list kept in order was
one entry off for good after a request failed to encode (a ``get_bets`` with a limit of
2^70 did), and every later answer went to the caller before — another player's Bet Record
to a guest (docs/security.md). The child opens its own
:class:`~livetable.store.sqlite.ledger.core.Ledger` and runs each call with
:func:`~livetable.store.sqlite.ledger.calls.perform`, as the writer thread does: there is one SQL
path.

Faults. The child turns SQLite's outages into
:class:`~livetable.store.base.StoreUnavailable` before they cross (with
``store.sqlite.ledger.schema.is_sqlite_outage``, as the writer thread's ``SQLiteStore._run``
does); a
bug crosses as itself, its traceback in the child added as a note. If the child dies,
every call waiting on it fails with ``StoreUnavailable`` and the next call starts a new
child (a store outage to the runner and the gateway: retried, answered ``unavailable``).
The child ignores SIGINT and SIGTERM and ends when its socket closes — on
:meth:`WriterProcess.close`, or when the server process dies, however it dies — so a
Ctrl-C in a terminal never kills the ledger under a server that is still shutting down,
and no child outlives its server.

Why our own frames rather than ``multiprocessing``: its ``Connection`` blocks on reads,
which would take a thread per store in the server and hand the lock back and forth with
it; here the server side is one asyncio stream, and the child is a plain blocking loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pickle
import signal
import socket
import sqlite3
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import msgspec

from livetable.store.base import StoreUnavailable
from livetable.store.sealing import StateSeal
from livetable.store.sqlite.ledger.calls import (
    Call,
    CloseLedger,
    LedgerCall,
    answer_type,
    run_counting,
)
from livetable.store.sqlite.ledger.core import Ledger
from livetable.store.sqlite.ledger.schema import is_sqlite_outage, outage

A = TypeVar("A")

log = logging.getLogger("livetable.store.sqlite.writer")

#: How long a new child may take to open the database and migrate it.
START_TIMEOUT = 60.0
#: How long :meth:`WriterProcess.close` waits for the child to end before killing it.
STOP_TIMEOUT = 10.0

#: The child's command line: ``python -c _CHILD FD``.
_CHILD = "import sys; from livetable.store.sqlite.writer import main; sys.exit(main(sys.argv))"
_SIZE = 4  # bytes of a frame's length, big-endian
_CALL = 8  # bytes of its call's id, big-endian (a request's, copied into its answer)
_HEAD = _SIZE + _CALL  # a frame's head: its length (of what follows the head), its call
_OK, _RAISED, _WROTE = b"\x00", b"\x01", b"\x02"  # an answer's first byte (_WROTE: an
#: answer whose call changed the ledger: calls.run_counting)


class WriterOptions(msgspec.Struct, frozen=True):
    """What the child opens its ledger with (its first frame)."""

    path: str
    event_retention: int
    seal_key: bytes | None
    synchronous: str


_encoder = msgspec.msgpack.Encoder()
_calls = msgspec.msgpack.Decoder(LedgerCall)


@functools.cache
def _answer(kind: type[Call[Any]]) -> msgspec.msgpack.Decoder[Any]:
    """How the server reads the answer to a call of ``kind``: by its answer type."""
    return msgspec.msgpack.Decoder(answer_type(kind))


def _frame(prefix: bytes, value: Any, call: int = 0) -> bytearray:
    """One frame of call ``call``: its head, ``prefix``, then ``value`` in msgpack, written
    in place (a batch of 2,000 slips or a chunk's results is copied once, not three times).
    A request has no prefix (the call is the value); an answer's is :data:`_OK`.
    Raises (OverflowError, TypeError) if ``value`` cannot be encoded."""
    frame = bytearray(_HEAD) + prefix
    _encoder.encode_into(value, frame, len(frame))
    return _sized(frame, call)


def _sized(frame: bytearray, call: int = 0) -> bytearray:
    """``frame`` (its first :data:`_HEAD` bytes left for it) with its head written in."""
    frame[:_SIZE] = (len(frame) - _HEAD).to_bytes(_SIZE, "big")
    frame[_SIZE:_HEAD] = call.to_bytes(_CALL, "big")
    return frame


def _raised(exc: BaseException, call: int = 0) -> bytearray:
    """The answer that raises ``exc`` in the server: SQLite's outages as StoreUnavailable,
    anything else with its traceback in the child as a note (as a RuntimeError if it
    cannot be pickled)."""
    trace = "".join(traceback.format_exception(exc)).rstrip()
    if isinstance(exc, sqlite3.Error) and is_sqlite_outage(exc):
        exc = outage(exc)
    elif not isinstance(exc, StoreUnavailable):
        exc.add_note("in the SQLite writer process:\n" + trace)
    try:
        body = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an exception that cannot be pickled still reaches the server
        body = pickle.dumps(RuntimeError(f"in the SQLite writer process: {exc!r}\n{trace}"),
                            protocol=pickle.HIGHEST_PROTOCOL)
    return _sized(bytearray(_HEAD) + _RAISED + body, call)


def _read_body(stream: BinaryIO) -> tuple[int, bytes]:
    """The next frame's call id and body from a blocking stream; EOFError when the other
    end closed."""
    head = stream.read(_HEAD)
    if len(head) < _HEAD:
        raise EOFError
    size = int.from_bytes(head[:_SIZE], "big")
    body = stream.read(size)
    if len(body) < size:
        raise EOFError
    return int.from_bytes(head[_SIZE:], "big"), body


class WriterProcess:
    """A :class:`~livetable.store.sqlite.SQLiteStore`'s ledger in a child process.

    The constructor blocks until the child has opened the database (it runs where the
    store is built, before the server serves); an error opening it is raised here, as the
    store's own constructor raises it in thread mode.
    """

    def __init__(self, options: WriterOptions) -> None:
        self._options = options
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task[None] | None = None
        #: the calls sent and not answered yet, by call id: (its kind, its future)
        self._waiting: dict[int, tuple[type[Call[Any]], asyncio.Future[Any]]] = {}
        self._last_call = 0  # the id of the last call sent (0: the ``open`` of a child)
        self._connecting: asyncio.Lock | None = None
        self._closing = False
        self._start()

    @property
    def pid(self) -> int | None:
        """The child's process id (None before it starts again after a crash)."""
        return None if self._proc is None else self._proc.pid

    def _start(self) -> None:
        """Start a child and wait until its database is open (blocking)."""
        ours, theirs = socket.socketpair()
        root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        finally:
            theirs.close()
        try:
            ours.settimeout(START_TIMEOUT)
            ours.sendall(_frame(b"", self._options))
            with ours.makefile("rb") as stream:
                _, body = _read_body(stream)
        except (OSError, EOFError) as exc:
            proc.kill()
            proc.wait()
            ours.close()
            raise StoreUnavailable(f"the SQLite writer process did not start "
                                   f"(exit code {proc.returncode}): {exc!r}") from exc
        if body[:1] == _RAISED:
            proc.wait(STOP_TIMEOUT)
            ours.close()
            raise pickle.loads(body[1:])
        ours.settimeout(None)
        ours.setblocking(False)
        self._proc, self._sock = proc, ours

    async def _connect(self) -> asyncio.StreamWriter:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None:
                return self._writer
            if self._closing:
                raise StoreUnavailable("the SQLite store is closed")
            if self._sock is None:  # the child died: start another
                await asyncio.to_thread(self._start)
            assert self._sock is not None
            reader, writer = await asyncio.open_connection(sock=self._sock)
            self._reading = asyncio.get_running_loop().create_task(self._read(reader))
            self._writer = writer
            return writer

    async def call(self, call: Call[A]) -> A:
        """Run ``call`` on the child's ledger; its answer or its exception."""
        return (await self.call_counting(call))[0]

    async def call_counting(self, call: Call[A]) -> tuple[A, bool]:
        """:meth:`call`, and whether it changed the ledger (``calls.run_counting``)."""
        self._last_call = number = self._last_call + 1
        # the frame first: arguments that cannot be encoded fail this call, and nothing
        # has been registered that an answer could be matched to
        frame = _frame(b"", call, number)
        writer = self._writer or await self._connect()
        future: asyncio.Future[tuple[A, bool]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = (type(call), future)
        try:
            writer.write(frame)
            return await future
        finally:
            self._waiting.pop(number, None)  # answered, cancelled, or never sent

    async def _read(self, reader: asyncio.StreamReader) -> None:
        why: BaseException | None = None
        try:
            while True:
                head = await reader.readexactly(_HEAD)
                body = await reader.readexactly(int.from_bytes(head[:_SIZE], "big"))
                call = int.from_bytes(head[_SIZE:], "big")
                waiting = self._waiting.pop(call, None)
                if waiting is None:  # its caller was cancelled (or a bug: said below)
                    if not 0 < call <= self._last_call:
                        log.error("the SQLite writer process answered call %d, never "
                                  "sent: dropped", call)
                    continue
                kind, future = waiting
                if future.done():
                    continue
                try:
                    if body[:1] in (_OK, _WROTE):
                        future.set_result((_answer(kind).decode(memoryview(body)[1:]),
                                           body[:1] == _WROTE))
                    else:
                        future.set_exception(pickle.loads(body[1:]))
                except Exception as exc:  # an answer this process cannot read: its
                    future.set_exception(exc)  # caller's failure, no other call's
        except (asyncio.IncompleteReadError, OSError) as exc:
            why = exc
        finally:
            self._lost(why)

    def _lost(self, why: BaseException | None) -> None:
        """The child's socket closed: fail what waits on it; the next call starts anew."""
        writer, self._writer, self._sock = self._writer, None, None
        if writer is not None:
            writer.close()
        proc = self._proc
        code = None if proc is None else proc.poll()
        waiting = list(self._waiting.values())
        self._waiting.clear()
        for _, future in waiting:
            if not future.done():
                future.set_exception(StoreUnavailable(
                    f"the SQLite writer process ended (exit code {code})"))
        if self._closing:
            return  # close() reaps the child
        self._proc = None
        log.error("the SQLite writer process ended (exit code %s, %r): calls waiting on it "
                  "fail as an outage, the next call starts another", code, why)
        if proc is not None and code is None:
            asyncio.get_running_loop().run_in_executor(None, _reap, proc)

    async def close(self) -> None:
        """Close the database in the child and wait for the child to end (a child that
        was never called is told by its socket closing)."""
        if self._closing:
            return
        self._closing = True
        if self._writer is not None:
            with contextlib.suppress(StoreUnavailable):
                await self.call(CloseLedger())
            self._writer.close()
        elif self._sock is not None:
            self._sock.close()
        self._sock = None
        if self._reading is not None:
            await self._reading
        proc, self._proc = self._proc, None
        if proc is not None:
            await asyncio.to_thread(_reap, proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        log.error("the SQLite writer process %d did not end: killed", proc.pid)
        proc.kill()
        proc.wait()


def main(argv: list[str]) -> int:
    """The child: open the ledger, then run calls until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ended by its socket, never by a signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[1]))
    stream = sock.makefile("rb")

    def answer(frame: bytearray) -> bool:
        try:
            sock.sendall(frame)
            return True
        except OSError:  # the server is gone; what was committed stays committed
            return False

    try:
        _, body = _read_body(stream)
        options = msgspec.msgpack.decode(body, type=WriterOptions)
        ledger = Ledger(options.path, options.event_retention,
                        None if options.seal_key is None else StateSeal(options.seal_key),
                        options.synchronous)
    except EOFError:
        return 0
    except Exception as exc:
        answer(_raised(exc))
        return 1
    if answer(_frame(_OK, None)):
        _serve(ledger, stream, answer)
    ledger.close()
    return 0


def _serve(ledger: Ledger, stream: BinaryIO, answer: Callable[[bytearray], bool]) -> None:
    """Run each call read from ``stream`` and answer it, until the socket closes or the
    server closes the ledger."""
    while True:
        try:
            number, body = _read_body(stream)
        except EOFError:  # the server closed it, or died
            return
        call: LedgerCall | None = None
        try:
            call = _calls.decode(body)
            value, wrote = run_counting(ledger, cast("Call[object]", call))
            frame = _frame(_WROTE if wrote else _OK, value, number)
        except Exception as exc:
            frame = _raised(exc, number)
        if not answer(frame) or isinstance(call, CloseLedger):
            return
