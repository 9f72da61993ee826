"""``livetable verify-shoe``: anyone's check that an ended shoe was dealt as committed; and
``livetable restores``: the shoes an engine retired because its store was restored.

Why a command of its own: provable fairness is worth something only if a player can check
it without trusting the server's word, so the check runs here, on the player's machine,
against the record the server published (``GET /api/shoes/SHOE_ID``, or a saved file). The
check itself is :func:`livetable.rules.fairness.check_shoe` (pure); this module fetches,
decodes and says what it found. Its exit codes are its answer: 0 fair, 1 not (every problem
on stderr), 2 could not fetch or was asked wrongly.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from livetable.cli.arguments import (
    Commands,
    UsageError,
    add_store_flags,
    print_json,
    settings_of,
)

EXIT_UNFAIR = 1


def _fetch_shoe(url: str, shoe_id: str) -> bytes:
    import urllib.error
    import urllib.parse
    import urllib.request

    address = f"{url.rstrip('/')}/api/shoes/{urllib.parse.quote(shoe_id, safe='')}"
    try:
        with urllib.request.urlopen(address, timeout=10) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise UsageError(f"{address}: no record of shoe {shoe_id!r} (404): a shoe is "
                             "revealed when it ends, and a manual shoe never is") from None
        raise UsageError(f"{address}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"{address}: {reason}") from None


def cmd_verify_shoe(args: argparse.Namespace) -> int:
    """Check a revealed shoe (docs/design.md §7): exit 0 if fair, 1 with every problem if not."""
    import msgspec

    from livetable.rules.fairness import ShoeRecord, check_shoe

    if (args.url is None) == (args.file is None):
        raise UsageError("give --url (the server) or --file (a saved record), not both")
    if args.file is not None:
        try:
            body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
        except OSError as exc:
            raise UsageError(f"{args.file}: {exc.strerror}") from None
    else:
        body = _fetch_shoe(args.url, args.shoe_id)
    try:
        shoe = msgspec.json.decode(body, type=ShoeRecord)
    except msgspec.DecodeError as exc:  # ValidationError included
        print(f"shoe {args.shoe_id}: NOT VERIFIED: the record does not parse: {exc}",
              file=sys.stderr)
        return EXIT_UNFAIR
    problems = check_shoe(shoe, seen_commitment=args.commitment, seen_heads=args.head)
    if shoe.shoe_id != args.shoe_id:
        problems.insert(0, f"asked for shoe {args.shoe_id}, the record is of {shoe.shoe_id}")
    if args.json:
        print_json({"shoe_id": args.shoe_id, "ok": not problems, "problems": problems})
    elif problems:
        print(f"shoe {args.shoe_id}: NOT VERIFIED", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
    else:
        settled = sum(r.state == "settled" for r in shoe.rounds)
        print(f"shoe {shoe.shoe_id}: verified. The commitment {shoe.commitment} is the SHA-256 "
              f"of its salt, cut card ({shoe.cut_at}) and order: {len(shoe.order)} cards, "
              f"8 full decks; the opening {shoe.order[0]} and its burns follow the rules; "
              f"{len(shoe.rounds)} round{'' if len(shoe.rounds) == 1 else 's'} ({settled} "
              f"settled, {len(shoe.rounds) - settled} cancelled) dealt from the order in the "
              f"dealing order; its game log (ended by {shoe.ended_by}, "
              f"{shoe.round_count} round{'' if shoe.round_count == 1 else 's'}) leads from "
              f"the commitment to {shoe.chain_head}.")
        if args.commitment is None:
            print("  (to prove the order was fixed before the bets, also pass --commitment: "
                  "the one shoe_started announced)")
    return EXIT_UNFAIR if problems else 0


def add_verify_shoe(commands: Commands) -> None:
    p = commands.add_parser(
        "verify-shoe", help="check that an ended shoe was dealt as committed (provably fair)",
        description="Fetch GET /api/shoes/SHOE_ID and check it: the SHA-256 commitment, a "
                    "full 8-deck shoe, the opening card and its burns, and every round's "
                    "cards as the next slots of the order in the dealing order, and its game "
                    "log (why it ended, how many rounds, every round chained from the "
                    "commitment). Exit 0: "
                    "fair; 1: not (every problem on stderr); 2: could not fetch.")
    p.add_argument("shoe_id", help="e.g. t1.3")
    p.add_argument("--url", help="the server, e.g. http://localhost:8000")
    p.add_argument("--file", type=Path, help="a saved record instead of --url ('-': stdin)")
    p.add_argument("--commitment",
                   help="the commitment shoe_started announced (proves it was fixed before "
                        "the bets)")
    p.add_argument("--head", action="append", default=[],
                   help="a game log head the table published live (round_settled, "
                        "round_cancelled, shoe_revealed: chain_head); the record must hold "
                        "it (repeatable)")
    p.add_argument("--json", action="store_true", help="print {shoe_id, ok, problems}")
    p.set_defaults(handler=cmd_verify_shoe)


def cmd_restores(args: argparse.Namespace) -> int:
    """The restores the engine detected and retired a shoe for (shown on /readyz until
    acknowledged); with --acknowledge, acknowledge them all (docs/operations.md §5)."""
    from livetable.host.restores import acknowledge, reports_dir, unacknowledged

    reports = reports_dir(settings_of(args).db_path)
    pending = unacknowledged(reports)
    for table, what in sorted(pending.items()):
        print(f"{table}: {what}")
    if not pending:
        print(f"no restore waits to be acknowledged ({reports})")
    if args.acknowledge:
        moved = acknowledge(reports)
        print(f"acknowledged {len(moved)} report{'' if len(moved) == 1 else 's'} (kept in "
              f"{reports / 'acknowledged'})")
    return 0


def add_restores(commands: Commands) -> None:
    p = commands.add_parser(
        "restores", help="the restores detected (a shoe retired), and their acknowledgement",
        description="A store older than what the tables announced (a restored backup) makes "
                    "the engine retire the shoe in play and report it on /readyz "
                    "(checks.restored) until acknowledged here. Run it where the engine "
                    "runs, with its --db / --data-dir.")
    p.add_argument("--acknowledge", action="store_true",
                   help="acknowledge every report: /readyz stops showing them")
    add_store_flags(p)
    p.set_defaults(handler=cmd_restores)
