"""The operator registry (livetable/operator/registry.py): a file read whole or refused
whole with its line, secrets by reference, ISO 4217 decimals, ids namespaced by operator."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from livetable import protocol as p
from livetable.cli import main
from livetable.config import Settings
from livetable.operator import registry
from livetable.operator.registry import RegistryError, ledger_player_id, operator_of

GOOD = """\
[operators.acme]
name = "ACME Casino"
wallet_url = "http://127.0.0.1:9/acme"
wallet_secrets = ["env:ACME_WALLET"]
operator_secrets = ["env:ACME_OP", "file:{op_next}"]
tables = ["t1"]
language = "th"
blocked_words = ["spam"]

[operators.acme.currencies.THB]
chips = [1000, 2500, 5000]
player = [1000, 500000]
pair = [1000, 100000]
round_max = 2000000

[operators.acme.currencies.JPY]
chips = [100, 500, 1000]
player = [100, 50000]
pair = [100, 10000]
round_max = 200000

[operators.bet-7]
name = "Bet Seven"
operator_secrets = ["env:BET7_OP"]

[operators.bet-7.currencies.INR]
chips = [1000, 5000]
player = [1000, 100000]
pair = [1000, 20000]
round_max = 400000
"""
ENV = {"ACME_WALLET": "w-secret", "ACME_OP": "op-secret", "BET7_OP": "bet7-secret"}


@pytest.fixture
def text(tmp_path: Path) -> str:
    (tmp_path / "next").write_text("op-secret-next\n")
    return GOOD.replace("{op_next}", str(tmp_path / "next"))


def test_a_good_file_gives_every_operator_its_terms(text: str) -> None:
    found = registry.parse(text, "ops.toml", ENV, ["t1", "t2"])
    acme, bet7 = found.operators["acme"], found.operators["bet-7"]
    assert acme.operator_secrets == (b"op-secret", b"op-secret-next")  # rotation: both
    assert acme.wallet_secrets == (b"w-secret",)
    assert acme.may_launch_at("t1") and not acme.may_launch_at("t2")
    assert bet7.may_launch_at("t2") and bet7.wallet_url is None
    # ISO 4217's minor units, not a table typed by hand
    assert [acme.currencies["THB"].decimals, acme.currencies["JPY"].decimals,
            bet7.currencies["INR"].decimals] == [2, 0, 2]
    assert acme.currencies["THB"].chips == (1000, 2500, 5000)
    assert acme.currencies["THB"].symbol("th") == "฿"
    assert acme.blocked_words == ("spam",)
    # a session's chips and limits: the entry for its currency, in the wire's names
    terms = acme.terms("JPY")
    assert terms is not None and terms.chips == (100, 500, 1000)
    assert terms.limits == p.Limits(min=100, max=50000, pair_min=100, pair_max=10000,
                                    round_max=200000)
    assert acme.terms("INR") is None and acme.terms(None) is None  # the table's then


@pytest.mark.parametrize(("change", "line", "says"), [
    # a secret written into the file itself
    (("env:BET7_OP", "hunter2"), 24, "by reference"),
    # a secret whose variable is not set
    (("env:BET7_OP", "env:NOT_SET_ANYWHERE"), 24, "no NOT_SET_ANYWHERE"),
    (("[operators.acme.currencies.JPY]", "[operators.acme.currencies.JPX]"), 16,
     "not an ISO 4217"),
    (("player = [100, 50000]", "player = [50000, 100]"), 18, "above max"),
    (("chips = [1000, 5000]", "chips = [5000, 1000]"), 27, "smallest up"),
    (("round_max = 200000\n", "round_max = -5\n"), 20, ">= 1"),
    (('language = "th"', 'language = "fr"'), 7, "language"),
    (('tables = ["t1"]', 'tables = ["t9"]'), 6, "no table t9"),
    (('name = "Bet Seven"', 'name = "Bet Seven"\nwallet = "x"'), 24, "wallet"),
    (("[operators.bet-7]", "[operators.Bet_7]"), 22, "a-z, 0-9"),
    (('name = "ACME Casino"', 'name = "ACME Casino'), 2, "TOML"),
])
def test_a_bad_file_is_refused_whole_with_its_line(text: str, change: tuple[str, str],
                                                   line: int, says: str) -> None:
    bad = text.replace(*change)
    assert bad != text
    with pytest.raises(RegistryError) as refused:
        registry.parse(bad, "ops.toml", ENV, ["t1", "t2"])
    message = str(refused.value)
    assert says in message
    assert f"line {line}" in message, message


def test_player_ids_are_namespaced_by_operator() -> None:
    assert ledger_player_id("acme", "p-1") != ledger_player_id("bet-7", "p-1")
    assert ledger_player_id("acme", "p-1") == "acme~p-1"
    assert operator_of("acme~p-1") == "acme" and operator_of("p-1") == "default"
    # the single-operator deployment keeps its players' ids as they were
    assert ledger_player_id("default", "p-1") == "p-1"


def test_operators_check_says_what_a_file_holds_or_its_line(
        text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    good = tmp_path / "ops.toml"
    good.write_text(text)
    assert main(["operators", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert "acme: ACME Casino; 2 operator secret(s)" in out and "JPY (0 decimals" in out
    assert "2 operator(s), good" in out
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("env:BET7_OP", "hunter2"))
    assert main(["operators", "check", str(bad)]) == 1
    assert "line 24" in capsys.readouterr().err


def test_a_bad_file_on_reload_leaves_the_registry_in_force(
        text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from livetable.services import Services

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "ops.toml"
    path.write_text(text)
    services = Services(Settings(data_dir=tmp_path, operators=path, sqlite_writer="thread",
                                 table_ids=["t1", "t2"]))
    assert sorted(services.operators.operators) == ["acme", "bet-7"]
    path.write_text(text.replace("[operators.bet-7]", "[operators.bet-7]\nbogus = 1"))
    with caplog.at_level(logging.ERROR):
        assert not services.reload_operators()
    assert sorted(services.operators.operators) == ["acme", "bet-7"]
    assert "line 23" in caplog.text and "stays" in caplog.text
    # a good file replaces it whole: bet-7 gone, a rotated secret in force
    monkeypatch.setenv("ACME_OP", "rotated")
    path.write_text(text.split("[operators.bet-7]")[0])
    assert services.reload_operators()
    assert list(services.operators.operators) == ["acme"]
    assert services.operators.operators["acme"].operator_secrets[0] == b"rotated"
    assert os.environ["ACME_OP"] == "rotated"


def test_with_the_seamless_wallet_every_operator_needs_its_own_wallet(
        text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each operator's players are paid by its own wallet (operator/wallets.py): an
    operator without one is refused with its line, never sent to another's wallet."""
    from livetable.services import Services

    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "ops.toml"
    path.write_text(text)
    with pytest.raises(RegistryError, match=r"line 22: operators.bet-7: .*wallet_url"):
        Services(Settings(data_dir=tmp_path, operators=path, sqlite_writer="thread",
                          table_ids=["t1", "t2"], wallet="seamless"))
    # the internal wallet has no wallet to call: the same file is good there
    registry.parse(text, "ops.toml", ENV, ["t1", "t2"])
    found = registry.parse(text.replace('[operators.bet-7]\nname = "Bet Seven"\n',
                                        '[operators.bet-7]\nname = "Bet Seven"\n'
                                        'wallet_url = "http://127.0.0.1:9/bet7"\n'
                                        'wallet_secrets = ["env:BET7_OP"]\n'),
                           "ops.toml", ENV, ["t1", "t2"], wallets=True)
    assert found.operators["bet-7"].wallet_url == "http://127.0.0.1:9/bet7"
