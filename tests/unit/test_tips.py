"""Tips to the dealer, the rules (livetable/betting/tips.py): given this policy, this
session and this tip, this is the answer — and the registry's word on tips."""

from __future__ import annotations

from pathlib import Path

import pytest

from livetable import protocol as p
from livetable.betting.sessions import SessionLimits, SessionRecord
from livetable.betting.tips import (
    TIPS_ON,
    Allowance,
    TipPolicy,
    TipRefusal,
    TipRequest,
    TipTaken,
    judge_tip,
    precheck_tip,
    session_allowance,
    tip_limits,
)
from livetable.cli import main
from livetable.cli.terminal import describe
from livetable.operator import registry

LIMITS = p.Limits(min=10, max=5000, pair_min=10, pair_max=1000, round_max=20000)
T0 = 1_700_000_000_000


def tip(amount: int = 100, allowance: Allowance | None = None) -> TipRequest:
    return TipRequest(player_id="alice", table="t1", tip_id="tip-1", amount=amount,
                      round_id="t1.1.1", allowance=allowance)


def test_tips_are_in_the_players_bet_limits_unless_the_operator_says_otherwise() -> None:
    assert tip_limits(TIPS_ON, LIMITS) == p.TipLimits(min=10, max=5000)
    assert tip_limits(TipPolicy(range=(100, 2000)), LIMITS) == p.TipLimits(min=100, max=2000)
    assert tip_limits(TipPolicy(on=False, range=(100, 2000)), LIMITS) is None


@pytest.mark.parametrize(("tip_id", "amount", "limits", "code"), [
    ("t", 100, None, "tips_off"),
    ("", 100, p.TipLimits(min=10, max=500), "bad_tip_id"),
    ("x" * 65, 100, p.TipLimits(min=10, max=500), "bad_tip_id"),
    ("tip\x00", 100, p.TipLimits(min=10, max=500), "bad_tip_id"),  # no NUL in PostgreSQL text
    ("t", 9, p.TipLimits(min=10, max=500), "tip_out_of_range"),
    ("t", 501, p.TipLimits(min=10, max=500), "tip_out_of_range"),
    ("t", 0, p.TipLimits(min=10, max=500), "tip_out_of_range"),
    ("t", -5, p.TipLimits(min=10, max=500), "tip_out_of_range"),
])
def test_the_gateway_refuses_what_it_can_alone(tip_id: str, amount: int,
                                               limits: p.TipLimits | None, code: str) -> None:
    refused = precheck_tip(tip_id, amount, limits)
    assert refused is not None and refused.code == code


def test_a_tip_in_its_limits_passes_and_a_refusal_says_the_range() -> None:
    assert precheck_tip("t", 10, p.TipLimits(min=10, max=500)) is None
    assert precheck_tip("t", 500, p.TipLimits(min=10, max=500)) is None
    refused = precheck_tip("t", 501, p.TipLimits(min=10, max=500))
    assert refused is not None
    error = refused.error("t")
    assert (error.code, error.tip_id) == ("tip_out_of_range", "t")
    assert error.message == "The tip is outside the tip limits. (from 10 to 500)"


def test_a_store_takes_a_fresh_tip_from_the_balance() -> None:
    assert judge_tip(tip(100), None, 1000) == TipTaken("tip-1", 100, 900, fresh=True)
    assert judge_tip(tip(1000), None, 1000) == TipTaken("tip-1", 1000, 0, fresh=True)


def test_a_tip_the_balance_does_not_cover_is_refused_with_both_figures() -> None:
    answer = judge_tip(tip(1001), None, 1000)
    assert answer == TipRefusal("insufficient_funds", (1001, 1000))
    assert isinstance(answer, TipRefusal)
    assert answer.message == "Your balance does not cover this tip. (needs 1001, balance 1000)"
    assert judge_tip(tip(10), None, None) == TipRefusal("insufficient_funds", (10, 0))


def test_a_tip_sent_again_is_answered_as_it_first_was_before_any_other_check() -> None:
    # the balance is 0 now and the session's limit is used up: a re-send is still the
    # first answer, with the balance right after it, not a refusal
    used_up = Allowance("loss_limit", 0, 500)
    assert judge_tip(tip(100, used_up), (100, 900), 0) == TipTaken("tip-1", 100, 900,
                                                                   fresh=False)
    assert judge_tip(tip(200), (100, 900), 5000) == TipRefusal("duplicate_tip_id")


def test_a_tip_past_what_the_session_leaves_is_refused_rg_limit() -> None:
    answer = judge_tip(tip(301, Allowance("loss_limit", 300, 500)), None, 10_000)
    assert answer == TipRefusal("rg_limit", ("loss_limit", 300, 500))
    assert isinstance(answer, TipRefusal)
    assert answer.message.endswith("(loss_limit: 300 left of 500)")
    assert judge_tip(tip(300, Allowance("loss_limit", 300, 500)), None, 10_000) == TipTaken(
        "tip-1", 300, 9700, fresh=True)


def session(**figures: object) -> SessionRecord:
    values: dict[str, object] = {
        "session_id": "s1", "operator": "acme", "player_id": "acme~p1", "started_at": T0,
        "expires_at": T0 + 86_400_000,
        "limits": SessionLimits(max_stake_per_round=1000, loss_limit=5000,
                                reality_check_minutes=30)}
    values.update(figures)
    return SessionRecord(**values)  # type: ignore[arg-type]  # the test's own figures


def test_what_a_session_leaves_is_its_tightest_limit() -> None:
    # 800 staked in this round of a 1000 cap; 1000 lost of 5000
    record = session(staked=2000, returned=1000, round_id="t1.1.1", round_staked=800)
    assert session_allowance(record, "t1.1.1", T0) == Allowance("max_stake_per_round",
                                                                200, 1000)
    # another round: the loss limit is the tighter of the two
    assert session_allowance(record, "t1.1.2", T0) == Allowance("max_stake_per_round",
                                                                1000, 1000)
    lost = session(staked=4800, returned=0)
    assert session_allowance(lost, "t1.1.2", T0) == Allowance("loss_limit", 200, 5000)
    # no round in play at the table: only the loss limit
    assert session_allowance(record, None, T0) == Allowance("loss_limit", 4000, 5000)
    assert session_allowance(session(limits=SessionLimits()), "t1.1.1", T0) is None


def test_an_ended_session_or_a_reality_check_waiting_refuses_a_tip() -> None:
    assert session_allowance(session(ended_at=T0, reason="self_exclusion"), None,
                             T0 + 1) == TipRefusal("session_ended")
    due = T0 + 30 * 60_000
    assert session_allowance(session(), None, due) == TipRefusal("reality_check_pending")


REGISTRY = """\
[operators.acme]
name = "ACME"
operator_secrets = ["env:OP"]
tips = false

[operators.acme.currencies.THB]
chips = [1000, 5000]
player = [1000, 500000]
pair = [1000, 100000]
round_max = 2000000

[operators.bet-7]
name = "Bet Seven"
operator_secrets = ["env:OP"]

[operators.bet-7.currencies.INR]
chips = [1000, 5000]
player = [1000, 100000]
pair = [1000, 20000]
round_max = 400000
tip = [500, 20000]
"""


def test_the_registry_turns_tips_off_per_operator_and_sets_their_range() -> None:
    found = registry.parse(REGISTRY, "ops.toml", {"OP": "s"})
    acme, bet7 = found.operators["acme"], found.operators["bet-7"]
    assert acme.tip_policy("THB") == TipPolicy(on=False)
    assert bet7.tip_policy("INR") == TipPolicy(on=True, range=(500, 20000))
    assert bet7.tip_policy("USD") == TIPS_ON  # no terms for it: the table's limits
    assert tip_limits(bet7.tip_policy("INR"), bet7.currencies["INR"].limits) == p.TipLimits(
        min=500, max=20000)


def test_a_tip_range_upside_down_is_refused_with_its_line() -> None:
    bad = REGISTRY.replace("tip = [500, 20000]", "tip = [20000, 500]")
    with pytest.raises(registry.RegistryError, match=r"line 21: .*tip: min 20000 is above"):
        registry.parse(bad, "ops.toml", {"OP": "s"})


def test_the_terminal_console_says_who_tipped_and_how_much() -> None:
    frame = {"type": "tip_received", "table": "t1", "from": "Tipper", "amount": 5000,
             "currency": "THB", "at": T0}
    assert describe(frame) == "tip from Tipper: 5000 THB (minor units)"
    assert describe({**frame, "currency": None}) == "tip from Tipper: 5000"


def test_operators_check_says_whose_tips_are_off(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OP", "s")
    path = tmp_path / "ops.toml"
    path.write_text(REGISTRY)
    assert main(["operators", "check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("acme: ") and lines[0].endswith("; tips off")
    assert lines[1].startswith("bet-7: ") and lines[1].endswith("; tips on")
