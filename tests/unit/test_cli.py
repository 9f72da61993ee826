"""The ``livetable`` console script, called in-process through ``main([...])``."""

from __future__ import annotations

import json

import msgspec
import pytest

from livetable.cli import build_parser, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_settle_example_9_returns_400(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "settle", "9D 7C", "KH 9H")
    assert code == 0 and err == ""
    assert json.loads(out) == {
        "banker": {"cards": ["9D", "7C"], "value": "6", "points": 6, "label": "6 Points",
                   "flush": False, "pair": False},
        "player": {"cards": ["KH", "9H"], "value": "9", "points": 9, "label": "9 Points",
                   "flush": True, "pair": False},
        "outcome": "win",
        "odds": 2,
        "player_bet": {"amount": 100, "deducted": 200, "returned": 400},
        "pair_bet": {"amount": 100, "deducted": 100, "returned": 0},
    }


def test_settle_example_7_pair_with_an_amount(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "settle", "6♠ 8♠", "10c 10h", "--amount", "25")
    assert code == 0
    data = json.loads(out)
    assert data["player"]["label"] == "Special Pair"
    assert data["player"]["value"] == "7.4"
    assert data["pair_bet"] == {"amount": 25, "deducted": 25, "returned": 300}
    assert data["player_bet"] == {"amount": 25, "deducted": 50, "returned": 100}


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["settle", "9D 7X", "KH 9H"], "'7X'"),
        (["settle", "9D 7C", "KH ZZ"], "'ZZ'"),
        (["settle", "9D", "KH 9H"], "two cards"),
        (["settle", "9D 7C 5S", "KH 9H"], "two cards"),
        (["settle", "9D 7C", "KH 9H", "--amount", "0"], "--amount"),
        (["settle", "9D 7C", "KH 9H", "--amount", "-5"], "--amount"),
        (["settle", "9D 7C", "KH 9H", "--amount", "ten"], "--amount"),
        (["settle", "9D 7C"], "player"),
    ],
)
def test_settle_bad_input_is_one_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], names: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and names in err


def test_rtp_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rtp", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["player_rtp_of_deducted"] == "455458217/461223945"
    assert data["player_rtp_of_stake"] == "449692489/461223945"
    assert data["pair_rtp"] == "372/415"
    assert len(data["outcomes"]) == 5


def test_rtp_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rtp")
    assert code == 0
    assert "98.75 %" in out and "97.50 %" in out and "89.64 %" in out


def test_simulate_shows_progress_on_stderr_and_the_result_on_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "simulate", "--shoes", "2", "--seed", "5", "--json")
    assert code == 0
    assert "2/2 shoes" in err and "#" in err
    data = json.loads(out)
    assert data["shoes"] == 2 and data["seed"] == 5
    assert data["player"]["bets"] == 5 * data["rounds"]


def test_simulate_rejects_no_shoes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "simulate", "--shoes", "0")
    assert code == 2 and "--shoes" in err


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2 and "usage" in err


def test_the_parser_has_one_subcommand_per_command() -> None:
    parser = build_parser()
    args = parser.parse_args(["settle", "AS KS", "QH QD"])
    assert args.command == "settle" and args.amount == 100


# --- tokens: staff tokens name their tables ---------------------------------------------------

SECRET = "test-secret-of-this-module"


def minted(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("LIVETABLE_SECRET", SECRET)
    return run(capsys, "token", *argv)


@pytest.mark.parametrize(("argv", "tables"), [
    (["--dealer", "--tables", "t1,t2"], ("t1", "t2")),
    (["--dealer", "--tables", " t3 "], ("t3",)),
    (["--dealer", "--all-tables"], ("*",)),
    (["--supervisor", "--tables", "t1"], ("t1",)),
])
def test_staff_token_names_its_tables(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                      tables: tuple[str, ...]) -> None:
    from livetable.auth import verify

    code, out, _ = minted(capsys, monkeypatch, *argv, "--player", "d7", "--name", "Dee")
    assert code == 0
    identity = verify(SECRET.encode(), out.strip())
    assert identity.kind == ("supervisor" if "--supervisor" in argv else "dealer")
    assert (identity.id, identity.name, identity.tables) == ("d7", "Dee", tables)
    assert identity.may_drive("t1") == ("t1" in tables or "*" in tables)
    assert not identity.is_player


@pytest.mark.parametrize(("argv", "names"), [
    (["--dealer"], "--tables"),
    (["--supervisor"], "--all-tables"),
    (["--dealer", "--tables", "t1", "--all-tables"], "--tables"),
    (["--dealer", "--tables", ","], "at least one"),
    (["--player", "p1", "--tables", "t1"], "--dealer"),
])
def test_staff_token_without_a_scope_is_refused(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch,
                                                argv: list[str], names: str) -> None:
    code, out, err = minted(capsys, monkeypatch, *argv)
    assert code == 2 and out == "" and names in err


def test_dealer_and_supervisor_are_exclusive(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = minted(capsys, monkeypatch, "--dealer", "--supervisor", "--all-tables")
    assert code == 2 and out == "" and "not allowed with" in err


@pytest.mark.parametrize(("line", "frame"), [
    ("kh", {"type": "card", "card": "KH"}),
    ("cut", {"type": "card", "card": "CUT"}),
    ("open 20", {"type": "open_betting", "betting_ms": 20_000}),
    ("open", {"type": "open_betting", "betting_ms": None}),
    ("cards", {"type": "round_cards"}),
    ("void 1", {"type": "correct_cards", "count": 1, "approval": None}),
    ("void 2 abc.def", {"type": "correct_cards", "count": 2, "approval": "abc.def"}),
    ("manual", {"type": "set_mode", "auto": False}),
    ("   ", None),
])
def test_terminal_console_lines(line: str, frame: dict[str, object] | None) -> None:
    from livetable.cli.terminal import command_of

    command = command_of(line)
    assert (None if command is None else msgspec.to_builtins(command)) == frame


@pytest.mark.parametrize("line", ["void", "void two", "ZZ"])
def test_terminal_console_refuses_what_it_cannot_send(line: str) -> None:
    from livetable.cli.terminal import command_of

    with pytest.raises(ValueError):
        command_of(line)
