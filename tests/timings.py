"""The timings of every live server the tests start: one profile, the shortest safe.

Most of a server test's time is spent waiting for the table's clock, so every server the
tests start (``livetable serve``, scale-out engines and gateways, the end-to-end server)
takes its timings from here unless its test is about a timing. Each value is as short as a
loaded two-core machine allows for what tests do inside it:

* betting: a test connects, reads the round's opening and places a few bets over its
  websockets in that time (a browser test clicks: it has its own, longer, betting time);
* close grace: a bet that arrived before the close is still taken this long after it —
  nothing in these tests arrives late on purpose except the tests of the grace itself;
* reveals: far enough apart for a test to act "between two reveals" (resume, kill);
* dealing and the pause between rounds: nothing waits on them.

A test whose subject is a timing (the countdown, close grace, heartbeats, auto mode) sets
its own value, the shortest that still tests it.
"""

from __future__ import annotations

#: Seconds of betting of an auto round (``--betting-seconds``).
BETTING_SECONDS = 2.0
#: Seconds between two hands' reveals (``--reveal-interval``).
REVEAL_INTERVAL = 0.2

#: The rest of the profile, as the environment a server reads.
FAST_ENV = {
    "LIVETABLE_BETWEEN_ROUNDS": "0.3",
    "LIVETABLE_DEAL_INTERVAL": "0.02",
    "LIVETABLE_CLOSE_GRACE": "0.2",
    "LIVETABLE_HELLO_TIMEOUT": "1.5",
}
