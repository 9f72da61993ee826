"""bench/gateway_cpu.py still runs: every bet of a small burst answered on both sides (a
bet left unanswered ends the script with the count). Its figures are a benchmark's, not
checked here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Starts processes: not in bin/test --fast (tests/tiers.py).
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_the_gateway_cpu_bench_runs_small() -> None:
    done = subprocess.run([sys.executable, "bench/gateway_cpu.py", "--players", "40",
                           "--bets", "400", "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert set(result["loop_cpu_us_per_bet"]) == {"sink", "queue"}
    assert all(len(v) == 1 and v[0] > 0 for v in result["loop_cpu_us_per_bet"].values())
