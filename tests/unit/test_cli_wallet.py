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


def test_the_daily_summary_is_filtered_by_operator(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The figures themselves: tests/unit/test_wallet_log.py (both stores)."""
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


def test_the_report_adds_up_the_whole_log_and_says_when_it_lists_part_of_it(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The report listed the oldest 10,000 calls and added its totals up from those alone,
    without a word (1,505 credits reported of 1,533): now the totals are the log's over
    every call, in SQL, and the report says it lists part of the log."""
    calls = 10_050

    async def write() -> None:
        log = SQLiteWalletLog(tmp_path / "livetable-wallet.sqlite3")
        await log.enqueue([WalletCall(
            tx_id=f"c-{n}", method="credit", player_id=f"p{n % 7}", currency="THB",
            table_id="t1", round_id=f"t1.1.{n // 100}", amount=10, body=b"{}",
            state="queued", created_at=T0 + n, updated_at=T0 + n) for n in range(calls)], T0)
        await log.close()

    (tmp_path / "livetable.sqlite3").touch()
    asyncio.run(write())
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path), "--json")
    report = json.loads(out)
    assert code == 0 and len(report["calls"]) == 10_000
    assert (report["totals"]["credits"], report["totals"]["credited"],
            report["totals"]["undelivered"]) == (calls, 10 * calls, calls)
    assert report["calls_in_log"] == calls and report["partial"] is True
    assert len(report["rounds"]) == 101 and report["rounds"][-1]["credits"] == 50
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path))
    assert "the oldest 10000 of 10050 calls" in out
    code, out, _ = run(capsys, "wallet", "report", "--data-dir", str(tmp_path), "--daily",
                       "--json")
    [day] = json.loads(out)["days"]
    assert (day["rounds"], day["players"], day["returns"]) == (101, 7, 10 * calls)


def test_the_reference_operator_accepts_the_connections_livetable_opens_at_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Its listen backlog holds every connection livetable may open to it at once, and
    more: with aiohttp's default (128) the kernel dropped the connects of a close of
    betting past it, each back only when TCP retried a second later (245 of 10,000 bets
    of the wallet bench waited over a second)."""
    from aiohttp import web

    from livetable.config import Settings
    from livetable.operator.client import OPENING_AT_ONCE

    served: dict[str, object] = {}
    monkeypatch.setattr(web, "run_app", lambda app, **kw: served.update(kw))
    code, out, _ = run(capsys, "operator-demo", "--secret", "s", "--port", "8123")
    assert code == 0 and "wallet at http://127.0.0.1:8123/wallet" in out
    backlog = served["backlog"]
    assert isinstance(backlog, int)
    assert backlog >= Settings().wallet_connections >= OPENING_AT_ONCE
