"""What the clock does to a table: deal, close betting, reveal, open the next round.

The engine's commands are what a dealer can ask; time asks some of them too. In auto mode
the table deals its cards face down while betting is open, closes betting at its deadline
(plus the grace for bets that arrived in time), reveals, and opens the next round; in
manual mode the clock only closes betting and, if set, opens the next round. :func:`tick`
does what is due by ``now`` through the table's own commands, so every move passes the
same checks as a dealer's. After a crash, :func:`recover` finishes a round whose cards are
all in, or cancels it with full refunds. When the clock is next needed:
:func:`livetable.engine.views.next_deadline`.
"""

from __future__ import annotations

from typing import Protocol

from livetable.engine import views
from livetable.engine.effects import Step
from livetable.engine.state import TableState
from livetable.engine.transitions import BETWEEN_ROUNDS


class Paced(Protocol):
    """The commands the clock drives (:class:`~livetable.engine.table.TableEngine`'s)."""

    @property
    def state(self) -> TableState: ...

    def open_betting(self, now: int, betting_ms: int | None = None) -> Step: ...
    def close_betting(self, now: int) -> Step: ...
    def deal(self, due: int) -> Step: ...
    def reveal(self, now: int) -> Step: ...
    def resume(self, now: int) -> Step: ...
    def cancel_round(self, reason: str, now: int) -> Step: ...


def tick(table: Paced, now: int) -> Step:
    """The clock: deal (auto mode) and close betting at its deadline; in auto mode
    reveal and go on; in manual mode open the next round if that is set."""
    s = table.state
    step = Step()
    for _ in range(64):  # bounded: a tick far in the future catches up step by step
        if s.phase == "betting" and s.closes_at is not None:
            close = s.closes_at + s.timing.close_grace_ms
            deal = s.next_at if s.mode == "auto" else None
            if deal is not None and deal <= now and deal <= close:
                step.extend(table.deal(deal))  # face down, bets still open
                continue
            if now >= close:
                step.extend(table.close_betting(close))
                continue
            break
        if s.next_at is None or now < s.next_at or s.phase == "paused":
            break
        due = s.next_at
        if s.phase in BETWEEN_ROUNDS:
            if s.mode == "manual" and (s.shoe is None or s.shoe.awaiting_open_card
                                       or s.last_round):
                s.next_at = None  # the dealer starts the next shoe
                break
            step.extend(table.open_betting(max(due, now)))
        elif s.mode != "auto":
            break
        elif s.phase == "dealing":
            step.extend(table.deal(due))
        elif s.phase == "revealing":
            # paced from when it happens: a late clock (a runner held up by a partition)
            # reveals one hand, not every hand due and the settlement in one millisecond
            step.extend(table.reveal(max(due, now)))
        else:
            break
    return step

def recover(table: Paced, now: int) -> Step:
    """After a crash: a round whose cards are all recorded and whose betting had closed
    is revealed and settled; any other unfinished round is cancelled with full refunds.
    Never both, never neither.
    """
    s = table.state
    phase = s.paused_from if s.phase == "paused" else s.phase
    step = Step()
    if phase == "revealing":
        if s.phase == "paused":
            step.extend(table.resume(now))
        if s.mode == "auto":
            s.next_at = now + s.timing.reveal_interval_ms
        return step
    if phase in ("betting", "dealing"):
        step.extend(table.cancel_round("the table restarted before all cards were dealt",
                                      now))
        return step
    if s.phase in BETWEEN_ROUNDS:
        s.next_at = views.next_round_at(s, now)
    return step
