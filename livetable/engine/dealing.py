"""A dealer's command to the table's engine: which of its methods each command of
:data:`DealerAction` is, in one ``match`` closed by ``assert_never`` (so a command added to
the protocol without its case here fails the type check), and the name an answer gives it.
Pure, like the engine: the runner calls :func:`dispatch` and commits the step it returns.
"""

from __future__ import annotations

from typing import assert_never

from livetable import protocol as p
from livetable.engine.effects import EngineError, Step
from livetable.engine.table import TableEngine

#: What a dealer's console (or ``livetable dealer``) asks of a table.
DealerAction = p.TableCommand


def command_name(command: DealerAction) -> str:
    return type(command).__struct_config__.tag  # type: ignore[return-value]  # tags are str


def dispatch(engine: TableEngine, command: DealerAction, now: int) -> Step:
    match command:
        case p.StartShoe():
            return engine.start_shoe(now)
        case p.OpenBetting(betting_ms=ms):
            return engine.open_betting(now, ms)
        case p.CloseBetting():
            return engine.close_betting(now)
        case p.CardIn(card=card):
            return engine.card(card, now)
        case p.Reveal():
            return engine.reveal(now)
        case p.Pause(reason=reason):
            return engine.pause(reason, now)
        case p.ResumeTable():
            return engine.resume(now)
        case p.CallOffRound(reason=reason):
            return engine.cancel_round(reason, now)
        case p.SetMode(auto=auto):
            return engine.set_mode("auto" if auto else "manual", now)
        case p.VoidCards(count=count, dealer=dealer, supervisor=supervisor, round_id=round_id,
                         nonce=nonce):
            approval = None if round_id is None or nonce is None else (round_id, nonce)
            return engine.void_cards(count, dealer, supervisor, now, approval)
        case p.RoundCards():  # a read, answered by execute without a step
            raise EngineError("bad_command", "round_cards takes no step")
        case _:  # mypy: every TableCommand has its case above
            assert_never(command)
