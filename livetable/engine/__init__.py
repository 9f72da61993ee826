"""The table engine: the round state machine of one table, sans-IO."""

from livetable.engine.table import (
    TRANSITIONS,
    CancelRound,
    Command,
    Effect,
    EngineError,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
    Step,
    TableEngine,
    TableState,
    Timing,
    allowed_in,
)

__all__ = [
    "TRANSITIONS",
    "CancelRound",
    "Command",
    "Effect",
    "EngineError",
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
