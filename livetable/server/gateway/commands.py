"""Commands other than bets: ping, balance, the Bet Record, and the dealer's commands.

A dealer's command goes to the table's runner (``Gateway.execute``) and its answer back to
the console; a card correction needs a supervisor's approval first, a one-time code that a
supervisor's console gets with ``approve_correction``.

These are methods of :class:`~livetable.server.gateway.Gateway`, bound there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from livetable import protocol as p
from livetable.auth import TokenError, sign_approval, verify_approval
from livetable.clock import now_ms
from livetable.server.gateway.client import Client

if TYPE_CHECKING:
    from livetable.server.gateway import Gateway


async def handle(self: Gateway, client: Client, command: object, arrived_at: int) -> None:
    if isinstance(command, p.Ping):
        client.send_message(p.Pong(t=command.t, server_time=now_ms()))
    elif isinstance(command, p.Hello):
        client.send_message(p.Error(code="already_hello", message="hello was already sent"))
    elif isinstance(command, p.PlaceBet):
        await self._place_bet(client, command, arrived_at)
    elif isinstance(command, p.PlaceBets):
        await self._place_bets(client, command, arrived_at)
    elif isinstance(command, p.GetBalance):
        identity = client.identity
        if identity is None or not identity.is_player:
            client.send_message(p.Error(code="not_a_player",
                                        message="sign in as a player to see a balance"))
            return
        view = await self._player_view(identity, p.PlayerView(id=identity.id,
                                                               name=identity.name,
                                                               balance=0))
        client.send_message(p.Balance(balance=view.balance, currency=view.currency))
    elif isinstance(command, p.GetBets):
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
    elif client.kind == "dealer":
        assert client.table is not None
        if isinstance(command, p.ApproveCorrection):
            client.send_message(self._issue_approval(client, command))
            return
        if isinstance(command, p.CorrectCards):
            approved = self._approve(client, command)
            if isinstance(approved, p.Error):
                client.send_message(approved)
                return
            answer = await self.execute(client.table, approved)
            if isinstance(answer, p.Ack):
                answer.cmd = "correct_cards"  # the console's name for what it asked
        else:
            answer = await self.execute(client.table, command)  # type: ignore[arg-type]  # the dealer decoder yields only table commands here
        client.send_message(answer)


def issue_approval(self: Gateway, client: Client,
                   command: p.ApproveCorrection) -> p.Ack | p.Error:
    """A supervisor's console asks to approve voiding ``count`` cards of the round in play:
    the code it shows the dealer, bound to this table, this round and this count, used
    once, short-lived (auth.sign_approval). Never a token: it opens no console."""
    supervisor = client.identity
    assert supervisor is not None and client.table is not None
    if supervisor.kind != "supervisor":
        return p.Error(code="not_a_supervisor",
                       message="only a supervisor's console issues approvals")
    feed = self.feeds.get(client.table)
    round_id = None if feed is None else feed.view().round_id
    if round_id is None:
        return p.Error(code="no_round", message="no round in play to correct")
    code, approval = sign_approval(self.secret, supervisor, client.table, round_id,
                                   command.count)
    return p.Ack(cmd="approve_correction", detail={
        "approval": code, "round_id": round_id, "count": command.count,
        "expires_at": approval.expires * 1000})


def approve(self: Gateway, client: Client, command: p.CorrectCards) -> p.VoidCards | p.Error:
    """A correction with a supervisor's approval, named for the log; or why not.

    A supervisor's own console needs no approval. A dealer's carries the code a
    supervisor's console issued (``approve_correction``): checked here for its signature,
    life, table and count; its round and its single use are checked by the table's engine,
    which every gateway's corrections of the table reach."""
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
                       supervisor=approval.supervisor, supervisor_id=approval.supervisor_id,
                       round_id=approval.round_id, nonce=approval.nonce)
