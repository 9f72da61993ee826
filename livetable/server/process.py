"""What the web side reads of the process it serves: :class:`Process`, and
:func:`services_of` to find it from a request.

Why a protocol: the process's wiring (:class:`livetable.services.Services`) sits above
the web side — it builds the store, the bus, the runners and the gateway, and the app —
so the endpoints, the readiness check and the app's lifespan must not import it (an arrow
up, and a cycle). They name here what they read of it; ``Services`` has each of these, and
mypy checks that it still does where the app is made (``create_app`` takes a ``Process``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from starlette.requests import HTTPConnection

if TYPE_CHECKING:
    from livetable.bus import Bus
    from livetable.config import Settings
    from livetable.host.ledger_watch import LedgerWatch
    from livetable.host.restores import Announced
    from livetable.host.runner import TableRunner
    from livetable.host.scaleout import LeasedTables
    from livetable.metrics import Metrics
    from livetable.operator.log import WalletLog
    from livetable.operator.registry import Registry
    from livetable.operator.seamless import SeamlessWallet
    from livetable.server.gateway import Gateway
    from livetable.server.stills import Stills
    from livetable.store.base import Store

#: "gateway" (websockets, HTTP API) and/or "engine" (runs the tables).
Role = Literal["gateway", "engine"]


class Process(Protocol):
    """The parts of one process that its HTTP side reads (all of them built by the
    wiring, :class:`livetable.services.Services`)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def roles(self) -> tuple[Role, ...]: ...
    @property
    def secret(self) -> bytes: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def store(self) -> Store: ...
    @property
    def bus(self) -> Bus: ...
    @property
    def gateway(self) -> Gateway: ...
    @property
    def stills(self) -> Stills: ...
    @property
    def runners(self) -> dict[str, TableRunner]: ...
    #: The steps this process's engines announced, kept beside the store (a restore's
    #: detection), or None.
    @property
    def announced(self) -> Announced | None: ...
    @property
    def leases(self) -> LeasedTables | None: ...
    #: The Redis connection of the leases (an engine's readiness pings it), or None.
    @property
    def lease_redis(self) -> Any: ...
    @property
    def ledger(self) -> LedgerWatch: ...
    @property
    def operators(self) -> Registry: ...
    @property
    def wallet(self) -> SeamlessWallet | None: ...
    @property
    def wallet_log(self) -> WalletLog | None: ...
    #: The store's write probe for readiness: (commit seconds or None, what failed or None).
    @property
    def write_probe(self) -> Callable[[float], Awaitable[tuple[float | None, str | None]]] | None:
        ...

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def services_of(conn: HTTPConnection) -> Process:
    """The :class:`Process` of the app serving ``conn`` (set by ``server.app.create_app``)."""
    process: Process = conn.app.state.services
    return process
