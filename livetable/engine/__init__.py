"""The table engine: the round state machine of one table, sans-IO."""

from livetable.engine.table import (
    ALLOWED,
    CancelRound,
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
)

__all__ = [
    "ALLOWED",
    "CancelRound",
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
]
