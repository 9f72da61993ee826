"""Launch requests seen: a captured launch is not a login.

A launch (``POST /api/operator/sessions``) carries a ``request_id`` and a signed timestamp.
The timestamp bounds a replay to :data:`~livetable.operator.signatures.MAX_SKEW_MS`; the
``request_id``, kept for :data:`KEPT_MS` (longer than any timestamp is accepted, so a
replay that passes the clock check is always still remembered), makes each launch usable
once.

The ids are kept in the store (``Store.first_launch``: a row per id, the first insert
wins), not in a process's memory or in Redis: kept there, a launch captured and replayed
after a restart of the embedded service, or after Redis restarted empty, was accepted
again, since the store was the only thing that remembered it and it did not. Any gateway
may take a launch; every one asks the same store.
"""

from __future__ import annotations

#: How long a launch's request_id is remembered (ms): ten minutes, twice the clock skew a
#: signed timestamp may have either way.
KEPT_MS = 600_000
