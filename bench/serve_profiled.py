"""``livetable serve`` with cProfile switched on and off by signals, so that a profile covers
only the measured window (bench only):

    python -m bench.serve_profiled OUT.prof serve --port … (any `livetable` arguments)

SIGUSR1 starts profiling the main thread (where the event loop runs); SIGUSR2 stops it and
writes OUT.prof.
"""

from __future__ import annotations

import cProfile
import signal
import sys
from types import FrameType


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    profile = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profile.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    from livetable.cli import main as livetable

    return livetable(argv)


if __name__ == "__main__":
    sys.exit(main())
