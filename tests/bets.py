"""A ``place_bet`` straight to a store, answered as the gateway answers it: the store takes
the slip of one (``BetRequest.as_slip``) and the gateway words its answer
(``livetable.server.gateway.intake.bet_answer``). For the tests that hold a store to the
rules without a gateway."""

from __future__ import annotations

from livetable import protocol as p
from livetable.betting.slips import BetRequest
from livetable.server.gateway.intake import bet_answer
from livetable.store.base import Store


async def place_bet(store: Store, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected:
    return bet_answer(bet.bet_id, await store.place_slip(bet.as_slip(), now))
