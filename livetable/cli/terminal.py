"""``livetable dealer``: the dealer console in a terminal.

Reads one line at a time from stdin, so a card scanner can be piped into it: a card code
(``KH``, ``10D``, ``T♠``) is fed to the table as the next card out of the shoe; a word is a
command (``help`` lists them: :data:`HELP`).

What comes back is printed one readable line each — the answers (``ok …``, ``ERROR …``) and
the table's events in words ("round 3: betting open for 15 s", "P2: 7♠ 8♥ — 5 Points") —
and nothing that says nothing: the server's heartbeats (every 1.5 s on a quiet table) and
players-online counts are not printed.

The token is a dealer's credential: never on the command line, where every user of the
machine sees it in ``ps``. It comes from ``LIVETABLE_DEALER_TOKEN`` or, when that is not
set, from a prompt that does not echo it (:func:`token_from`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from livetable import protocol as p
from livetable.rules.cards import CardError, parse_card

HELP = """\
  KH, 10D, T♠ …        the next card out of the shoe (a scanner may type these)
  shoe                 start a new shoe (then scan its opening card)
  open [SECONDS]       open betting; then scan the round's cards while it runs
  close                close betting
  reveal               reveal the next hand (after the close, all thirteen cards out)
  pause [REASON]       pause the round      resume     resume it
  cancel [REASON]      cancel the round (every bet refunded)
  cut                  the cut card came out
  cards                the cards entered so far this round (after a restart of this console)
  void N [APPROVAL]    void the last N cards (a mis-scan), before any reveal; APPROVAL is
                       the one-time code a supervisor's console issued for it (none
                       needed when signed in as a supervisor)
  approve N            (a supervisor) issue that code for voiding the last N cards of
                       the round in play: used once, within 2 minutes
  auto | manual        switch the table's mode (between rounds)
  ping                 ask the server for a pong
  dealer NAME          NAME deals now: the table shows them (and their photo)
  say TEXT             a chat line to the table, as the dealer
  mute PLAYER MINUTES  mute a player's chat (0 lifts it)
  delete ID            delete a chat line
  help                 this list"""

#: The variable the console's token is read from (else it is asked for, without echo).
TOKEN_VARIABLE = "LIVETABLE_DEALER_TOKEN"
#: Frames that keep the line alive or count viewers: nothing for the dealer to read.
QUIET = frozenset({"heartbeat", "presence"})


class Help(Exception):
    """The line asked for the list of commands (printed by the console, not sent)."""


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
                raise ValueError("void N [APPROVAL]: N is how many of the last cards")
            return p.CorrectCards(count=int(count), approval=approval.strip() or None)
        case "approve" | "approve_correction":
            if not rest.strip().isdigit():
                raise ValueError("approve N: N is how many of the last cards to void")
            return p.ApproveCorrection(count=int(rest))
        case "auto" | "manual":
            return p.SetMode(auto=word == "auto")
        case "ping":
            return p.Ping()
        case "help" | "?" | "commands":
            raise Help
    chat = _chat_command(word, rest)
    if chat is not None:
        return chat
    try:
        return p.CardIn(card=str(parse_card(line.strip())))
    except CardError as exc:
        raise ValueError(f"{exc}; or a command (help lists them)") from None


def _chat_command(word: str, rest: str) -> p.DealerCommand | None:
    """The chat's and the presenter's words (None for any other word)."""
    match word:
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
    return None


def _results(results: list[dict[str, Any]]) -> str:
    parts = []
    for r in results:
        odds = f" {r['odds']}:1" if r.get("odds", 1) > 1 and r["outcome"] != "tie" else ""
        tags = "".join(f" {tag}" for tag in ("pair", "flush") if r.get(tag))
        parts.append(f"{r['hand']} {r['outcome']}{odds}{tags}")
    return ", ".join(parts)


def _words(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def describe(frame: dict[str, Any]) -> str | None:
    """One readable line for a frame from the server; None for one not worth a line."""
    kind = frame.get("type")
    f = frame
    match kind:
        case _ if kind in QUIET:
            return None
        case "ack":
            detail = f.get("detail") or {}
            return f"ok {f['cmd']}" + (f": {_words(detail)}" if detail else "")
        case "error":
            return f"ERROR {f['code']}: {f['message']}"
        case "pong":
            return "pong"
        case "welcome":
            t = f["table"]
            return (f"connected to {t['id']} ({t['mode']}): phase {t['phase']}, "
                    f"cards left {t['cards_left']}, "
                    f"cut card {'out' if t['cut_card_out'] else 'not out yet'}")
        case "shoe_shuffling":
            return f"new shoe {f['shoe_id']}: scan its opening card"
        case "shoe_started":
            return (f"shoe {f['shoe_id']} started: burn card {f['burn_card']}, "
                    f"{f['burned']} burned, {f.get('cards_left')} cards left")
        case "round_opened":
            return f"round {f['round_no']} ({f['round_id']}): betting open"
        case "betting_closed":
            return "betting closed"
        case "card_dealt":
            return f"card {f['n']} to {f['to']} ({f.get('cards_left')} left in the shoe)"
        case "cards_voided":
            return f"{f['count']} card(s) voided ({f['dealer']}, approved by {f['supervisor']})"
        case "hand_revealed":
            tags = "".join(f" {tag}" for tag in ("pair", "flush") if f.get(tag))
            return f"{f['hand']}: {' '.join(f['cards'])} — {f['label']}{tags}"
        case "round_settled":
            last = " (the shoe's last round)" if f.get("last_round") else ""
            return f"settled{last}: {_results(f['results'])}"
        case "round_cancelled":
            return f"round cancelled: {f['reason'] or 'no reason given'}"
        case "table_paused":
            return f"paused: {f['reason'] or 'no reason given'}"
        case "table_resumed":
            return "resumed"
        case "cut_card_out":
            return "cut card out: " + ("this round is the shoe's last" if f["last_round"]
                                        else "the next round is the shoe's last")
        case "mode_changed":
            return f"mode: {f['mode']}"
        case "shoe_revealed":
            return f"shoe {f['shoe_id']} revealed (salt and order published: verifiable)"
        case "tip_received":
            return f"tip from {f['from']}: {f['amount']}" + (
                f" {f['currency']} (minor units)" if f.get("currency") else "")
    fields = {k: v for k, v in f.items() if k not in ("type", "table", "epoch", "seq")}
    return f"{kind}: " + "; ".join(f"{k} {_words(v)}" for k, v in fields.items())


def token_from(environ: dict[str, str], ask: Any) -> str:
    """The console's token: the variable's, else typed at a prompt that does not echo."""
    given = environ.get(TOKEN_VARIABLE, "").strip()
    if given:
        return given
    typed = str(ask("dealer token (input hidden): ")).strip()
    if not typed:
        raise ValueError(f"no token: set {TOKEN_VARIABLE} or type it at the prompt")
    return typed


async def run(url: str, token: str, table: str) -> int:
    from websockets.asyncio.client import connect

    async with connect(url) as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1, "table": table, "token": token}))

        async def show() -> None:
            async for message in ws:
                line = describe(json.loads(message))
                if line is not None:
                    print(line, flush=True)

        printer = asyncio.create_task(show())
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            try:
                frame = command_of(line)
            except Help:
                print(HELP, flush=True)
                continue
            except ValueError as exc:
                print(f"ERROR {exc}", flush=True)
                continue
            if frame is not None:
                await ws.send(p.encode(frame).decode())
        await asyncio.sleep(0.5)  # let the last answers arrive
        printer.cancel()
    return 0
