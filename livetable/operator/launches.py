"""Launch requests seen: a captured launch is not a login.

A launch (``POST /api/operator/sessions``) carries a ``request_id`` and a signed timestamp.
The timestamp bounds a replay to :data:`~livetable.operator.signatures.MAX_SKEW_MS`; the
``request_id``, kept here for :data:`KEPT_MS` (longer than any timestamp is accepted, so a
replay that passes the clock check is always still remembered), makes each launch usable
once. Any gateway may take a launch, so in scale-out the ids are kept where every gateway
sees them: in Redis, one key per id with its own expiry (``SET NX PX``: the first gateway
to write it wins, atomically). The embedded service is one process: a dictionary.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

#: How long a launch's request_id is remembered (ms): ten minutes, twice the clock skew a
#: signed timestamp may have either way.
KEPT_MS = 600_000


class LaunchRequests(Protocol):
    async def first(self, operator_id: str, request_id: str) -> bool:
        """Whether this is the first time ``operator_id`` sent ``request_id`` (in the last
        :data:`KEPT_MS`); it is remembered from now on."""
        ...


class MemoryLaunchRequests:
    """One process's memory (the embedded service)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], float] = {}

    async def first(self, operator_id: str, request_id: str) -> bool:
        now = time.monotonic()
        if len(self._seen) > 10_000:  # forget the expired now and then, not on every call
            self._seen = {key: at for key, at in self._seen.items()
                          if now - at < KEPT_MS / 1000}
        key = (operator_id, request_id)
        seen = self._seen.get(key)
        if seen is not None and now - seen < KEPT_MS / 1000:
            return False
        self._seen[key] = now
        return True


class RedisLaunchRequests:
    """Every gateway's: one key per request id in the deployment's Redis."""

    def __init__(self, redis: Any, key: Any) -> None:
        self._redis = redis
        #: ``key(operator_id, request_id)`` → the key's name (bus/keys.py names it).
        self._key = key

    async def first(self, operator_id: str, request_id: str) -> bool:
        return bool(await self._redis.set(self._key(operator_id, request_id), b"1",
                                          nx=True, px=KEPT_MS))
