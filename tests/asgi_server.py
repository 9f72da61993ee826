"""An ASGI app served on a real loopback socket inside the test's event loop (uvicorn).

The wallet's client speaks HTTP over sockets only (aiohttp has no in-process transport),
so the unit tests serve the reference operator this way: real requests, real keep-alive
connections, no child process to start or stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


@contextlib.asynccontextmanager
async def served(app: Any, **config: Any) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) while the block runs; yields its URL.
    ``config``: more of uvicorn's settings (``ws=``, ``ws_max_size=`` …)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                           timeout_graceful_shutdown=1, **config))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
