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
