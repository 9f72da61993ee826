"""Which command is legal in which phase of a round, and where it leads: one table.

:data:`TRANSITIONS` maps ``(phase, command) -> phase``; a pair that is not there is refused
and the refused command changes nothing. Two of its rows are moves the engine makes by
itself when a condition holds (h11's "state-triggered" transitions): ``all_dealt``
(betting has closed and the thirteenth card is out: reveal) and ``banker_revealed``
(settle). Kept apart from the engine so that the table reads on one screen, and so that
the one function that changes a table's phase (:meth:`TableEngine._move
<livetable.engine.table.TableEngine._move>`) has nothing to consult but this.
"""

from __future__ import annotations

from typing import Literal

from livetable import protocol as p

Phase = p.Phase

#: What the outside asks of the engine (dealer commands; the clock asks for some in auto mode).
Command = Literal[
    "start_shoe", "open_betting", "close_betting", "card", "void_cards", "reveal", "pause",
    "resume", "cancel_round", "set_mode",
]
#: What the engine does by itself when a condition holds (see the module docstring).
Move = Literal["all_dealt", "banker_revealed"]
#: What the engine announces about a round from figures the shell read from the store (the
#: bets' spread at the close, the biggest wins once settled): the phase stays where it is.
Announcement = Literal["bet_stats", "round_winners"]
#: The target of ``resume``: the phase the table was paused from.
BEFORE_PAUSE: Literal["before_pause"] = "before_pause"

BETWEEN_ROUNDS: tuple[Phase, ...] = ("idle", "settled", "cancelled")

#: The one transition table: ``(phase, command) -> phase``. A pair that is not here is
#: refused with ``illegal_command``, and the refused command changes nothing.
TRANSITIONS: dict[tuple[Phase, Command | Move | Announcement],
                  Phase | Literal["before_pause"]] = {
    # between rounds: a new shoe, its opening card (manual), the cut card, the mode, a round
    **{(ph, "start_shoe"): ph for ph in BETWEEN_ROUNDS},
    **{(ph, "card"): ph for ph in BETWEEN_ROUNDS},  # the opening card or the cut card
    **{(ph, "set_mode"): ph for ph in BETWEEN_ROUNDS},
    **{(ph, "open_betting"): "betting" for ph in BETWEEN_ROUNDS},
    # betting: bets are taken while the cards are dealt face down
    ("betting", "card"): "betting",
    ("betting", "void_cards"): "betting",
    ("betting", "close_betting"): "dealing",
    # dealing: betting has closed, cards are still coming out
    ("dealing", "card"): "dealing",
    ("dealing", "void_cards"): "dealing",
    ("dealing", "all_dealt"): "revealing",
    # revealing: P1 … P5, then the Banker; a correction only before the first reveal
    ("revealing", "reveal"): "revealing",
    ("revealing", "void_cards"): "dealing",
    ("revealing", "banker_revealed"): "settled",
    # a round can be paused, resumed where it was, or cancelled (every bet refunded)
    **{(ph, "pause"): "paused" for ph in ("betting", "dealing", "revealing")},
    ("paused", "resume"): BEFORE_PAUSE,
    **{(ph, "cancel_round"): "cancelled" for ph in ("betting", "dealing", "revealing",
                                                    "paused")},
    # announcements about the round in play or just settled (livetable/engine/announce.py)
    **{(ph, "bet_stats"): ph for ph in ("dealing", "revealing", "paused", "settled")},
    ("settled", "round_winners"): "settled",
}


def allowed_in(command: Command | Move | Announcement) -> frozenset[Phase]:
    """The phases in which ``command`` is legal (read from :data:`TRANSITIONS`)."""
    return frozenset(ph for (ph, cmd) in TRANSITIONS if cmd == command)


def target(phase: Phase, paused_from: Phase | None,
           command: Command | Move | Announcement) -> Phase | None:
    """Where ``command`` leads from ``phase`` (``resume``: back to ``paused_from``), or None
    if the table has no such row."""
    found = TRANSITIONS.get((phase, command))
    if found == BEFORE_PAUSE:
        assert paused_from is not None
        return paused_from
    return found
