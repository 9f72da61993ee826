"""Run the table simulation alone: ``PYTHONPATH=tests .venv/bin/python -m sim --help``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from livetable.store import SQLiteStore
from sim.harness import SimConfig, Simulation, SimulationFailure


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--audit-every", type=int, default=500,
                        help="rounds between full audits (1: after every round)")
    parser.add_argument("--db", default=":memory:", help="an SQLite file instead of memory")
    args = parser.parse_args()
    config = SimConfig(seed=args.seed, rounds=args.rounds, players=args.players,
                       audit_every=args.audit_every)
    try:
        stats = asyncio.run(Simulation(SQLiteStore(args.db), config).run())
    except SimulationFailure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    print(stats.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
