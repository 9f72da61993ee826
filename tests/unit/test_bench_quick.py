"""The benchmark harness runs end to end: ``bench/run.py --quick`` once, as a subprocess.

No timing is asserted — this machine is shared and small. What must hold whatever the
timings: the run completes and writes its JSON; every bet is answered (accepted, or
rejected with a code); every accepted bet's ``bet_settled`` reaches its player; no client
sees a gap in seq, in the fan-out or through a reconnect storm.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("bench-results")
    proc = subprocess.run(
        # every part once; of the comparison servers websockets' alone, and one operator
        # latency each for the seamless wallet's bets and close (a third less time: the
        # suite's critical path; `bench/run.py --quick` itself runs them all)
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(out),
         "--kinds", "livetable,ws", "--wallet-latencies", "20", "--close-latencies", "20"],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    files = sorted(out.glob("*-quick.json"))
    assert files, f"no results written\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    results: dict[str, object] = json.loads(files[-1].read_text())
    results["_exit"] = proc.returncode
    results["_output"] = proc.stdout[-3000:] + proc.stderr[-3000:]
    return results


def test_the_quick_run_completes(quick_run: dict[str, object]) -> None:
    assert "error" not in quick_run, quick_run.get("traceback")
    checks = quick_run["checks"]
    assert isinstance(checks, dict)
    assert checks["failed"] == [], quick_run["_output"]
    assert quick_run["_exit"] == 0, quick_run["_output"]


def test_every_bet_is_accounted_for(quick_run: dict[str, object]) -> None:
    bets = quick_run["bets"]
    assert isinstance(bets, list) and bets
    for r in bets:
        assert "error" not in r, r.get("traceback")
        assert sum(r["codes"].values()) == r["bets"] == r["players"] * r["per_player"]
        assert r["answered"] == r["bets"], r["codes"]  # no "no_answer", no "connection_lost"


def test_every_settled_bet_is_delivered(quick_run: dict[str, object]) -> None:
    settlement = quick_run["settlement"]
    assert isinstance(settlement, list) and settlement
    for r in settlement:
        assert "error" not in r, r.get("traceback")
        assert sum(r["codes"].values()) == r["bets"]
        assert r["bet_settled_delivered"] == r["accepted"] == r["codes"].get("accepted")


def test_no_client_ever_sees_a_gap(quick_run: dict[str, object]) -> None:
    fanout = quick_run["fanout"]
    assert isinstance(fanout, list) and fanout
    for point in fanout:
        assert "error" not in point, point.get("error")
        assert point["connected"] == point["n"]
        assert point["delivered"] == point["expected"]
        assert point["gaps"] == 0 and point["dups"] == 0
    storm = quick_run["storm"]
    assert isinstance(storm, list) and storm
    for r in storm:
        assert "error" not in r, r.get("traceback")
        assert r["reconnected"] == r["n"]
        assert r["gaps"] == 0 and r["dups"] == 0
        assert r["all_at_head"]
