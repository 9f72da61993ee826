"""The provably fair shoe: the commitment, and the check anyone can run on a revealed shoe.

Why. In auto mode the server shuffles, so a player must otherwise trust that it did not
pick the next cards after seeing the bets. Before the first bet of a shoe the server
publishes a *commitment* — a SHA-256 over the whole shoe order, its cut card and a random
salt (docs/design.md §7) — and reveals the order and the salt only when the shoe has ended. The
hash binds the server to the order (it cannot find another order with the same hash); the
salt hides it (without the salt, the last few unknown cards could be found by trying every
arrangement against the hash).

:func:`check_shoe` is the whole check, pure: the hash, a full 8-deck shoe, the opening card
and its burns (docs/design.md §1), and every round's cards as the next slots of ``order`` in the
dealing order (one burn, then P1 … P5, Banker, twice). ``livetable verify-shoe`` runs it on
``GET /api/shoes/{shoe_id}``; the browser's static/js/verify.js is the same check in
JavaScript (tests/e2e/test_verify_shoe.py holds the two to the same verdicts). A record must
account for every slot of the order up to its last round: every round publishes its cards,
a cancelled one those it had dealt (:func:`publish_rounds`).

The game log (docs/security.md, "The game log"): each round, as it ends, is chained to the
one before by :func:`chain_link`, from the commitment on; ``round_settled`` /
``round_cancelled`` publish the head, and the record says why the shoe ended and how many
rounds it had. :func:`check_shoe` recomputes the chain, so a record cut short, reordered or
recast no longer agrees with it, nor with a head the checker saw published.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import Counter

import msgspec

from livetable.rules.cards import DECK, Card, CardError, parse_card
from livetable.rules.settlement import DEAL_ORDER
from livetable.rules.shoe import CARDS_PER_ROUND, DECKS, ROUND_SLOTS

SALT = re.compile(r"[0-9a-f]{64}")
HEX_SHA256 = re.compile(r"[0-9a-f]{64}")


def commitment(salt: str, cut_at: int, order: list[str]) -> str:
    """Lowercase hex SHA-256 of ``salt + ":" + str(cut_at) + ":" + ",".join(order)``."""
    text = f"{salt}:{cut_at}:{','.join(order)}"
    return hashlib.sha256(text.encode()).hexdigest()


class ShoeRound(msgspec.Struct, kw_only=True):
    """One round of a revealed shoe, as ``GET /api/shoes/{shoe_id}`` serves it.

    ``cards``: position → its cards: for a settled round the hands as they were revealed
    and settled (two cards each); for a cancelled round the cards it had dealt when it was
    cancelled (0 … 2 each; :func:`publish_rounds`). ``dealt``: how many cards the round
    took out of the shoe, its burn included (13 for a settled round; 0 … 13 for a
    cancelled one). A record accounts for every slot of the order up to its last round:
    ``cards`` is never None in a record that verifies.
    """

    round_id: str
    round_no: int
    state: str
    cards: dict[str, list[str]] | None
    dealt: int
    #: When the round ended (settled or cancelled), epoch ms as the engine dated it: what
    #: the game log chains (:func:`chain_link`).
    at: int | None = None
    #: A settled round's outcome per spot (spot → "win", "lose", …); empty when cancelled.
    spots: dict[str, str] | None = None


class ShoeRecord(msgspec.Struct, kw_only=True):
    """An ended shoe, as ``GET /api/shoes/{shoe_id}`` serves it (docs/design.md §7)."""

    shoe_id: str
    commitment: str
    salt: str
    cut_at: int
    order: list[str]
    rounds: list[ShoeRound]
    table: str = ""
    burn_card: str | None = None
    burned: int | None = None
    ended_at: int | None = None
    #: Why the shoe ended (:data:`ENDINGS`), how many rounds it had, and the head of its
    #: game log after its last round (the commitment if it had none): a record cut short,
    #: or with a round recast, no longer agrees with them (docs/security.md, "The game log").
    ended_by: str | None = None
    round_count: int | None = None
    chain_head: str | None = None


#: The states a round of an ended shoe can be in.
ENDED_ROUND_STATES = ("settled", "cancelled")

#: Why a shoe ends: the cut card came out (in its last round), a dealer set it aside
#: between rounds (a switch to manual, a new shoe), or the store was restored from a
#: backup older than what the table had announced (docs/operations.md §5): that shoe never
#: deals again.
ENDINGS = ("cut_card", "set_aside", "restored")


def chain_link(
    salt: str,
    previous: str,
    round_id: str,
    state: str,
    at: int,
    cards: list[str],
    spots: dict[str, str],
) -> str:
    """The game log's head after a round: lowercase hex HMAC-SHA256, keyed with the UTF-8
    of the shoe's ``salt`` (64 hex characters), of the UTF-8 text of six lines joined by
    "\\n": the head before (the commitment, for the shoe's first round), the round id, its
    state ("settled" or "cancelled"), when it ended (epoch ms, decimal), the cards it took
    out of the shoe in the order dealt (its burn first) joined by ",", and its outcome per
    spot as ``spot=outcome`` sorted by spot and joined by "," (empty for a cancelled
    round). Keyed with the salt, a head published live tells nothing of a face-down card
    (a burn, a cancelled round's cards) before the shoe is revealed."""
    text = "\n".join(
        [
            previous,
            round_id,
            state,
            str(at),
            ",".join(cards),
            ",".join(f"{spot}={outcome}" for spot, outcome in sorted(spots.items())),
        ]
    )
    return hmac.new(salt.encode(), text.encode(), hashlib.sha256).hexdigest()


def round_slots(shoe: ShoeRecord) -> list[int]:
    """Where in ``order`` each round of the record begins (its burn): after the opening card
    and its burns, each round after the cards the one before took. Empty if the order does
    not open with a card."""
    try:
        at = 1 + parse_card(shoe.order[0]).burn_count
    except (CardError, IndexError):
        return []
    starts = []
    for rnd in shoe.rounds:
        starts.append(at)
        at += max(0, rnd.dealt)
    return starts


def chain_heads(shoe: ShoeRecord) -> list[str]:
    """The game log's head after each round of the record, recomputed from the commitment
    on (:func:`chain_link`): what the table published in each ``round_settled`` /
    ``round_cancelled``. Empty if the order does not open with a card."""
    heads: list[str] = []
    head = shoe.commitment
    starts = round_slots(shoe)
    for at, rnd in zip(starts, shoe.rounds, strict=False):
        head = chain_link(
            shoe.salt,
            head,
            rnd.round_id,
            rnd.state,
            rnd.at or 0,
            shoe.order[at : at + max(0, rnd.dealt)],
            rnd.spots or {},
        )
        heads.append(head)
    return heads


def dealt_hands(order: list[str], at: int, dealt: int) -> dict[str, list[str]]:
    """Position → the cards the round whose burn is ``order[at]`` dealt to it, when it
    took ``dealt`` cards (one burn, then P1 … P5, Banker, twice)."""
    hands: dict[str, list[str]] = {pos.value: [] for pos in DEAL_ORDER}
    for slot, card in zip(ROUND_SLOTS, order[at : at + dealt], strict=False):
        if slot.position is not None:
            hands[slot.position.value].append(card)
    return hands


def publish_rounds(order: list[str], rounds: list[ShoeRound]) -> list[ShoeRound]:
    """``rounds`` as an ended shoe's record publishes them: a round that was not settled
    (cancelled) shows the cards it had dealt. The order reveals them anyway; published, they
    leave no slot of the order unaccounted for, so a verifier refuses a record that skips
    one (a round dealt off the order could otherwise be published as "cancelled", unchecked).
    """
    if not order:
        return rounds
    try:
        at = 1 + parse_card(order[0]).burn_count
    except CardError:
        return rounds
    for rnd in rounds:
        if rnd.state != "settled":
            rnd.cards = dealt_hands(order, at, max(0, rnd.dealt))
        at += max(0, rnd.dealt)
    return rounds


def check_shoe(
    shoe: ShoeRecord, seen_commitment: str | None = None, seen_heads: list[str] | None = None
) -> list[str]:
    """Every way ``shoe`` fails to be the fair shoe it claims to be; empty when it is fair.

    ``seen_commitment``: the commitment the checker saw in ``shoe_started`` before betting.
    Without it the check proves that the record is consistent, not that the server committed
    to this order before the bets (it could have published another commitment then).
    ``seen_heads``: game log heads the checker saw published live (``round_settled``,
    ``round_cancelled``, ``shoe_revealed``): each must be a head of this record's log, else
    the record was changed after it (a round cut, reordered or recast).
    """
    problems = _commitment_problems(shoe, seen_commitment)
    try:
        cards = [parse_card(c) for c in shoe.order]
    except CardError as exc:
        return [*problems, f"order: {exc}"]
    problems += _order_problems(shoe, cards)
    if not cards:
        return problems
    problems += _opening_problems(shoe, cards[0])
    problems += _round_problems(shoe, cards, 1 + cards[0].burn_count)
    return problems + _log_problems(shoe, seen_heads or [])


def _log_problems(shoe: ShoeRecord, seen_heads: list[str]) -> list[str]:
    """The game log: why the shoe ended and how many rounds it had, as the record says,
    against its rounds; the chain of heads from the commitment to ``chain_head``; and the
    heads seen live. What catches a record cut short (its last rounds removed) or whose
    last round is recast."""
    problems: list[str] = []
    rounds = shoe.rounds
    if shoe.ended_by not in ENDINGS:
        problems.append(
            f"the record does not say why the shoe ended (ended_by "
            f"{shoe.ended_by!r}, not one of {', '.join(ENDINGS)})"
        )
    if shoe.round_count is None or shoe.round_count != len(rounds):
        problems.append(
            f"the record says the shoe had {shoe.round_count} rounds, but it "
            f"holds {len(rounds)}: rounds were cut or added"
        )
    for rnd in rounds:
        if rnd.at is None or (rnd.state == "settled" and not rnd.spots):
            problems.append(
                f"round {rnd.round_id}: no time or no outcome per spot: the game "
                "log cannot be recomputed"
            )
    heads = chain_heads(shoe)
    head = heads[-1] if heads else shoe.commitment
    if shoe.chain_head != head:
        problems.append(
            f"the game log's head is {head} when recomputed from the rounds, not "
            f"the record's {shoe.chain_head}: a round was cut, reordered or recast"
        )
    known = {shoe.commitment, *heads}
    problems += [
        f"the game log head {seen} you saw published is in no round of this record: "
        "the record was changed after it"
        for seen in seen_heads
        if seen.lower() not in known
    ]
    return problems + _ending_problems(shoe)


def _ending_problems(shoe: ShoeRecord) -> list[str]:
    """A shoe ended by its cut card ends with the round that took it out; a shoe set aside
    or retired by a restore never took it out (that round would have been its last)."""
    starts = round_slots(shoe)
    took_cut = [
        start <= shoe.cut_at < start + rnd.dealt
        for start, rnd in zip(starts, shoe.rounds, strict=False)
    ]
    if shoe.ended_by == "cut_card" and not (took_cut and took_cut[-1]):
        return [
            f"the shoe ended by its cut card (slot {shoe.cut_at}), but its last round "
            f"does not take that slot: the rounds after were cut, or the last recast"
        ]
    if shoe.ended_by in ("set_aside", "restored") and any(took_cut):
        return [
            f"the record says the shoe was {shoe.ended_by.replace('_', ' ')}, but the cut "
            "card came out in one of its rounds"
        ]
    return []


def _commitment_problems(shoe: ShoeRecord, seen_commitment: str | None) -> list[str]:
    """The salt, the commitment, and whether the commitment is the hash of the record."""
    problems: list[str] = []
    if seen_commitment is not None and seen_commitment.lower() != shoe.commitment:
        problems.append(
            f"the record's commitment {shoe.commitment} is not the one published "
            f"when the shoe started ({seen_commitment})"
        )
    if not SALT.fullmatch(shoe.salt):
        problems.append("salt is not 64 lowercase hex characters (32 bytes)")
    if not HEX_SHA256.fullmatch(shoe.commitment):
        problems.append("commitment is not 64 lowercase hex characters (a SHA-256)")
    computed = commitment(shoe.salt, shoe.cut_at, shoe.order)
    if computed != shoe.commitment:
        problems.append(
            f"SHA-256 of salt:cut_at:order is {computed}, not the commitment "
            f"{shoe.commitment}: the order, the cut card or the salt was changed"
        )
    return problems


def _order_problems(shoe: ShoeRecord, cards: list[Card]) -> list[str]:
    """Whether the order is full decks, written as on the wire, with the cut card inside."""
    problems: list[str] = []
    size = 52 * DECKS
    if [str(c) for c in cards] != shoe.order:
        problems.append("order: cards are not written as on the wire (e.g. 10D, KH)")
    if len(cards) != size:
        problems.append(f"order holds {len(cards)} cards, not {size}")
    counts = Counter(cards)
    wrong = sorted(str(c) for c in DECK if counts[c] != DECKS)
    if wrong:
        problems.append(
            f"order is not {DECKS} full decks: {', '.join(wrong[:8])}"
            f"{' …' if len(wrong) > 8 else ''} do not appear {DECKS} times"
        )
    if not 0 < shoe.cut_at < len(cards):
        problems.append(f"cut_at {shoe.cut_at} is outside the shoe")
    return problems


def _opening_problems(shoe: ShoeRecord, opening: Card) -> list[str]:
    """The opening: one card face up, then burn its value (A=1 … 9=9, 10/J/Q/K=10)."""
    problems: list[str] = []
    if shoe.burn_card is not None and shoe.burn_card != str(opening):
        problems.append(
            f"shoe_started showed {shoe.burn_card} face up, but the order opens with {opening}"
        )
    if shoe.burned is not None and shoe.burned != opening.burn_count:
        problems.append(
            f"{shoe.burned} cards were burned after the opening {opening}, the "
            f"rules say {opening.burn_count}"
        )
    return problems


def _round_problems(shoe: ShoeRecord, cards: list[Card], at: int) -> list[str]:
    """Each round from slot ``at``: one burn, then P1 … P5, Banker, twice — the next slots of
    the order. The round in which the cut card comes out (or the first after it) is the
    shoe's last."""
    problems: list[str] = []
    cut_out = shoe.cut_at < at
    ended = False
    for index, rnd in enumerate(shoe.rounds, start=1):
        where = f"round {rnd.round_id}"
        if rnd.round_no != index or rnd.round_id != f"{shoe.shoe_id}.{index}":
            problems.append(f"{where}: expected round {index} ({shoe.shoe_id}.{index}) here")
        if ended:
            problems.append(
                f"{where} was dealt after the shoe's last round (the one in which "
                "the cut card came out)"
            )
        if not 0 <= rnd.dealt <= CARDS_PER_ROUND:
            problems.append(
                f"{where}: took {rnd.dealt} cards, a round takes at most {CARDS_PER_ROUND}"
            )
            return problems
        if rnd.state not in ENDED_ROUND_STATES:
            problems.append(
                f"{where}: state {rnd.state!r}; a round of an ended shoe is settled or cancelled"
            )
        if rnd.state == "settled" and rnd.dealt != CARDS_PER_ROUND:
            problems.append(f"{where}: settled with {rnd.dealt} cards dealt, not {CARDS_PER_ROUND}")
        if at + rnd.dealt > len(cards):
            problems.append(f"{where}: deals past the end of the order")
            return problems
        problems += _round_card_problems(shoe, rnd, at)
        cut_out = cut_out or at <= shoe.cut_at < at + rnd.dealt
        ended = cut_out
        at += rnd.dealt
    return problems


def _round_card_problems(shoe: ShoeRecord, rnd: ShoeRound, at: int) -> list[str]:
    """Whether the hands a round revealed are the ones its slots of the order deal."""
    where = f"round {rnd.round_id}"
    if rnd.cards is None:
        return [
            f"{where}: no cards published for the {rnd.dealt} slots it took "
            f"({at} …): a record must account for every slot of the order"
        ]
    problems: list[str] = []
    dealt = dealt_hands(shoe.order, at, rnd.dealt)
    for pos in DEAL_ORDER:
        shown = rnd.cards.get(pos.value)
        if shown != dealt[pos.value]:
            problems.append(
                f"{where}: {pos.value} was revealed as {shown}, but the "
                f"order deals it {dealt[pos.value]} (slots {at} …)"
            )
    extra = sorted(set(rnd.cards) - set(dealt))
    if extra:
        problems.append(f"{where}: cards for {', '.join(extra)}, which is no hand")
    return problems
