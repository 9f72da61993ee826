"""The SQLite ledger's own work for one big round, in this process: slips taken in batches,
then the round settled chunk by chunk exactly as the writer runs it (the ledger's calls
``TakeSlips``, ``CommitStep`` with the SettleRound effect, ``SettlePending``; see
store/sqlite/ledger/calls.py), with no server, socket or event loop around it. Prints JSON per
round.

    .venv/bin/python bench/settle_chunks.py [--players 5000] [--per 20] [--rounds 1]
        [--batch 2000] [--shuffle | --clustered] [--sql "DROP INDEX …; CREATE INDEX …"]
        [--root OTHER_CHECKOUT]

``settle_cpu_ms`` is what the writer (process or thread) spends settling the round — each
chunk's answer frame to the server included (``store.sqlite.writer._frame``);
``server_decode_ms`` what the server spends reading those answers (``store.sqlite.writer._answer``)
and framing each ``bet_settled``. ``--sql`` runs after the schema
is created (try an index), ``--root`` imports livetable from another checkout: run two
alternately to compare code on this noisy machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, settle_effect, wide_limits  # it imports no livetable module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--players", type=int, default=5_000)
    ap.add_argument("--per", type=int, default=20, help="bets (slips of one) per player")
    ap.add_argument("--rounds", type=int, default=1, help="rounds, one after another")
    ap.add_argument("--chunk", type=int, default=2_000, help="bets per settlement chunk")
    ap.add_argument("--batch", type=int, default=2_000, help="slips per intake transaction")
    order = ap.add_mutually_exclusive_group()
    order.add_argument("--shuffle", action="store_true", help="slips in random order")
    order.add_argument("--clustered", action="store_true",
                       help="each player's slips one after another")
    ap.add_argument("--sql", default="", help="SQL run once the schema exists")
    ap.add_argument("--root", type=Path, default=ROOT, help="the livetable checkout to use")
    args = ap.parse_args()
    sys.path.insert(0, str(args.root))  # livetable from there: run() imports it
    print(json.dumps(run(args), indent=2))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from livetable import protocol as p
    from livetable.betting.slips import SlipRequest
    from livetable.engine.effects import OpenRound, SetBetting
    from livetable.rules import BET_SPOTS
    from livetable.store.sqlite.ledger import calls
    from livetable.store.sqlite.ledger.core import Ledger
    from livetable.store.sqlite.writer import _HEAD, _OK, _answer, _frame

    rng = random.Random(1)
    store = Ledger(str(Path(tempfile.mkdtemp()) / "bench.sqlite3"))
    if args.sql:
        store.db.executescript(args.sql)
    now = 1_000
    for i in range(args.players):
        calls.run(store, calls.EnsurePlayer(f"p{i}", f"P{i}", 10**12, now))
    limits = wide_limits()
    spot_names = [s.value for s in BET_SPOTS]
    out: dict[str, Any] = {"players": args.players, "per_player": args.per, "rounds": []}
    for r in range(args.rounds):
        rid = f"r{r}"
        calls.run(store, calls.CommitStep("t1", b"{}", [], [OpenRound(
            table="t1", round_id=rid, shoe_id="s1", round_no=r + 1, closes_at=10**15,
            limits=limits)], now, args.chunk))
        order = ([(i, j) for i in range(args.players) for j in range(args.per)]
                 if args.clustered else
                 [(i, j) for j in range(args.per) for i in range(args.players)])
        slips = [(SlipRequest(
            player_id=f"p{i}", table="t1", slip_id=f"s{r}.{j}.{i}", round_id=rid,
            bets=(p.SlipBet(bet_id=f"b{r}.{j}.{i}", spot=rng.choice(spot_names),
                            amount=rng.randint(1, 500)),)), now) for i, j in order]
        if args.shuffle:
            rng.shuffle(slips)
        t, c = time.perf_counter(), time.process_time()
        for k in range(0, len(slips), args.batch):
            calls.run(store, calls.TakeSlips(slips[k:k + args.batch]))
        intake_s, intake_cpu = time.perf_counter() - t, time.process_time() - c
        calls.run(store, calls.CommitStep("t1", b"{}", [], [SetBetting(
            table="t1", round_id=rid, status="closed", closes_at=None)], now, args.chunk))
        pages = store.db.execute("PRAGMA page_count").fetchone()[0]
        chunk_ms: list[float] = []
        answers: list[tuple[type[calls.Call[Any]], bytearray]] = []  # each answer frame
        settled = 0
        more = True
        c = time.process_time()
        while more:  # the settling step (its first chunk), then the chunks after it
            t = time.perf_counter()
            if not answers:
                kind: type[calls.Call[Any]] = calls.CommitStep
                value: Any = calls.run(store, calls.CommitStep("t1", b"{}", [], [settle_effect(
                    "t1", rid)], now, args.chunk))
                chunk = value
            else:
                kind = calls.SettlePending
                value = chunk, more = calls.run(store, calls.SettlePending("t1", now, args.chunk))
            answers.append((kind, _frame(_OK, value)))
            chunk_ms.append((time.perf_counter() - t) * 1000)
            settled += len(chunk)
        settle_cpu = time.process_time() - c
        assert settled == args.players * args.per, settled
        c = time.process_time()
        for kind, frame in answers:  # as the server reads them and frames each result
            value = _answer(kind).decode(memoryview(frame)[_HEAD + len(_OK):])
            frames = [(s.player_id, p.encode(s.message))
                      for s in (value if kind is calls.CommitStep else value[0])]
            del frames
        decode_cpu = time.process_time() - c
        out["rounds"].append({
            "slips": len(slips), "intake_s": round(intake_s, 3),
            "intake_cpu_us_per_slip": round(intake_cpu / len(slips) * 1e6, 1),
            "settle_cpu_ms": round(settle_cpu * 1000), "settle_ms": round(sum(chunk_ms)),
            "chunks": len(chunk_ms), "first_chunk_ms": round(chunk_ms[0], 1),
            "median_chunk_ms": round(statistics.median(chunk_ms), 2),
            "longest_chunk_ms": round(max(chunk_ms), 1),
            "pages": [pages, store.db.execute("PRAGMA page_count").fetchone()[0]],
            "server_decode_ms": round(decode_cpu * 1000)})
    audit = calls.run(store, calls.Audit())
    assert audit.ok, audit.problems
    return out


if __name__ == "__main__":
    main()
