"""The wallet commands of the console script: ``wallet report``, ``operator-demo``'s and
``serve``'s wallet flags (in-process, through ``main([...])``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from livetable.cli import main
from livetable.operator.log import WalletCall
from livetable.operator.log_sqlite import SQLiteWalletLog

T0 = 1_800_000_000_000


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def seed_log(db: Path) -> None:
    async def write() -> None:
        log = SQLiteWalletLog(db)
        for round_id, tx, player in (("t1.1.1", "d-1", "alice"), ("t1.1.2", "d-2", "bob")):
            await log.begin_debit(WalletCall(
                tx_id=tx, method="debit", player_id=player, currency="THB", table_id="t1",
                round_id=round_id, amount=200, body=b'{"tx_id":"%s"}' % tx.encode(),
                state="pending", created_at=T0, updated_at=T0, slip_key="b1", deadline=T0))
        debit = (await log.calls(round_id="t1.1.1"))[0]
        await log.answer_debit(debit, "ok", '{"status":"ok","balance":1}', T0)
        await log.close()

    asyncio.run(write())


def test_wallet_report_lists_calls_and_totals_per_round(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    seed_log(tmp_path / "livetable.sqlite3")
    code, out, err = run(capsys, "wallet", "report", "--data-dir", str(tmp_path), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert [c["tx_id"] for c in report["calls"]] == ["d-1", "d-2"]
    assert report["calls"][0]["request"] == {"tx_id": "d-1"}
    assert {r["round_id"]: (r["debited"], r["debited_unknown"], r["open_debits"])
            for r in report["rounds"]} == {"t1.1.1": (200, 0, 1), "t1.1.2": (0, 200, 1)}
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path),
                       "--player", "bob", "--json")
    assert [c["tx_id"] for c in json.loads(out)["calls"]] == ["d-2"]
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path))
    assert code == 0 and "d-1" in out and "t1.1.2" in out


def test_wallet_report_without_a_database_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "wallet", "report", "--data-dir", str(tmp_path / "none"))
    assert code == 2 and "no database" in err


@pytest.mark.parametrize(("argv", "says"), [
    (["operator-demo", "--secret", "s", "--fault", "debit:fire=0.1"], "fault kind"),
    (["operator-demo", "--secret", "s", "--fault", "payout:error=0.1"], "METHOD"),
    (["operator-demo"], "--secret"),
    (["serve", "--wallet", "seamless"], "--wallet-url"),
])
def test_wallet_flags_that_cannot_work_are_usage_errors(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        argv: list[str], says: str) -> None:
    monkeypatch.delenv("LIVETABLE_WALLET_SECRET", raising=False)
    code, _, err = run(capsys, *argv)
    assert code == 2 and says in err


def test_the_daily_summary_books_each_operators_play_by_table_and_currency(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Stakes are the debits that stood (a rolled-back one nets out), returns the credits,
    GGR their difference; an operator sees only its players; a round that crosses
    midnight is booked on the day it began."""
    from livetable.operator.report import daily

    day = 1_799_971_200_000  # 2027-01-15 00:00 UTC
    def call(tx: str, method: str, player: str, currency: str, round_id: str, amount: int,
             state: str = "ok", at: int = day + 3_600_000) -> WalletCall:
        return WalletCall(tx_id=tx, method=method, player_id=player,  # type: ignore[arg-type]
                          currency=currency, table_id=round_id.split(".")[0],
                          round_id=round_id, amount=amount, body=b"{}",
                          state=state, created_at=at, updated_at=at)  # type: ignore[arg-type]
    calls = [
        call("d1", "debit", "acme~p-1", "THB", "t1.1.1", 20_000),
        call("d2", "debit", "acme~p-2", "THB", "t1.1.1", 10_000),
        call("c1", "credit", "acme~p-1", "THB", "t1.1.1", 40_000, at=day + 3_700_000),
        call("c2", "credit", "acme~p-2", "THB", "t1.1.1", 0, at=day + 3_700_000),
        call("d3", "debit", "acme~p-1", "JPY", "t1.1.2", 500, state="unknown"),
        call("r3", "rollback", "acme~p-1", "JPY", "t1.1.2", 500),
        call("d4", "debit", "acme~p-1", "JPY", "t2.1.1", 700),
        call("c4", "credit", "acme~p-1", "JPY", "t2.1.1", 0),
        call("x1", "debit", "bet7~p-1", "INR", "t1.1.3", 99_999),
        call("r9", "debit", "acme~p-3", "THB", "t1.1.4", 100, state="refused"),
        # begins before midnight, credited after it: the day it began
        call("d5", "debit", "acme~p-2", "THB", "t1.1.9", 300, at=day - 1_000),
        call("c5", "credit", "acme~p-2", "THB", "t1.1.9", 600, at=day + 5_000),
    ]
    rows = [(d.day, d.operator, d.table_id, d.currency, d.rounds, d.players, d.stakes,
             d.returns, d.ggr) for d in daily(calls, "acme")]
    assert rows == [
        ("2027-01-14", "acme", "t1", "THB", 1, 1, 300, 600, -300),
        ("2027-01-15", "acme", "t1", "JPY", 1, 1, 0, 0, 0),
        ("2027-01-15", "acme", "t1", "THB", 2, 3, 30_000, 40_000, -10_000),
        ("2027-01-15", "acme", "t2", "JPY", 1, 1, 700, 0, 700),
    ]
    assert [d.operator for d in daily(calls)] == ["acme"] * 4 + ["bet7"]

    db = tmp_path / "livetable.sqlite3"
    seed_log(db)
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path), "--daily",
                       "--operator", "default", "--json")
    assert code == 0
    assert [(d["operator"], d["stakes"], d["rounds"]) for d in json.loads(out)["days"]] == [
        ("default", 400, 2)]
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path), "--daily",
                       "--operator", "acme", "--json")
    assert json.loads(out) == {"days": []}
