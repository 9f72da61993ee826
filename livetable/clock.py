"""The one clock of livetable: Unix epoch milliseconds (integers, as on the wire)."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
