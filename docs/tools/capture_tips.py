"""Capture the frames of tips to the dealer and merge them into docs/tools/frames.json.

    .venv/bin/python docs/tools/capture_tips.py --out docs/tools/frames.json   # ~5 s

The tips came after the first capture: their scenario sits beside it under a key with its
date (``tips_2026_12_05``), as capture_frames.py's docstring says, so that their examples
in docs/protocol.md are pasted from a running server without re-pasting the others. It
runs a manual server (``--mode manual``, players minted with a balance of 5000), a dealer
console that signs in, a player who tips (taken, sent again, refused for each reason it can
be at a server without an operator), a viewer who tries, and the player's Bet Record on
the websocket and over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capture_frames import CAPTURE, Server, hello, http, is_type, log, scenario  # noqa: E402

KEY = "tips_2026_12_05"


def tip(tip_id: str, amount: Any) -> dict[str, Any]:
    return {"type": "tip", "tip_id": tip_id, "amount": amount}


async def run(server: Server) -> None:
    t = scenario(KEY, "manual", "a player tips the dealer: taken, sent again, refused; the "
                 "dealer console told; the Bet Record's tips")
    dealer, _ = await hello(server, t, server.token("--dealer", "--tables", "t1", "--player",
                                                    "dee", "--name", "Dee"), path="/ws/dealer")
    token = server.token("--player", "tipper", "--name", "Tipper")
    player, _ = await hello(server, t, token)
    viewer, _ = await hello(server, t)
    await player.send(tip("tip-1", 100))
    await player.expect(is_type("tip_accepted"))
    await dealer.expect(is_type("tip_received"))
    await player.send(tip("tip-1", 100))  # the answer lost: sent again
    await player.expect(is_type("tip_accepted"))
    for tip_id, amount in (("tip-1", 200), ("tip-2", 5), ("", 100), ("tip-3", 5000)):
        await player.send(tip(tip_id, amount))
        await player.expect(is_type("error"))
    await viewer.send(tip("tip-4", 100))
    await viewer.expect(is_type("error"))
    await player.send({"type": "get_bets", "limit": 5})
    await player.expect(is_type("bets"))
    await http(t, server, "GET", "/api/bets?limit=5", token)
    for conn in (dealer, player, viewer):
        await conn.close()


async def capture(out: Path) -> None:
    server = Server("manual", "--mode", "manual", env={"LIVETABLE_PLAYER_BALANCE": "5000"})
    try:
        server.start()
        await run(server)
    finally:
        server.stop()
    kept = json.loads(out.read_text())
    kept.update(CAPTURE)
    out.write_text(json.dumps(kept, indent=2, ensure_ascii=False) + "\n")
    log(f"merged {sorted(CAPTURE)} into {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the capture to merge into")
    asyncio.run(capture(parser.parse_args().out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
