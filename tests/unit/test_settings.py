"""Settings: one msgspec Struct from flags and ``LIVETABLE_*`` variables.

Every setting has one type and one default; a bad value is a usage error that names the
variable or the flag it came from, never a traceback and never a silent fallback.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from msgspec.structs import fields

from livetable.cli import build_parser, main
from livetable.config import (
    Settings,
    SettingsError,
    load_settings,
    unknown_variables,
    variable,
)
from livetable.engine import Timing
from livetable.services import timing_of


def fields_of(struct: type[Settings]) -> list[str]:
    return [f.name for f in fields(struct)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_a_mode_of_the_wrong_case_is_refused_not_run_as_auto(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("LIVETABLE_SECRET", "s" * 32)
    monkeypatch.setenv("LIVETABLE_MODE", "Manual")
    code, err = run(capsys, "token", "--player", "p1", "--data-dir", str(tmp_path))
    assert code == 2
    assert err.strip() == ("livetable token: LIVETABLE_MODE=Manual: expected one of "
                           "auto, manual")


def test_a_port_that_is_not_a_number_names_the_variable(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("LIVETABLE_PORT", "abc")
    code, err = run(capsys, "serve", "--data-dir", str(tmp_path))
    assert code == 2
    assert err == ("livetable serve: LIVETABLE_PORT=abc: expected an integer from 1 to "
                   "65535\n")
    assert not (tmp_path / "livetable.sqlite3").exists()  # refused before anything opened


@pytest.mark.parametrize(("environ", "says"), [
    ({"LIVETABLE_PORT": "70000"}, "LIVETABLE_PORT=70000: expected an integer from 1 to 65535"),
    ({"LIVETABLE_CLOSE_GRACE": "-1"}, "LIVETABLE_CLOSE_GRACE=-1: expected a number >= 0"),
    ({"LIVETABLE_BETTING_SECONDS": "0.5"},
     "LIVETABLE_BETTING_SECONDS=0.5: expected a number >= 1"),
    ({"LIVETABLE_HELLO_TIMEOUT": "0"}, "LIVETABLE_HELLO_TIMEOUT=0: expected a number > 0"),
    ({"LIVETABLE_TABLES": "0"}, "LIVETABLE_TABLES=0: expected an integer >= 1"),
    ({"LIVETABLE_DEMO": "maybe"},
     "LIVETABLE_DEMO=maybe: expected true or false (1/0, yes/no, on/off)"),
    ({"LIVETABLE_WALLET": "Seamless"},
     "LIVETABLE_WALLET=Seamless: expected one of internal, seamless"),
    ({"LIVETABLE_SQLITE_SYNC": "FAST"},
     "LIVETABLE_SQLITE_SYNC=FAST: expected one of NORMAL, FULL, EXTRA"),
    # the checks of more than one setting keep their messages
    ({"LIVETABLE_WALLET": "seamless"},
     "--wallet seamless needs --operators FILE (each operator's wallet), or --wallet-url "
     "URL and LIVETABLE_WALLET_SECRET"),
    ({"LIVETABLE_TRUSTED_PROXIES": "10.0.0.1,*"},
     "LIVETABLE_TRUSTED_PROXIES must list proxy addresses or networks"),
    ({"LIVETABLE_STREAMS": "t2=/live/t2.m3u8"}, "--stream for t2: no such table (tables: t1)"),
    ({"LIVETABLE_STREAMS": "t1"}, "LIVETABLE_STREAMS: a stream is TABLE=URL, got 't1'"),
])
def test_a_bad_value_is_refused_and_named(environ: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(environ)
    assert str(refused.value).startswith(says)


def test_values_from_the_environment_and_flags_winning_over_it() -> None:
    environ = {"LIVETABLE_PORT": "9001", "LIVETABLE_MODE": "manual",
               "LIVETABLE_DEMO": "Off", "LIVETABLE_COMPRESS": "yes",
               "LIVETABLE_ALLOWED_ORIGINS": "https://a.example, https://b.example,",
               "LIVETABLE_SECRET": "s3cret", "LIVETABLE_DB": "/tmp/x.sqlite3",
               "LIVETABLE_CLOSE_GRACE": "0.25", "LIVETABLE_REDIS_URL": ""}
    settings = load_settings(environ)
    assert (settings.port, settings.mode, settings.demo, settings.compress) == (
        9001, "manual", False, True)
    assert settings.allowed_origins == ["https://a.example", "https://b.example"]
    assert settings.secret == b"s3cret"
    assert settings.db == Path("/tmp/x.sqlite3")
    assert settings.close_grace == 0.25
    assert settings.redis_url is None  # empty: unset
    flagged = load_settings(environ, {"port": ("--port", "9002"), "demo": ("--demo", True),
                                      "table_ids": ("--table-ids", "a,b")})
    assert (flagged.port, flagged.demo, flagged.table_names) == (9002, True, ["a", "b"])
    assert flagged.mode == "manual"  # not flagged: the variable's


def test_a_bad_flag_is_named_as_given(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIVETABLE_PORT", "9001")
    code, err = run(capsys, "serve", "--data-dir", str(tmp_path), "--port", "x1")
    assert (code, err) == (2, "livetable serve: --port=x1: expected an integer from 1 to "
                              "65535\n")
    code, err = run(capsys, "serve", "--data-dir", str(tmp_path), "--mode", "Manual")
    assert (code, err) == (2, "livetable serve: --mode=Manual: expected one of auto, manual\n")


def test_a_misspelt_variable_is_warned_about_not_refused() -> None:
    environ = {"LIVETABLE_PROT": "9000", "LIVETABLE_SHOE_KEY": "k" * 32,
               "LIVETABLE_REDIS_PASSWORD": "p", "LIVETABLE_SOMETHING_ELSE": "1"}
    assert unknown_variables(environ) == [
        "LIVETABLE_PROT is not a setting: did you mean LIVETABLE_PORT?"]
    assert load_settings(environ).port == 8000


def test_the_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Settings().port = 1  # type: ignore[misc]


def test_one_default_for_the_timing_settings_and_the_engine() -> None:
    settings, timing = Settings(), Timing()
    assert timing_of(settings) == timing
    assert settings.close_grace == timing.close_grace_ms / 1000 == 1


def test_flags_show_the_settings_defaults_and_have_none_of_their_own(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "betting countdown (default 15; env LIVETABLE_BETTING_SECONDS)" in shown
    assert "--mode {auto,manual}" in shown and "(default auto; env LIVETABLE_MODE)" in shown
    given = vars(build_parser().parse_args(["serve"]))
    assert given["setting_flags"]
    assert all(given[name] is None for name in given["setting_flags"])


# --- docs/operations.md §3 lists every setting -----------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def settings_table() -> dict[str, tuple[str, str]]:
    """``{variable: (flag column, default column)}`` of the table of §3."""
    text = DOC.read_text()
    section = text[text.index("## 3. Settings"):text.index("## 4.")]
    rows: dict[str, tuple[str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and (name := re.fullmatch(r"`(LIVETABLE_\w+)`", cells[1])):
            rows[name[1]] = (cells[0], cells[2])
    return rows


def test_every_setting_is_in_the_operations_table_with_its_flag_and_default() -> None:
    rows = settings_table()
    assert sorted(rows) == sorted(variable(name) for name in fields_of(Settings))
    serve = build_parser().parse_args(["serve"])
    defaults = Settings()
    for name in fields_of(Settings):
        flag_column, default_column = rows[variable(name)]
        flag = serve.setting_flags.get(name)
        assert (flag_column == "—") == (flag is None), name
        assert flag is None or flag_column.startswith(f"`{flag}"), name
        value = getattr(defaults, name)
        shown = re.match(r"`([^`]*)`", default_column)
        if isinstance(value, bool):
            assert default_column == ("on" if value else "off"), name
        elif isinstance(value, int | float):
            assert shown is not None and float(shown[1]) == value, name
        elif name in ("db", "secret", "static"):  # derived from other settings / the package
            assert any(w in default_column for w in ("unset", "static/", "DATA_DIR")), name
        elif not value:
            assert default_column.startswith(("unset", "empty")), name
        else:
            assert shown is not None and shown[1] == str(value), name
