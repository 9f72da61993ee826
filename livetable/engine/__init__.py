"""The table engine: the round state machine of one table, sans-IO."""

from livetable.engine.effects import (
    CancelRound,
    Effect,
    EngineError,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
    Step,
)
from livetable.engine.state import Mode, TableState, Timing
from livetable.engine.table import TableEngine
from livetable.engine.transitions import TRANSITIONS, Command, allowed_in

__all__ = [
    "TRANSITIONS",
    "CancelRound",
    "Command",
    "Effect",
    "EngineError",
    "Mode",
    "OpenRound",
    "RevealShoe",
    "SetBetting",
    "SettleRound",
    "Step",
    "TableEngine",
    "TableState",
    "Timing",
    "allowed_in",
]
