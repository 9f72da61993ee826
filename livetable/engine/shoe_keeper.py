"""A table's shoe as the engine deals from it: started, cut, opened, drawn, put back, ended.

The stored state keeps the shoe as plain data (:class:`~livetable.engine.state.ShoeState`);
the :class:`ShoeKeeper` keeps a parsed, live :class:`~livetable.rules.Shoe` beside it (parsed
once per shoe, not once per card) and mirrors every card taken from it into the state. An
auto shoe is shuffled here and committed to before its first card (the commitment is
published in ``shoe_started``); when it ends, its order and salt are revealed, once. Each
round that ends is chained into the shoe's game log (:meth:`ShoeKeeper.chain`, the format in
docs/security.md), whose head the round's ``round_settled`` / ``round_cancelled`` publishes.
The keeper numbers its events with the engine's numbering.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from livetable import protocol as p
from livetable.engine import views
from livetable.engine.effects import Numbering, RevealShoe, Step
from livetable.engine.state import TableState, parse_shoe, shoe_state
from livetable.engine.transitions import BETWEEN_ROUNDS
from livetable.rules import Shoe, parse_card
from livetable.rules.cards import Card
from livetable.rules.fairness import chain_link, commitment


class ShoeKeeper:
    def __init__(self, state: TableState, rng: random.Random,
                 number: Callable[[], Numbering]) -> None:
        self.state = state
        self.rng = rng
        self.number = number
        self._live: tuple[str, Shoe] | None = None  # a parsed copy of state.shoe

    def live(self) -> Shoe:
        """The live Shoe of ``state.shoe`` (parsed once per shoe, not once per card)."""
        assert self.state.shoe is not None
        shoe_id = self.state.shoe.shoe_id
        if self._live is None or self._live[0] != shoe_id:
            self._live = (shoe_id, parse_shoe(self.state.shoe))
        return self._live[1]

    def took(self, shoe: Shoe, card: Card) -> None:
        """Mirror a card taken from the live shoe into the stored state."""
        state = self.state.shoe
        assert state is not None
        state.drawn = shoe.drawn
        state.cut_out = shoe.cut_out
        key = str(card)
        state.seen[key] = state.seen.get(key, 0) + 1

    def put_back(self, cards: list[str]) -> None:
        """Voided cards go back to the shoe's count (they were never dealt as such)."""
        shoe = self.state.shoe
        assert shoe is not None
        for key in cards:
            shoe.seen[key] -= 1
            if not shoe.seen[key]:
                del shoe.seen[key]
        shoe.drawn -= len(cards)
        self._live = None  # re-read from the corrected state

    def start(self, step: Step) -> None:
        """A new shoe: shuffled, committed to and opened (auto), or awaiting its first
        card (manual). The shoe it replaces has ended."""
        self.reveal(step)
        s = self.state
        s.shoe_no += 1
        shoe_id = f"{s.table}.{s.shoe_no}"
        s.round_no = 0
        s.roadmap = []
        s.last_round = False
        if s.mode == "auto":
            shoe = Shoe.shuffled(self.rng, cut_range=s.timing.cut_range)
            salt = self.rng.randbytes(32).hex()
            burn_card, burned = shoe.open()
            s.shoe = shoe_state(shoe, shoe_id)
            s.shoe.salt = salt
            s.shoe.commitment = commitment(salt, shoe.cut_at, s.shoe.order)
            s.shoe.chain_head = s.shoe.commitment  # the game log starts from it
            self._live = (shoe_id, shoe)
            step.events.append(p.ShoeStarted(
                **self.number(), shoe_id=shoe_id, burn_card=str(burn_card), burned=burned,
                commitment=s.shoe.commitment, cards_left=views.cards_left(s),
                opens_at=views.opens_at(s)))
        else:
            shoe = Shoe.manual()
            s.shoe = shoe_state(shoe, shoe_id, awaiting=True)
            self._live = (shoe_id, shoe)
            s.next_at = None  # no round opens by itself before the opening card
            # players see "shuffling — new shoe" until the opening card is read
            step.events.append(p.ShoeShuffling(**self.number(), shoe_id=shoe_id))
            step.detail = {"awaiting": "opening card"}

    def cut(self) -> Step:
        """The cut card came out (read by a dealer's scanner)."""
        s = self.state
        assert s.shoe is not None
        # The live shoe too: the next card's took() copies its cut_out into the state.
        self.live().mark_cut_card()
        already = s.shoe.cut_out
        s.shoe.cut_out = True
        if s.phase in ("betting", "dealing"):
            s.last_round = True
        step = Step(detail={"slot": "cut", "last_round": s.last_round})
        if not already:
            step.events.append(p.CutCardOut(
                **self.number(), shoe_id=s.shoe.shoe_id, last_round=s.last_round))
        return step

    def opened(self, shoe: Shoe, card: Card, now: int) -> Step:
        """A manual shoe's opening card (already fed): it burns unseen cards by its value,
        and rounds may open."""
        s = self.state
        assert s.shoe is not None
        shoe.burn_unseen(card.burn_count)
        self.took(shoe, card)
        s.shoe.awaiting_open_card = False
        s.next_at = views.between_rounds_at(s, now)
        step = Step(detail={"slot": "opening", "burned": card.burn_count})
        step.events.append(p.ShoeStarted(
            **self.number(), shoe_id=s.shoe.shoe_id, burn_card=str(card),
            burned=card.burn_count, cards_left=views.cards_left(s), opens_at=views.opens_at(s)))
        return step

    def chain(self, state: str, now: int, spots: dict[str, str]) -> str | None:
        """The round in play has ended (``state``: settled or cancelled, at ``now``, with
        its outcome per spot): chain it into the shoe's game log; the log's new head (None
        for a shoe without a log: manual, or started before it existed)."""
        s = self.state
        shoe = s.shoe
        if shoe is None or shoe.chain_head is None or shoe.salt is None or s.round_id is None:
            return None
        shoe.chain_head = chain_link(shoe.salt, shoe.chain_head, s.round_id, state, now,
                                     s.round_cards, spots)
        shoe.round_ends.append(now)
        return shoe.chain_head

    def retire(self, step: Step, why: str) -> None:
        """The shoe in play must never deal again (``why``: "restored", its cards may have
        been seen): it ends now, or after the round in play if its cards are all out (a
        round being revealed settles as dealt). A new shoe deals the next round."""
        s = self.state
        shoe = s.shoe
        if shoe is None or shoe.revealed:
            return
        if not s.last_round:  # else it ends by its cut card, already out
            shoe.ended_by = why
            s.last_round = True
        if s.phase in BETWEEN_ROUNDS:
            self.reveal(step)

    def reveal(self, step: Step) -> None:
        """The shoe has ended: publish its order and salt (an auto shoe, once)."""
        s = self.state
        shoe = s.shoe
        if shoe is None or shoe.commitment is None or shoe.salt is None or shoe.revealed:
            return
        shoe.revealed = True
        ends = [*shoe.round_starts[1:], shoe.drawn]
        times = shoe.round_ends + [0] * (len(ends) - len(shoe.round_ends))
        rounds = [(f"{shoe.shoe_id}.{n}", end - start, at) for n, (start, end, at)
                  in enumerate(zip(shoe.round_starts, ends, times, strict=False), start=1)]
        opening = parse_card(shoe.order[0])
        ended_by = shoe.ended_by or ("cut_card" if shoe.cut_out else "set_aside")
        step.effects.append(RevealShoe(
            table=s.table, shoe_id=shoe.shoe_id, commitment=shoe.commitment, salt=shoe.salt,
            cut_at=shoe.cut_at, order=list(shoe.order), burn_card=str(opening),
            burned=opening.burn_count, rounds=rounds, ended_by=ended_by,
            chain_head=shoe.chain_head))
        step.events.append(p.ShoeRevealed(
            **self.number(), shoe_id=shoe.shoe_id, salt=shoe.salt, cut_at=shoe.cut_at,
            order=list(shoe.order), chain_head=shoe.chain_head, round_count=len(rounds),
            ended_by=ended_by))
