"""Commands other than bets: ping, balance, the Bet Record, the dealer's commands, the
chat's (to :class:`~.chat.Chat`) and tips to the dealer (to :class:`~.tips.Tips`).

A dealer's command goes to the table's runner (:data:`Execute`: in process, or through Redis
to the engine that holds the table) and its answer back to the console; a card correction
needs a supervisor's approval first, a one-time code that a supervisor's console gets with
``approve_correction``. Bets go to the :class:`~.intake.Intake`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import assert_never

from livetable import protocol as p
from livetable.auth import TokenError, sign_approval, verify_approval
from livetable.clock import now_ms
from livetable.server.gateway.chat import Chat
from livetable.server.gateway.client import Client
from livetable.server.gateway.feed import TableFeed
from livetable.server.gateway.intake import Intake
from livetable.server.gateway.players import Players
from livetable.server.gateway.sessions import Sessions
from livetable.server.gateway.tips import Tips
from livetable.server.ratelimit import RateLimits
from livetable.server.records import page_tips
from livetable.store.base import Store

#: How a gateway hands a dealer's command to the table's runner, and gets its answer.
Execute = Callable[[str, p.TableCommand], Awaitable[p.Ack | p.Error]]


class Commands:
    """Every command a connection sends after its hello, to its answer."""

    def __init__(self, store: Store, limits: RateLimits, execute: Execute, secret: bytes,
                 intake: Intake, players: Players, feeds: dict[str, TableFeed],
                 sessions: Sessions, chat: Chat, tips: Tips) -> None:
        self.store = store
        #: The tables' feeds: the round in play an approval is issued for.
        self.feeds = feeds
        self.limits = limits
        self.execute = execute
        self.secret = secret
        self.intake = intake
        self.players = players
        self.sessions = sessions
        self.chat = chat
        self.tips = tips

    async def handle(self, client: Client, command: p.PlayerCommand | p.DealerCommand,
                     arrived_at: int) -> None:
        """Answer ``command``: every command of either endpoint has its case (mypy holds the
        match to both unions, tests/unit/test_player_commands.py to protocol.md)."""
        match command:
            case p.Ping(t=t):
                client.send_message(p.Pong(t=t, server_time=now_ms()))
            case p.Hello():
                client.send_message(p.Error(code="already_hello",
                                            message="hello was already sent"))
            case p.PlaceBet():
                await self.intake.place_bet(client, command, arrived_at)
            case p.PlaceBets():
                await self.intake.place_bets(client, command, arrived_at)
            case p.GetBalance():
                await self._balance(client)
            case p.GetBets():
                await self._bet_record(client, command)
            case p.Tip():
                await self.tips.tip(client, command)
            case p.RealityCheckAck():
                await self.sessions.acknowledge(client)
                client.send_message(p.Ack(cmd="reality_check_ack"))
            case p.CorrectCards():
                await self._correct(client, command)
            case p.ApproveCorrection():
                client.send_message(self._issue_approval(client, command))
            case (p.StartShoe() | p.OpenBetting() | p.CloseBetting() | p.CardIn()
                  | p.Reveal() | p.Pause() | p.ResumeTable() | p.CallOffRound() | p.SetMode()
                  | p.RoundCards()):
                client.send_message(await self.execute(_dealers_table(client), command))
            case p.ChatSend():
                await self.chat.send(client, command)
            case p.ChatMute():
                await self.chat.mute(client, command)
            case p.ChatDelete():
                await self.chat.delete(client, command)
            case p.DealerSignIn():
                await self.chat.sign_in(client, command)
            case _:
                assert_never(command)

    async def _correct(self, client: Client, command: p.CorrectCards) -> None:
        approved = self._approve(client, command)
        if isinstance(approved, p.Error):
            client.send_message(approved)
            return
        answer = await self.execute(_dealers_table(client), approved)
        if isinstance(answer, p.Ack):
            answer.cmd = "correct_cards"  # the console's name for what it asked
        client.send_message(answer)

    async def _balance(self, client: Client) -> None:
        identity = client.identity
        if identity is None or not identity.is_player:
            client.send_message(p.Error(code="not_a_player",
                                        message="sign in as a player to see a balance"))
            return
        client.send_message(await self.players.balance(identity))

    async def _bet_record(self, client: Client, command: p.GetBets) -> None:
        if client.identity is None or not client.identity.is_player:
            client.send_message(p.Error(code="not_a_player",
                                        message="sign in as a player to see your bets"))
            return
        if not self.limits.allow(self.limits.bet_record, "bets", client.identity.id):
            client.send_message(p.Error(code="rate_limited",
                                        message="too many Bet Record reads, slow down"))
            return
        player_id = client.identity.id
        entries, cursor = await self.store.bet_record(player_id, command.limit or 20,
                                                      command.before)
        tips = await page_tips(self.store, player_id, entries, cursor, command.before)
        client.send_message(p.Bets(bets=entries, next=cursor, tips=tips))

    def _issue_approval(self, client: Client,
                        command: p.ApproveCorrection) -> p.Ack | p.Error:
        """A supervisor's console asks to approve voiding ``count`` cards of the round in
        play: the code it shows the dealer, bound to this table, this round and this count,
        used once, short-lived (auth.sign_approval). Never a token: it opens no console."""
        supervisor = client.identity
        table = _dealers_table(client)
        assert supervisor is not None
        if supervisor.kind != "supervisor":
            return p.Error(code="not_a_supervisor",
                           message="only a supervisor's console issues approvals")
        feed = self.feeds.get(table)
        round_id = None if feed is None else feed.view().round_id
        if round_id is None:
            return p.Error(code="no_round", message="no round in play to correct")
        code, approval = sign_approval(self.secret, supervisor, table, round_id,
                                       command.count)
        return p.Ack(cmd="approve_correction", detail={
            "approval": code, "round_id": round_id, "count": command.count,
            "expires_at": approval.expires * 1000})

    def _approve(self, client: Client, command: p.CorrectCards) -> p.VoidCards | p.Error:
        """A correction with a supervisor's approval, named for the log; or why not.

        A supervisor's own console needs no approval. A dealer's carries the code a
        supervisor's console issued (``approve_correction``): checked here for its
        signature, life, table and count; its round and its single use are checked by the
        table's engine, which every gateway's corrections of the table reach."""
        dealer = client.identity
        assert dealer is not None and client.table is not None
        if dealer.kind == "supervisor":
            return p.VoidCards(count=command.count, dealer=dealer.name, dealer_id=dealer.id,
                               supervisor=dealer.name, supervisor_id=dealer.id)
        if not command.approval:
            return p.Error(code="approval_required",
                           message="a card correction needs a supervisor's approval")
        try:
            approval = verify_approval(self.secret, command.approval)
        except TokenError as exc:
            return p.Error(code="bad_approval", message=f"the approval: {exc}")
        if approval.table != client.table:
            return p.Error(code="bad_approval",
                           message=f"the approval is for table {approval.table!r}")
        if approval.count != command.count:
            return p.Error(code="bad_approval", message=(
                f"the approval is for voiding {approval.count} card(s), not {command.count}"))
        return p.VoidCards(count=command.count, dealer=dealer.name, dealer_id=dealer.id,
                           supervisor=approval.supervisor,
                           supervisor_id=approval.supervisor_id,
                           round_id=approval.round_id, nonce=approval.nonce)


def _dealers_table(client: Client) -> str:
    """The table of a dealer's console (dealer commands decode on /ws/dealer only)."""
    assert client.kind == "dealer" and client.table is not None
    return client.table
