#!/usr/bin/env python3
"""livetable's benchmark harness (docs/decisions.md#the-benchmark-harness). See docs/benchmarks.md
for what each figure means.

    .venv/bin/python bench/run.py --quick          # about a minute: small N, everything
    .venv/bin/python bench/run.py                  # the full run (several minutes)
    .venv/bin/python bench/run.py --only fanout    # one part: fanout profile bets
                                                   #   settlement storm (comma-separated)
    .venv/bin/python bench/run.py --only bets --postgres --gateways 2
                                                   # PostgreSQL: the players over two
                                                   #   `livetable serve` processes
    .venv/bin/python bench/run.py --only wallet    # bet intake with a seamless wallet
                                                   #   (never part of a default run)
    .venv/bin/python bench/run.py --only wallet-close  # a 5,000-player round's close
                                                   #   through the seamless wallet (nor this)
    .venv/bin/python bench/run.py --report bench/results/<file>.json   # docs from a run

Results go to bench/results/<timestamp>.json (``--out DIR`` to change); a full run also
rewrites the generated part of docs/benchmarks.md and the plots in docs/bench/
(``--docs`` / ``--no-docs`` to force either way).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
if __name__ == "__main__" and VENV_PYTHON.exists() and Path(sys.prefix) != ROOT / ".venv":
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])  # the project's own venv
sys.path.insert(0, str(ROOT))

from bench import scenarios as sc  # noqa: E402
from bench.common import LOADGEN_CORE, machine, pin, raise_nofile, write_json  # noqa: E402
from bench.loadgen import LoadGen  # noqa: E402

PARTS = ("fanout", "profile", "bets", "settlement", "storm", "wallet", "wallet-close")
#: The parts asked for by name only (each runs its own servers; no room in a default run).
BY_NAME = ("wallet", "wallet-close")

QUICK: dict[str, Any] = {
    "workers": 2, "sizes": [200, 1000], "kinds": ["livetable", "ws", "sio"], "events": 4,
    "interval": 0.25, "pad": 0, "profile_n": 1000, "bet_players": 200, "bets_per_player": 10,
    "wallet_players": 40, "wallet_bets_per_player": 2, "wallet_latencies": [0, 20, 100],
    "close_players": 200, "close_latencies": [0, 20],
    "betting_seconds": 5.0, "settle_players": 300, "settle_bets_per_player": 20,
    "storm_sizes": [1000],
    "timeout": 60.0,
}
FULL: dict[str, Any] = {
    "workers": 3, "sizes": [1000, 5000, 10000, 19900],
    "kinds": ["livetable", "ws", "sio"], "events": 10, "interval": 1.0,
    "pad": 0, "profile_n": 10000, "bet_players": 2000, "bets_per_player": 10,
    # the seamless wallet's target load: 2,000 players × 10 bets in the last 2 s
    "wallet_players": 2000, "wallet_bets_per_player": 10, "wallet_latencies": [0, 20, 100],
    # a round's close through the seamless wallet: 5,000 players, one bet each
    "close_players": 5000, "close_latencies": [0, 20],
    "betting_seconds": 20.0, "settle_players": 5000, "settle_bets_per_player": 20,
    "storm_sizes": [1000, 5000], "timeout": 240.0,
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/run.py",
                                     description="livetable's benchmark harness")
    parser.add_argument("--quick", action="store_true", help="about a minute, small N")
    parser.add_argument("--only", default="", help=f"comma-separated parts of {PARTS}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results",
                        help="directory for the JSON results (default bench/results)")
    parser.add_argument("--workers", type=int, help="load generator processes")
    parser.add_argument("--wallet-players", type=int,
                        help="--only wallet: players (each sends --wallet-bets bets)")
    parser.add_argument("--wallet-bets", type=int, help="--only wallet: bets per player")
    parser.add_argument("--wallet-latencies",
                        help="--only wallet: the points, e.g. internal,0,20,100 (internal: "
                             "the internal wallet; a number: seamless at that many ms)")
    parser.add_argument("--close-players", type=int,
                        help="--only wallet-close: players (one bet each)")
    parser.add_argument("--close-latencies",
                        help="--only wallet-close: operator latencies in ms, e.g. 0,20")
    parser.add_argument("--wallet-store", choices=["sqlite", "postgres"], default="sqlite",
                        help="--only wallet: the store of the server")
    parser.add_argument("--spy", action="store_true",
                        help="--only wallet: sample the server with py-spy (--idle, so "
                             "waits show) over each burst, to <results>/<stamp>-spy-*.txt")
    parser.add_argument("--pin", action="store_true",
                        help="--only wallet: the server and its store on core 0, the load "
                             "generator and the reference operator on core 1 (taskset): the "
                             "server's CPU per bet is then its own")
    parser.add_argument("--wallet-profile", action="store_true",
                        help="--only wallet: cProfile the server's event loop over each "
                             "burst, to <results>/<stamp>-wallet-*.prof")
    parser.add_argument("--sizes", help="fan-out viewer counts, e.g. 1000,5000")
    parser.add_argument("--kinds", help="fan-out servers, of livetable,ws,sio "
                                         "(default: all; --quick: livetable,ws,sio)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run bets and settlement this many times for each store, the "
                             "stores in turn (each run is a row of the tables)")
    parser.add_argument("--sqlite-thread", action="store_true",
                        help="also run bets and settlement with the SQLite writer in a "
                             "thread of the server (LIVETABLE_SQLITE_WRITER=thread)")
    parser.add_argument("--postgres", action="store_true",
                        help="bets and settlement also with the PostgreSQL store (a primary "
                             "and a synchronous standby of the bench's own; Redis the bus)")
    parser.add_argument("--gateways", default="1",
                        help="bets and settlement on PostgreSQL: that many `livetable serve "
                             "--redis --postgres` processes, player i on the i mod N-th "
                             "(default 1; the SQLite runs stay on one). Several counts, "
                             "e.g. 1,2: each in turn, as the stores are (--repeat)")
    parser.add_argument("--gateway-role", choices=["serve", "gateway"], default="serve",
                        help="with --gateways: the processes after the first run `livetable "
                             "serve` (default: each also a standby engine) or `livetable "
                             "gateway` (no engine but the first)")
    docs = parser.add_mutually_exclusive_group()
    docs.add_argument("--docs", dest="docs", action="store_true", default=None,
                      help="rewrite docs/benchmarks.md's results and docs/bench/*.png")
    docs.add_argument("--no-docs", dest="docs", action="store_false")
    parser.add_argument("--report", type=Path, nargs="+",
                        help="only write the docs from these results (a part found in a "
                             "later file replaces the earlier one's)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report is not None:
        from bench.report import write_docs

        write_docs(merge(args.report), args.report[-1])
        return 0
    raise_nofile()
    cfg = dict(QUICK if args.quick else FULL)
    if args.workers:
        cfg["workers"] = args.workers
    if args.wallet_players:
        cfg["wallet_players"] = args.wallet_players
    if args.wallet_bets:
        cfg["wallet_bets_per_player"] = args.wallet_bets
    points: list[float | None] = [None, *cfg["wallet_latencies"]]
    if args.wallet_latencies:
        points = [None if x == "internal" else float(x)
                  for x in args.wallet_latencies.split(",") if x]
    cfg["wallet_points"] = points
    if args.close_players:
        cfg["close_players"] = args.close_players
    if args.close_latencies:
        cfg["close_latencies"] = [float(x) for x in args.close_latencies.split(",") if x]
    if args.sizes:
        cfg["sizes"] = [int(x) for x in args.sizes.split(",")]
    # the wallet part is asked for by name (--only wallet): it runs a second server per
    # latency and the quick suite's time budget has no room for it
    parts = [p.strip() for p in args.only.split(",") if p.strip()] or [
        p for p in PARTS if p not in BY_NAME]
    unknown = set(parts) - set(PARTS)
    if unknown:
        print(f"bench/run.py: unknown part(s) {sorted(unknown)}; choose from {PARTS}",
              file=sys.stderr)
        return 2
    if args.kinds:
        cfg["kinds"] = [k for k in args.kinds.split(",") if k]
    kinds = cfg["kinds"]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    command = "bench/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results: dict[str, Any] = {
        "command": command.strip(), "quick": args.quick, "config": cfg, "parts": parts,
        "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "git": git_state(), "stamp": stamp,
    }
    t_start = time.monotonic()
    out = args.out / f"{stamp}{'-quick' if args.quick else ''}.json"
    with tempfile.TemporaryDirectory(prefix="livetable-bench-") as tmp:
        work = Path(tmp)
        lg = LoadGen(cfg["workers"])
        if args.pin:
            pin(lg.pids, LOADGEN_CORE)
        try:
            run_parts(lg, work, cfg, parts, kinds, args, results)
        except Exception as exc:
            import traceback

            results["error"] = f"{type(exc).__name__}: {exc}"
            results["traceback"] = traceback.format_exc()
            print(results["traceback"], file=sys.stderr)
        finally:
            lg.close()
            results["duration_s"] = round(time.monotonic() - t_start, 1)
            results["checks"] = checks(results)
            write_json(out, results)
            if "error" in results or results["checks"]["failed"]:
                keep = args.out / f"{stamp}-logs"
                import shutil
                shutil.copytree(work, keep, ignore=shutil.ignore_patterns("*.sqlite3*",
                                                                          "*.prof"))
                print(f"bench: logs kept in {keep}", file=sys.stderr)
    print(f"bench: results in {out} ({results['duration_s']} s)")
    print(f"bench: checks {results['checks']}")
    if args.docs or (args.docs is None and not args.quick):
        from bench.report import write_docs

        write_docs(results, out)
    return 0 if results["checks"]["ok"] else 1


def git_state() -> dict[str, Any]:
    """The livetable code measured: the commit, and its files changed since."""
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "--short", "HEAD"),
            "subject": git("log", "-1", "--format=%s"),
            "dirty": git("status", "--porcelain", "--", "livetable").splitlines()}


def guarded(name: str, run: Callable[[], Any], **context: Any) -> Any:
    """Run one measurement; a failure is recorded in its place and the run goes on."""
    try:
        return run()
    except Exception as exc:
        import traceback

        sc._log(f"{name}: FAILED {type(exc).__name__}: {exc}")
        return {**context, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:]}


def run_parts(lg: LoadGen, work: Path, cfg: dict[str, Any], parts: list[str],
              kinds: list[str], args: argparse.Namespace, results: dict[str, Any]) -> None:
    if "fanout" in parts:
        results["fanout"] = sc.fanout(lg, work, cfg["sizes"], kinds, cfg["events"],
                                      cfg["interval"], cfg["pad"])
    if "profile" in parts:
        results["profile"] = guarded("profile", lambda: sc.profile_fanout(
            lg, work, cfg["profile_n"], cfg["events"], cfg["interval"], cfg["pad"]))
        _reset(lg)
        results["profile_bets"] = guarded("profile_bets", lambda: sc.profile_bets(
            lg, work, cfg["bet_players"], cfg["bets_per_player"], cfg["betting_seconds"]))
        _reset(lg)
    stores = ["sqlite", "sqlite-thread"] if args.sqlite_thread else ["sqlite"]
    if {"bets", "settlement"} & set(parts) and args.postgres:
        stores.append("postgres")
    # --repeat: the stores in turn, again and again, so that each store's runs are spread
    # over the same stretch of a shared machine's noise
    rounds = [(store, n) for _ in range(args.repeat) for store in stores
              for n in _gateways(store, args)]
    if "bets" in parts:
        results["bets"] = []
        for store, n in rounds:
            r = guarded("bets", lambda store=store, n=n: sc.bet_intake(  # type: ignore[misc]
                lg, work, cfg["bet_players"], cfg["bets_per_player"], cfg["betting_seconds"],
                store=store, gateways=n, role=args.gateway_role), store=store, gateways=n)
            results["bets"].append(r)
            if "error" not in r:
                sc._log(f"  bets {r['store']} ×{r['gateways']}: {r['codes']} ack {r['ack_ms']}"
                        f" server {r['server_cpu_us_per_bet']} µs/bet "
                        f"{r['server_cpu_per_process_s']} s, postgres {r['postgres_cpu_s']} s,"
                        f" loadgen {r['loadgen_cpu_s']} s")
            _reset(lg)
    if "wallet" in parts:  # bet intake with the reference operator's wallet in the loop
        results["wallet"] = []
        # the internal wallet first, at the same load: the CPU per bet a seamless bet is
        # compared with (None: no wallet)
        for i, latency in enumerate(cfg["wallet_points"]):
            spy = (args.out / f"{results['stamp']}-spy-{i}-{latency}.txt" if args.spy
                   else None)
            prof = (args.out / f"{results['stamp']}-wallet-{i}-{latency}.prof"
                    if args.wallet_profile else None)
            r = guarded("wallet", lambda ms=latency, spy=spy, prof=prof: sc.bet_intake(  # type: ignore[misc]
                lg, work, cfg["wallet_players"], cfg["wallet_bets_per_player"],
                cfg["betting_seconds"], store=args.wallet_store, wallet_latency_ms=ms,
                spy_to=spy, profile_to=prof, pinned=args.pin), latency_ms=latency)
            results["wallet"].append(r)
            if "error" not in r:
                sc._log(f"  wallet {latency} ms: {r['codes']} ack {r['ack_ms']} "
                        f"server {r['server_cpu_us_per_bet']} µs/bet, operator "
                        f"{r['operator_cpu_us_per_bet']} µs/bet, debits {r['wallet_debits']}")
            _reset(lg)
    if "wallet-close" in parts:
        from bench.wallet_close import wallet_close

        results["wallet_close"] = []
        for latency in cfg["close_latencies"]:
            r = guarded("wallet-close", lambda ms=latency: wallet_close(  # type: ignore[misc]
                lg, work, cfg["close_players"], ms), latency_ms=latency)
            results["wallet_close"].append(r)
            if "error" not in r:
                sc._log(f"  wallet close {latency} ms: {r['codes']}, credits ok "
                        f"{r['credits_ok']}/{r['credits']}, all closed {r['all_closed']}, "
                        f"settled → last credit ok {r['settled_to_last_credit_ok_ms']} ms")
            _reset(lg)
    if "settlement" in parts:
        results["settlement"] = []
        for store, n in rounds:
            r = guarded("settlement", lambda store=store, n=n: sc.settlement(  # type: ignore[misc]
                lg, work, cfg["settle_players"], cfg["settle_bets_per_player"], store=store,
                timeout=cfg["timeout"], gateways=n, role=args.gateway_role), store=store,
                gateways=n)
            results["settlement"].append(r)
            if "error" not in r:
                sc._log(f"  settlement {r['store']} ×{r['gateways']}: "
                        f"{r['bet_settled_delivered']}/{r['accepted']} delivered, "
                        f"round_settled → last bet_settled "
                        f"{r['round_settled_to_last_bet_settled_ms']} ms, last reveal → "
                        f"last bet_settled {r['reveal_to_last_bet_settled_ms']} ms")
            _reset(lg)
    if "storm" in parts:
        results["storm"] = []
        for n in cfg["storm_sizes"]:
            r = guarded("storm", lambda n=n: sc.reconnect_storm(lg, work, n),  # type: ignore[misc]
                        n=n)
            results["storm"].append(r)
            if "error" not in r:
                sc._log(f"  storm {n}: all in step after {r['all_in_step_ms']} ms, "
                        f"gaps {r['gaps']}, resumed {r['resumed_true']}/{n}")
            _reset(lg)


def _gateways(store: str, args: argparse.Namespace) -> list[int]:
    """How many server processes a store's runs spread their players over, each count a
    run: ``--gateways`` for a scale-out store, one for the embedded SQLite."""
    if store not in sc.SCALE_OUT:
        return [1]
    return [int(x) for x in args.gateways.split(",") if x.strip()] or [1]


def _reset(lg: LoadGen) -> None:
    """After a failed measurement the workers may still hold connections: drop them."""
    with contextlib.suppress(Exception):
        lg.call("close", call_timeout=60)


RESULT_PARTS = ("fanout", "profile", "profile_bets", "redis_mode", "bets", "settlement",
                "storm", "wallet", "wallet_close")


def merge(files: list[Path]) -> dict[str, Any]:
    """Several runs' results as one: each part from the last file that has it, with the
    command, file and date it came from (``provenance``)."""
    import json

    merged: dict[str, Any] = {}
    provenance: dict[str, Any] = {}
    for path in files:
        results = json.loads(path.read_text())
        source = {"command": results["command"], "file": str(path),
                  "date": results["machine"]["date"], "duration_s": results.get("duration_s"),
                  "git": results.get("git", {}), "loadavg": results["machine"].get(
                      "loadavg_at_start")}
        if not merged:
            merged = {k: v for k, v in results.items() if k not in RESULT_PARTS}
        for part in RESULT_PARTS:
            if part in results:
                merged[part] = results[part]
                provenance[part] = source
    merged["provenance"] = provenance
    merged["checks"] = checks(merged)
    return merged


def checks(results: dict[str, Any]) -> dict[str, Any]:
    """The accounting that must hold whatever the timings: every bet answered, every
    bet_settled delivered, no gap in any client's seq."""
    out: dict[str, Any] = {}
    bets = results.get("bets") or []
    out["bets_accounted"] = all(r.get("accounted") for r in bets) if bets else None
    settle = results.get("settlement") or []
    out["settlement_delivered"] = (all(r.get("all_delivered") for r in settle) if settle
                                   else None)
    storm = results.get("storm") or []
    out["storm_gaps"] = sum(r.get("gaps", 0) for r in storm) if storm else None
    out["storm_all_at_head"] = all(r.get("all_at_head") for r in storm) if storm else None
    out["failed"] = [f"{part} {r.get('store', r.get('n', ''))}".strip()
                     for part in ("bets", "settlement", "storm")
                     for r in results.get(part) or [] if "error" in r]
    for part in ("profile", "profile_bets"):
        if isinstance(results.get(part), dict) and "error" in results[part]:
            out["failed"].append(part)
    fan = [p for p in results.get("fanout") or [] if "error" not in p]
    out["fanout_gaps"] = sum(p["gaps"] for p in fan) if fan else None
    out["fanout_errors"] = sum(1 for p in results.get("fanout") or [] if "error" in p)
    out["ok"] = ("error" not in results and not out["failed"]
                 and out["bets_accounted"] is not False
                 and out["settlement_delivered"] is not False
                 and not out["storm_gaps"] and out["storm_all_at_head"] is not False
                 and not out["fanout_gaps"] and not out["fanout_errors"])
    return out


if __name__ == "__main__":
    sys.exit(main())
