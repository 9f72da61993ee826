"""``livetable settle``, ``rtp`` and ``simulate``: the rules' figures, from the command line.

Why together: all three only read the rules — one hand settled by
:func:`~livetable.rules.settlement.settle_bet`, the exact return to player enumerated by
:mod:`livetable.rules.rtp`, whole shoes dealt by :mod:`livetable.rules.simulate` — and none
touches a store, a server or a setting. They compute nothing of their own: the commands
here parse cards and amounts and print what the rules answer (numpy, which the exact RTP
needs, is imported only when ``rtp`` runs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from fractions import Fraction
from typing import TextIO

from livetable.cli.arguments import Commands, UsageError, print_json
from livetable.rules.cards import CardError, parse_cards
from livetable.rules.hands import Hand, hand_of
from livetable.rules.settlement import BetSettlement, BetSpot, settle_bet

# --- settle -------------------------------------------------------------------------------


def _hand_arg(text: str, whose: str) -> Hand:
    try:
        cards = parse_cards(text)
    except CardError as e:
        raise UsageError(f"{whose}: {e}") from None
    if len(cards) != 2:
        raise UsageError(f"{whose}: a hand is exactly two cards, got {len(cards)} in {text!r}")
    return hand_of(cards)


def _hand_json(hand: Hand) -> dict[str, object]:
    return {
        "cards": [str(c) for c in hand.cards],
        "value": hand.value,
        "points": hand.points,
        "label": hand.label,
        "flush": hand.flush,
        "pair": hand.pair,
    }


def _bet_json(bet: BetSettlement) -> dict[str, object]:
    return {"amount": bet.amount, "deducted": bet.deducted, "returned": bet.returned}


def cmd_settle(args: argparse.Namespace) -> int:
    banker = _hand_arg(args.banker, "banker")
    player = _hand_arg(args.player, "player")
    amount: int = args.amount
    if amount <= 0:
        raise UsageError(f"--amount must be a positive integer, got {amount}")
    player_bet = settle_bet(BetSpot.P1, amount, player, banker)
    pair_bet = settle_bet(BetSpot.P1_PAIR, amount, player, banker)
    print_json(
        {
            "banker": _hand_json(banker),
            "player": _hand_json(player),
            "outcome": player_bet.outcome,
            "odds": player_bet.odds,
            "player_bet": _bet_json(player_bet),
            "pair_bet": _bet_json(pair_bet),
        }
    )
    return 0


def add_settle(commands: Commands) -> None:
    p = commands.add_parser(
        "settle",
        help="settle a Player 1 and a Player 1 Pair bet for given cards",
        description='Settle one hand, e.g. livetable settle "9D 7C" "KH 9H".',
    )
    p.add_argument("banker", help='the Banker\'s two cards, e.g. "9D 7C"')
    p.add_argument("player", help='the Player\'s two cards, e.g. "KH 9H"')
    p.add_argument("--amount", type=int, default=100, help="bet amount (default 100)")
    p.set_defaults(handler=cmd_settle)


# --- rtp ----------------------------------------------------------------------------------


def _percent(f: Fraction) -> str:
    return f"{float(f) * 100:.4f} % (≈ {float(f) * 100:.2f} %)"


def cmd_rtp(args: argparse.Namespace) -> int:
    from livetable.rules.rtp import exact_rtp  # numpy is loaded only when needed

    report = exact_rtp()
    if args.json:
        print_json(report.to_json())
        return 0
    cards = 52 * report.decks
    print(f"Exact RTP, {report.decks} decks ({cards} cards), enumerated without replacement")
    rows = [
        ("Player bet, of amount deducted", report.player_rtp_of_deducted),
        ("Player bet, of stake", report.player_rtp_of_stake),
        ("Player Pair bet", report.pair_rtp),
    ]
    for name, value in rows:
        print(f"  {name:<32} {value}  = {_percent(value)}")
    print("Player bet outcomes (per unit: deducted 2):")
    for o in report.outcomes:
        odds = f"{o.odds}:1" if o.outcome != "tie" else "—"
        print(
            f"  {o.outcome:<5} {odds:>3}  returns {o.returned_multiple}  "
            f"p = {o.probability}  ≈ {float(o.probability) * 100:.4f} %"
        )
    return 0


def add_rtp(commands: Commands) -> None:
    p = commands.add_parser(
        "rtp", help="exact return to player by enumeration over an 8-deck shoe"
    )
    p.add_argument("--json", action="store_true", help="print JSON (fractions as strings)")
    p.set_defaults(handler=cmd_rtp)


# --- simulate -----------------------------------------------------------------------------


def progress_bar(stream: TextIO, width: int = 40) -> Callable[[int, int], None]:
    """A text progress bar on ``stream``, redrawn in place at most once per percent."""
    shown = -1

    def show(done: int, total: int) -> None:
        nonlocal shown
        percent = 100 * done // total if total else 100
        if percent == shown and done < total:
            return
        shown = percent
        filled = width * done // total if total else width
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} shoes")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show


def cmd_simulate(args: argparse.Namespace) -> int:
    from livetable.rules.simulate import simulate

    shoes: int = args.shoes
    if shoes <= 0:
        raise UsageError(f"--shoes must be a positive integer, got {shoes}")
    progress = None if args.quiet else progress_bar(sys.stderr)
    result = simulate(shoes, seed=args.seed, progress=progress)
    if args.json:
        print_json(result.to_json())
        return 0
    print(f"{result.shoes} shoes, {result.rounds} rounds, seed {result.seed}")
    for name, totals in (("Player", result.player), ("Player Pair", result.pair)):
        low, high = totals.rtp_ci95
        print(
            f"  {name:<12} deducted {totals.deducted}  returned {totals.returned}  "
            f"RTP {float(totals.rtp) * 100:.3f} %  "
            f"(95 % CI {low * 100:.3f} – {high * 100:.3f} %)"
        )
    print(f"  Player RTP of stake {float(result.player_rtp_of_stake) * 100:.3f} %")
    return 0


def add_simulate(commands: Commands) -> None:
    p = commands.add_parser(
        "simulate", help="deal and settle whole shoes, one unit on every spot every round"
    )
    p.add_argument("--shoes", type=int, required=True, help="number of shoes to deal")
    p.add_argument("--seed", type=int, default=None, help="seed (default: a random shuffle)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(handler=cmd_simulate)
