"""A local TCP proxy that can stop forwarding without closing anything: a silent network loss.

A phone that loses its signal sends no FIN and no RST; the browser fires no ``offline``
event; its sockets stay "open" and simply go quiet. :meth:`TcpProxy.stall` does exactly
that to every connection through the proxy: bytes are no longer passed on in either
direction, new connections are accepted and then left hanging, and nothing is closed.
:meth:`TcpProxy.restore` forwards again — for new connections; the ones that stalled are
closed then, as a real network would have timed them out long before.

:meth:`TcpProxy.hold` is the other kind of stall, a network that delays rather than
drops: every byte is kept, in order, and :meth:`TcpProxy.release` delivers it late (a
database's COMMIT that reaches it after the client gave up on it).

It runs its own asyncio loop in a thread, so a synchronous Playwright test can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.stalled = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._writers: set[asyncio.StreamWriter] = set()  # every socket of every connection
        self._held: set[asyncio.StreamWriter] = set()  # those open when the stall began
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None  # cleared while bytes are held

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for w in list(self._writers):
                w.close()
            # and every connection's task ended here, not left to be destroyed pending with
            # the loop ("Task was destroyed but it is pending!" in the suite's output)
            tasks = asyncio.all_tasks() - {asyncio.current_task()}
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self._call(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def stall(self) -> None:
        """Stop forwarding, silently: nothing is closed, nothing more gets through."""
        async def go() -> None:
            self.stalled = True
            self._held = set(self._writers)
        self._call(go())

    def hold(self) -> None:
        """Keep every byte from now on, in both directions, until :meth:`release`."""
        async def go() -> None:
            if self._flowing is None:
                self._flowing = asyncio.Event()
            self._flowing.clear()
        self._call(go())

    def release(self) -> None:
        """Deliver what was held, late and in order, and forward again."""
        async def go() -> None:
            if self._flowing is not None:
                self._flowing.set()
        self._call(go())

    def restore(self) -> None:
        """Forward again (new connections); close the connections that stalled."""
        async def go() -> None:
            self.stalled = False
            for w in self._held | {w for w in self._writers if getattr(w, "_stalled_new", False)}:
                w.close()
            self._held = set()
        self._call(go())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:  # any coroutine, run on the loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            if self.stalled:  # a connection made during the loss: accepted, then nothing
                writer._stalled_new = True  # type: ignore[attr-defined]  # a mark for restore()
                await reader.read()  # until the browser or restore() closes it
                return
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            self._writers.add(up_writer)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except OSError:
            pass
        finally:
            for w in (writer, locals().get("up_writer")):
                if w is not None:
                    self._writers.discard(w)
                    w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while True:
                data = await reader.read(65536)
                if not data or writer.is_closing():
                    break
                if self.stalled or writer in self._held:
                    continue  # lost on the way: a stalled line passes nothing
                if self._flowing is not None:
                    await self._flowing.wait()  # held: these bytes, and the next, wait
                writer.write(data)
                await writer.drain()
        writer.close()
