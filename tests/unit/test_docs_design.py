"""docs/design.md says what the code does: its money figures, its names and its paths.

§1 is about money, so its figures are read off the page and compared with what
:mod:`livetable.rules` computes — the special combinations, every row of the Player bet's
table (settled from cards chosen for that row), the Pair bet, Example 9, the shoe and the
exact RTP. A change to a rule that does not change the page (or the reverse) fails here.
Paths and module names on the page are checked the way docs/architecture.md's are.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest
from test_docs_architecture import DOTTED, PATH, TOP, _resolve

from livetable.rules import BetSpot, Combination, hand_of, parse_cards, settle_bet
from livetable.rules.rtp import exact_rtp
from livetable.rules.settlement import spot_result
from livetable.rules.shoe import CARDS_PER_ROUND, DECKS, DEFAULT_CUT_RANGE

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "design.md"
TEXT = DOC.read_text()


def section(number: int) -> str:
    """The text of ``## <number>.`` up to the next ``## ``."""
    match = re.search(rf"^## {number}\. .*?(?=^## |\Z)", TEXT, flags=re.M | re.S)
    assert match, f"docs/design.md has no section {number}"
    return match.group(0)


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row of ``text`` (header and rule lines left out)."""
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")]
    return [row for row in rows if not set(row[0]) <= set("-")]


RULES = section(1)


def test_the_special_combinations_are_the_code_s() -> None:
    on_page = {(row[0], row[1]) for row in table_rows(RULES) if re.fullmatch(r"7\.\d", row[0])}
    in_code = {(f"{c.tenths / 10:.1f}", c.label) for c in Combination}
    assert on_page == in_code


# One Banker and one Player hand for each row of the Player bet's table (the row's first
# words on the page), settled by the one settlement function.
PLAYER_ROWS = [
    ("Player wins without a special pattern", "9D 7C", "7C 10D"),
    ("Player wins with a special pattern", "2C 3D", "3H 4H"),
    ("… but the Banker's hand **value** is 0 or 6", "9D 7C", "3H 4H"),
    ("… unless the Player has 8 or 9 points", "9D 7C", "KH 9H"),
    ("tie", "2C 3D", "2H 3S"),
    ("Banker wins without a special pattern", "9D 8C", "2H 3S"),
    ("Banker wins with a special pattern", "9D 8D", "2H 3S"),
]


def _multiple(cell: str) -> int:
    """``3a`` → 3, ``a`` → 1, ``0`` → 0 (the page's way of writing a multiple of the bet)."""
    match = re.match(r"`?(\d*)a`?|0\b", cell)
    assert match, f"not a multiple of the bet: {cell!r}"
    return 0 if match.group(0) == "0" else int(match.group(1) or 1)


@pytest.mark.parametrize(("row_start", "banker", "player"), PLAYER_ROWS,
                         ids=[row for row, _, _ in PLAYER_ROWS])
def test_each_row_of_the_player_bet_table_is_what_settlement_pays(
        row_start: str, banker: str, player: str) -> None:
    rows = [row for row in table_rows(RULES) if row[0].startswith(row_start)]
    assert len(rows) == 1, f"no single row starting {row_start!r} in docs/design.md §1"
    _, odds, returned, net = rows[0]
    result = spot_result(BetSpot.P1, hand_of(parse_cards(player)), hand_of(parse_cards(banker)))
    assert result.deducted_multiple == 2
    assert _multiple(returned) == result.returned_multiple
    assert odds == ("—" if result.outcome == "tie" else f"{result.odds}:1")
    sign = net.strip("`")[:1]
    assert {"+": 1, "−": -1, "0": 0}[sign] * _multiple(net.strip("`+−")) == (
        result.returned_multiple - result.deducted_multiple)


def test_the_pair_bet_and_example_9() -> None:
    assert "takes `a` (no withholding) and returns `12a` (11:1)" in RULES
    pair = spot_result(BetSpot.P1_PAIR, hand_of(parse_cards("7S 7H")),
                       hand_of(parse_cards("2C 3D")))
    assert (pair.deducted_multiple, pair.returned_multiple, pair.odds) == (1, 12, 11)
    assert "livetable returns **400** for a\n  bet of 100" in RULES
    nine = settle_bet(BetSpot.P1, 100, hand_of(parse_cards("KH 9H")), hand_of(parse_cards("9D 7C")))
    assert (nine.returned, nine.odds) == (400, 2)
    assert '`livetable settle "9D 7C" "KH 9H"`' in RULES


def test_the_shoe() -> None:
    assert f"{DECKS} decks, {52 * DECKS} cards" in RULES
    low, high = DEFAULT_CUT_RANGE
    assert f"By default {low} to {high}\n  cards lie behind the cut card" in RULES
    assert CARDS_PER_ROUND == 13 and "**Each round** takes 13 cards" in RULES


def test_the_exact_rtp() -> None:
    report = exact_rtp()
    figures = {
        report.player_rtp_of_deducted: "98.7499 %",
        report.player_rtp_of_stake: "97.4998 %",
    }
    for value, percent in figures.items():
        assert f"{value.numerator}/{value.denominator} = {percent}" in (
            RULES.replace("**", "").replace("\n  ", " "))
        assert f"{float(value) * 100:.4f} %" == percent
    assert report.pair_rtp == Fraction(31, 415) * 12 == Fraction(372, 415)
    assert "31/415 × 12 = 372/415 = **89.64 %**" in RULES
    assert f"{float(report.pair_rtp) * 100:.2f}" == "89.64"


def test_every_path_and_module_name_on_the_page_exists() -> None:
    missing, names = [], 0
    for number, line in enumerate(TEXT.splitlines(), start=1):
        missing += [f"line {number}: {path}" for path in PATH.findall(line)
                    if not (ROOT / path).exists()]
        for dotted in DOTTED.findall(line):
            if (dotted.split(".")[0] not in TOP | {"livetable"} or "/" in dotted
                    or dotted.endswith((".py", ".md"))):
                continue  # not ours, or a file name (cli.py)
            names += 1
            try:
                _resolve(dotted)
            except (ImportError, AttributeError) as exc:
                missing.append(f"line {number}: {dotted} ({exc})")
    assert not missing, "docs/design.md names what does not exist:\n" + "\n".join(missing)
    assert names >= 8  # the page is checked, not skipped by a broken pattern
