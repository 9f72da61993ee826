"""Commands other than bets: ping, balance, the Bet Record, and the dealer's commands.

A dealer's command goes to the table's runner (``Gateway.execute``) and its answer back to
the console; a card correction needs a supervisor's approval first.

These are methods of :class:`~livetable.server.gateway.Gateway`, bound there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from livetable import protocol as p
from livetable.auth import TokenError, verify
from livetable.clock import now_ms
from livetable.server.gateway.client import Client

if TYPE_CHECKING:
    from livetable.server.gateway import Gateway


async def handle(self: Gateway, client: Client, command: p.PlayerCommand | p.DealerCommand,
                 arrived_at: int) -> None:
    """Answer ``command``: every command of either endpoint has its case (mypy holds the
    match to both unions, tests/unit/test_player_commands.py to protocol.md)."""
    match command:
        case p.Ping(t=t):
            client.send_message(p.Pong(t=t, server_time=now_ms()))
        case p.Hello():
            client.send_message(p.Error(code="already_hello", message="hello was already sent"))
        case p.PlaceBet():
            await self._place_bet(client, command, arrived_at)
        case p.PlaceBets():
            await self._place_bets(client, command, arrived_at)
        case p.GetBalance():
            await _balance(self, client)
        case p.GetBets():
            await _bet_record(self, client, command)
        case p.CorrectCards():
            approved = self._approve(client, command)
            if isinstance(approved, p.Error):
                client.send_message(approved)
                return
            answer = await self.execute(_dealers_table(client), approved)
            if isinstance(answer, p.Ack):
                answer.cmd = "correct_cards"  # the console's name for what it asked
            client.send_message(answer)
        case (p.StartShoe() | p.OpenBetting() | p.CloseBetting() | p.CardIn() | p.Reveal()
              | p.Pause() | p.ResumeTable() | p.CancelRound() | p.SetMode() | p.RoundCards()):
            client.send_message(await self.execute(_dealers_table(client), command))
        case _:
            assert_never(command)


def _dealers_table(client: Client) -> str:
    """The table of a dealer's console (dealer commands decode on /ws/dealer only)."""
    assert client.kind == "dealer" and client.table is not None
    return client.table


async def _balance(self: Gateway, client: Client) -> None:
    identity = client.identity
    if identity is None or not identity.is_player:
        client.send_message(p.Error(code="not_a_player",
                                    message="sign in as a player to see a balance"))
        return
    view = await self._player_view(identity, p.PlayerView(id=identity.id, name=identity.name,
                                                           balance=0))
    client.send_message(p.Balance(balance=view.balance, currency=view.currency))


async def _bet_record(self: Gateway, client: Client, command: p.GetBets) -> None:
    if client.identity is None or not client.identity.is_player:
        client.send_message(p.Error(code="not_a_player",
                                    message="sign in as a player to see your bets"))
        return
    if not self.limits.allow(self.limits.bet_record, "bets", client.identity.id):
        client.send_message(p.Error(code="rate_limited",
                                    message="too many Bet Record reads, slow down"))
        return
    entries, cursor = await self.store.bet_record(client.identity.id,
                                                  command.limit or 20, command.before)
    client.send_message(p.Bets(bets=entries, next=cursor))


def approve(self: Gateway, client: Client, command: p.CorrectCards) -> p.VoidCards | p.Error:
    """A correction with a supervisor's approval, named for the log; or why not.

    A supervisor's own console needs no approval. A dealer's carries a supervisor token
    scoped to this table (scanned at the console, never stored by it)."""
    dealer = client.identity
    assert dealer is not None and client.table is not None
    if dealer.kind == "supervisor":
        supervisor = dealer
    elif not command.approval:
        return p.Error(code="approval_required",
                       message="a card correction needs a supervisor's approval")
    else:
        try:
            supervisor = verify(self.secret, command.approval)
        except TokenError as exc:
            return p.Error(code="bad_approval", message=f"the approval: {exc}")
        if supervisor.kind != "supervisor":
            return p.Error(code="not_a_supervisor",
                           message="the approval must be a supervisor token")
        if not supervisor.may_drive(client.table):
            return p.Error(code="not_your_table", message=(
                f"this supervisor token does not name table {client.table!r}"))
    return p.VoidCards(count=command.count, dealer=dealer.name, dealer_id=dealer.id,
                       supervisor=supervisor.name, supervisor_id=supervisor.id)
