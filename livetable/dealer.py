"""``livetable dealer``: the dealer console in a terminal.

Reads one line at a time from stdin, so a card scanner can be piped into it: a card code
(``KH``, ``10D``, ``T♠``) is fed to the table as the next card out of the shoe; a word is a
command::

    shoe                 start a new shoe (then scan its opening card)
    open [SECONDS]       open betting; then scan the round's cards while it runs
    close                close betting
    reveal               reveal the next hand (after the close, all thirteen cards out)
    pause [REASON]       pause the round      resume     resume it
    cancel [REASON]      cancel the round (every bet refunded)
    cut                  the cut card came out
    cards                the cards entered so far this round (after a restart of this console)
    void N [APPROVAL]    void the last N cards (a mis-scan), before any reveal; APPROVAL is
                         a supervisor token (none needed when signed in as a supervisor)
    auto | manual        switch the table's mode (between rounds)
    ping                 ask the server for a pong
    dealer NAME          NAME deals now: the table shows them (and their photo)
    say TEXT             a chat line to the table, as the dealer
    mute PLAYER MINUTES  mute a player's chat (0 lifts it)    delete ID  delete a chat line

Every answer (``ack`` or ``error``) and every table event is printed, one line each.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from livetable import protocol as p
from livetable.rules.cards import CardError, parse_card


def command_of(line: str) -> p.DealerCommand | None:
    """The dealer command a console line stands for (None for a blank line)."""
    words = line.strip().split(maxsplit=1)
    if not words:
        return None
    word, rest = words[0].lower(), (words[1] if len(words) > 1 else "")
    match word:
        case "shoe" | "start_shoe":
            return p.StartShoe()
        case "open" | "open_betting":
            return p.OpenBetting(betting_ms=int(float(rest) * 1000) if rest else None)
        case "close" | "close_betting":
            return p.CloseBetting()
        case "reveal":
            return p.Reveal()
        case "pause":
            return p.Pause(reason=rest)
        case "resume":
            return p.ResumeTable()
        case "cancel" | "cancel_round":
            return p.CallOffRound(reason=rest)
        case "cut":
            return p.CardIn(card="CUT")
        case "cards" | "round_cards":
            return p.RoundCards()
        case "void" | "correct" | "correct_cards":
            count, _, approval = rest.partition(" ")
            if not count.isdigit():
                raise ValueError("void N [SUPERVISOR-TOKEN]: N is how many of the last cards")
            return p.CorrectCards(count=int(count), approval=approval.strip() or None)
        case "auto" | "manual":
            return p.SetMode(auto=word == "auto")
        case "ping":
            return p.Ping()
        case "say" | "chat" | "chat_send":
            return p.ChatSend(client_msg_id=f"console-{time.monotonic_ns()}", text=rest)
        case "mute" | "chat_mute":
            player, _, minutes = rest.partition(" ")
            if not player or not minutes.strip().isdigit():
                raise ValueError("mute PLAYER-ID MINUTES (0 lifts a mute)")
            return p.ChatMute(player_id=player, minutes=int(minutes))
        case "delete" | "chat_delete":
            if not rest.strip():
                raise ValueError("delete MESSAGE-ID")
            return p.ChatDelete(id=rest.strip())
        case "dealer" | "dealer_sign_in":
            if not rest.strip():
                raise ValueError("dealer NAME: who deals now")
            return p.DealerSignIn(name=rest.strip())
    try:
        return p.CardIn(card=str(parse_card(line.strip())))
    except CardError as exc:
        raise ValueError(f"{exc}; or one of: shoe open close reveal pause resume cancel cut "
                         f"cards void auto manual say mute delete dealer") from None


def _describe(frame: dict[str, Any]) -> str:
    kind = frame.get("type")
    if kind == "ack":
        detail = frame.get("detail") or {}
        return f"ok {frame['cmd']}" + (f" {json.dumps(detail)}" if detail else "")
    if kind == "error":
        return f"ERROR {frame['code']}: {frame['message']}"
    if kind == "welcome":
        t = frame["table"]
        return (f"connected to {t['id']} ({t['mode']}): phase {t['phase']}, "
                f"cards left {t['cards_left']}, cut card out {t['cut_card_out']}")
    fields = {k: v for k, v in frame.items() if k not in ("type", "table", "epoch")}
    return f"{kind} {json.dumps(fields, ensure_ascii=False)}"


async def run(url: str, token: str, table: str) -> int:
    from websockets.asyncio.client import connect

    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1, "table": table, "token": token}))

        async def show() -> None:
            async for message in ws:
                print(_describe(json.loads(message)), flush=True)

        printer = asyncio.create_task(show())
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            try:
                frame = command_of(line)
            except ValueError as exc:
                print(f"ERROR {exc}", flush=True)
                continue
            if frame is not None:
                await ws.send(p.encode(frame).decode())
        await asyncio.sleep(0.5)  # let the last answers arrive
        printer.cancel()
    return 0
