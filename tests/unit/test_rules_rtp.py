"""The exact RTP (enumeration) and the simulated one (whole shoes) agree with the seed.

The seed says "the maximum RTP of Pok Deng is 98.75 %". The exact figure for a Player bet,
of the amount deducted, is 455458217/461223945 = 98.749907… %, which rounds to 98.75 %
(it is 6859/7379583120 below it). Of the stake it is 97.4998… %, which rounds to 97.50 %.
"""

from __future__ import annotations

from fractions import Fraction

from livetable.rules.rtp import exact_rtp
from livetable.rules.simulate import simulate

PLAYER_OF_DEDUCTED = Fraction(455458217, 461223945)
PLAYER_OF_STAKE = Fraction(449692489, 461223945)


def percent_to_2_places(f: Fraction) -> Fraction:
    """Round to hundredths of a percent (no float on the way)."""
    return Fraction(round(f * 10000), 100)


def test_player_bet_rtp_of_deducted_is_98_75_percent() -> None:
    report = exact_rtp()
    assert report.player_rtp_of_deducted == PLAYER_OF_DEDUCTED
    assert percent_to_2_places(report.player_rtp_of_deducted) == Fraction(9875, 100)
    assert Fraction(9875, 10000) - report.player_rtp_of_deducted == Fraction(6859, 7379583120)


def test_player_bet_rtp_of_stake_is_97_50_percent() -> None:
    report = exact_rtp()
    assert report.player_rtp_of_stake == PLAYER_OF_STAKE
    # (E[returned] − withholding) / stake = 2 × (E[returned] / 2) − 1.
    assert report.player_rtp_of_stake == 2 * report.player_rtp_of_deducted - 1
    assert percent_to_2_places(report.player_rtp_of_stake) == Fraction(9750, 100)


def test_pair_bet_rtp_is_31_in_415_times_12() -> None:
    report = exact_rtp()
    # The second card matches the first one's rank: 31 of the 415 cards left.
    assert report.pair_rtp == Fraction(31, 415) * 12
    assert percent_to_2_places(report.pair_rtp) == Fraction(8964, 100)


def test_outcomes_add_up() -> None:
    report = exact_rtp()
    assert report.total_weight == 416 * 415 * 414 * 413
    assert sum(o.probability for o in report.outcomes) == 1
    assert {(o.outcome, o.odds, o.returned_multiple) for o in report.outcomes} == {
        ("win", 2, 4), ("win", 1, 3), ("tie", 1, 2), ("lose", 1, 1), ("lose", 2, 0),
    }
    expected = sum(o.probability * o.returned_multiple for o in report.outcomes)
    assert expected == report.player_expected_return == 2 * report.player_rtp_of_deducted
    # Win and lose are symmetric in value, so P(win) == P(lose).
    win = sum(o.probability for o in report.outcomes if o.outcome == "win")
    lose = sum(o.probability for o in report.outcomes if o.outcome == "lose")
    assert win == lose


def test_rtp_json_gives_fractions_as_strings() -> None:
    data = exact_rtp().to_json()
    assert data["player_rtp_of_deducted"] == "455458217/461223945"
    assert data["player_rtp_of_stake"] == "449692489/461223945"
    assert data["pair_rtp"] == "372/415"
    outcomes = data["outcomes"]
    assert isinstance(outcomes, list)
    assert sum(Fraction(o["probability"]) for o in outcomes) == 1


def test_a_small_simulation_is_reproducible_and_reports_progress() -> None:
    calls: list[tuple[int, int]] = []
    first = simulate(3, seed=11, progress=lambda done, total: calls.append((done, total)))
    again = simulate(3, seed=11)
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert first == again
    # 338…364 cards before the cut card, 2…11 opening cards, 13 a round.
    assert 3 * 25 <= first.rounds <= 3 * 28
    assert first.player.bets == first.pair.bets == 5 * first.rounds
    assert first.player.deducted == 2 * first.player.bets
    assert first.pair.deducted == first.pair.bets
    assert first.pair.returned % 12 == 0
    low, high = first.player.rtp_ci95
    assert low < float(first.player.rtp) < high


def test_a_larger_simulation_brackets_the_exact_rtp() -> None:
    report = exact_rtp()
    result = simulate(400, seed=2024)
    low, high = result.player.rtp_ci95
    assert low <= report.player_rtp_of_deducted <= high
    assert high - low < 0.02
    low, high = result.pair.rtp_ci95
    assert low <= report.pair_rtp <= high
