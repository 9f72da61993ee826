"""A big round's close through the seamless wallet
(docs/decisions.md#the-seamless-wallet-at-table-speed): ``bench/run.py --only
wallet-close``.

``players`` operator players each place one bet (one slip, one debit) in a round, spread
over the betting window so that every one is accepted; the reference operator
(``livetable operator-demo``) answers every call — debits, credits, rollbacks — after about
``latency_ms``. Measured: from the round's settlement to when the last of its credits is
answered ``ok`` (every debit closed). Both ends are read from the server's own files after
the run: the round's ``round_settled`` is when the bench, polling the ledger every 10 ms,
first saw the round ``settled`` (the sweeper closes only settled rounds), with
``ended_at`` (the settlement's start) beside it; a credit's answer is its ``updated_at``
in the wallet log (the outbox writes it with the ``ok``). All on one machine's clock.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import loadavg, stop_process, tree_cpu_seconds
from bench.loadgen import LoadGen
from bench.scenarios import (
    AMOUNTS,
    SPOTS,
    LivetableServe,
    _log,
    connect,
    player_tokens,
    start_operator,
)


def _read(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def _round_state(data: Path, round_id: str) -> tuple[str, int | None]:
    rows = _read(data / "livetable.sqlite3",
                 "SELECT state, ended_at FROM rounds WHERE round_id = ?", round_id)
    return (rows[0][0], rows[0][1]) if rows else ("", None)


def _wallet_calls(data: Path, round_id: str) -> list[tuple[Any, ...]]:
    return _read(data / "livetable-wallet.sqlite3",
                 "SELECT method, state, closed_by, updated_at FROM wallet_calls "
                 "WHERE round_id = ?", round_id)


def _wait_settled(data: Path, round_id: str, timeout: float) -> int:
    """When (ms, wall clock) the round was first seen settled, polling every 10 ms."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, _ = _round_state(data, round_id)
        if state in ("settled", "cancelled"):
            return time.time_ns() // 1_000_000
        time.sleep(0.01)
    raise TimeoutError(f"round {round_id} not settled in {timeout:g} s")


def _wait_closed(data: Path, round_id: str, timeout: float) -> list[tuple[Any, ...]]:
    """The round's wallet calls once every debit is closed and every closing call answered
    ``ok`` (or at the timeout, as they stand)."""
    deadline = time.monotonic() + timeout
    while True:
        calls = _wallet_calls(data, round_id)
        debits = [c for c in calls if c[0] == "debit"]
        closing = [c for c in calls if c[0] != "debit"]
        if (debits and all(c[2] is not None for c in debits)
                and all(c[1] == "ok" for c in closing)) or time.monotonic() > deadline:
            return calls
        time.sleep(0.05)


def wallet_close(lg: LoadGen, work: Path, players: int, latency_ms: float,
                 betting_s: float = 20.0, window_s: float = 8.0) -> dict[str, Any]:
    _log(f"wallet close: {players} players × 1 bet, seamless wallet {latency_ms:g} ms "
         f"(every call)")
    env: dict[str, str] = {"LIVETABLE_BETWEEN_ROUNDS": "1"}
    operator = start_operator(work, latency_ms, "*", env)
    try:
        serve = LivetableServe(work, f"close-{latency_ms:g}",
                               ["--betting-seconds", str(betting_s), "--reveal-interval",
                                "0.3"], env)
    except BaseException:  # the operator is not left running
        stop_process(operator)
        raise
    try:
        conn = connect(lg, "livetable", serve.port, players,
                       player_tokens(serve.secret(), players, "c"))
        while True:  # a round in betting, with the whole window still ahead
            snap = serve.table()
            now_ms = time.time_ns() // 1_000_000
            closes = snap.get("closes_at")
            if (snap.get("phase") == "betting" and closes
                    and closes - now_ms > window_s * 1000 + 800):
                break
            time.sleep(0.1)
        round_id = snap["round_id"]
        end_ns = (closes - 500) * 1_000_000
        answers = lg.call("bets", round_id=round_id, start_ns=end_ns - int(window_s * 1e9),
                          end_ns=end_ns, per_peer=1, seed=11, timeout=60.0, spots=SPOTS,
                          amounts=AMOUNTS)
        codes: Counter[str] = Counter()
        for a in answers:
            codes.update(a["codes"])
        load0, cpu0 = loadavg(), tree_cpu_seconds(serve.pid)
        seen_settled = _wait_settled(serve.data, round_id, 60.0)
        calls = _wait_closed(serve.data, round_id, 120.0)
        cpu1 = tree_cpu_seconds(serve.pid)
        _, ended_at = _round_state(serve.data, round_id)
        lg.call("close")
        return _summary(players, latency_ms, conn, codes, calls, seen_settled, ended_at,
                        cpu1 - cpu0, [load0[0], loadavg()[0]])
    finally:
        serve.stop()
        stop_process(operator)


def _summary(players: int, latency_ms: float, conn: dict[str, Any], codes: Counter[str],
             calls: list[tuple[Any, ...]], seen_settled: int, ended_at: int | None,
             cpu_s: float, load: list[float]) -> dict[str, Any]:
    debits = [c for c in calls if c[0] == "debit"]
    credits = [c for c in calls if c[0] == "credit"]
    last_ok = max((c[3] for c in calls if c[0] != "debit" and c[1] == "ok"), default=None)
    return {
        "players": players, "wallet_latency_ms": latency_ms, "connected": conn["connected"],
        "codes": dict(codes), "debits": len(debits),
        "debits_ok": sum(1 for c in debits if c[1] == "ok"),
        "debits_closed": sum(1 for c in debits if c[2] is not None),
        "credits": len(credits), "credits_ok": sum(1 for c in credits if c[1] == "ok"),
        "rollbacks": sum(1 for c in calls if c[0] == "rollback"),
        "all_closed": bool(debits) and all(c[2] is not None for c in debits)
        and all(c[1] == "ok" for c in calls if c[0] != "debit"),
        # the two clocks are the same machine's wall clock (ms)
        "settled_to_last_credit_ok_ms": (None if last_ok is None
                                         else last_ok - seen_settled),
        "settling_start_to_last_credit_ok_ms": (None if last_ok is None or ended_at is None
                                                else last_ok - ended_at),
        "settling_ms": None if ended_at is None else seen_settled - ended_at,
        "server_cpu_s_close": round(cpu_s, 3), "loadavg": load,
    }
