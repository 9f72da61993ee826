"""The table chat and the presenter: the commands no engine sees.

A chat line is not a table event: it changes nothing of the game, so it is not numbered,
not in the table's log, not in the ledger, and a resume does not replay it (the welcome
brings the last 50 instead). :class:`Chat` judges a message by the rules
(livetable/chat.py), asks the :class:`~livetable.server.chatroom.ChatRoom` what only a
store shared by every gateway can say (the sender's rate window, a mute), keeps it among
the table's last, and publishes it as a note on the table's channel; every gateway —
this one too — hands a note to the table's watchers in :meth:`Chat.deliver`. A dealer
console's copy of a message names its sender's id, for ``chat_mute``; a player's does not.

A line said while a client is being welcomed (after its welcome's last 50 were read, before
it joins the table's watchers) can miss that client. Chat is not replayed, and that is
acceptable for it: nothing of the game or of anyone's money rides on a line.

The presenter is kept the same way: ``dealer_sign_in`` stores who deals (and their photo,
from the ``presenters`` setting) and publishes ``dealer_changed``; the welcome says who.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable

from livetable import protocol as p
from livetable.bus import TableNote
from livetable.chat import CHAT_REJECTIONS, NO_WORDS, BlockedWords, clean, folded, judge
from livetable.clock import now_ms
from livetable.config import Settings, presenter_of
from livetable.metrics import Metrics
from livetable.server.chatroom import ChatRoom
from livetable.server.framed_ws import text_frame
from livetable.server.gateway.client import Client
from livetable.server.gateway.feed import Tables

#: The blocked words of an operator (None: a player no operator launched, a guest).
WordsOf = Callable[[str | None], BlockedWords]
Publish = Callable[[TableNote], Awaitable[None]]


class Chat:
    """A table's chat and its presenter, for one gateway (see the module docstring)."""

    def __init__(self, settings: Settings, room: ChatRoom, tables: Tables,
                 metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.room = room
        self.tables = tables
        #: Where notes go: the bus (set by the process); alone, straight to this gateway.
        self.publish: Publish = self._loopback
        self.words_of: WordsOf = lambda operator: NO_WORDS
        #: The name a console signed in with, while it is open.
        self.signed_in: weakref.WeakKeyDictionary[Client, str] = weakref.WeakKeyDictionary()

    async def _loopback(self, note: TableNote) -> None:
        self.deliver(note)

    # --- commands ------------------------------------------------------------------------

    async def send(self, client: Client, command: p.ChatSend) -> None:
        identity, table = client.identity, client.table
        role: p.ChatRole = "dealer" if client.kind == "dealer" else "player"
        if identity is None or table is None or (role == "player" and not identity.is_player):
            self._reject(client, command, "not_a_player")
            return
        words = self.words_of(identity.operator) if role == "player" else NO_WORDS
        text, code = judge(command.text, role=role, blocked=words)
        now = now_ms()
        until: int | None = None
        if code is None and role == "player":
            until = await self.room.muted(table, identity.id, now)
            if until is not None:
                code = "muted"
            elif not await self.room.take_turn(identity.id, now):
                code = "rate_limited"
        if code is not None:
            self._reject(client, command, code, until)
            return
        sender = self.signed_in.get(client, identity.name)
        message = await self.room.add(p.ChatMessage(
            id="", table=table, sender=sender, role=role, text=text, at=now,
            player_id=identity.id if role == "player" else None))
        self.metrics.inc("livetable_chat_lines_total")
        client.send_message(p.ChatAccepted(client_msg_id=command.client_msg_id,
                                           id=message.id))
        await self._publish(message)

    async def mute(self, client: Client, command: p.ChatMute) -> None:
        table = _table(client)
        await self.room.mute(table, command.player_id, command.minutes, now_ms())
        client.send_message(p.Ack(cmd="chat_mute", detail={
            "player_id": command.player_id, "minutes": command.minutes}))
        if command.minutes:
            await self.say(table, f"A player was muted for {command.minutes} min.",
                           p.ChatNotice(key="muted", minutes=command.minutes))

    async def delete(self, client: Client, command: p.ChatDelete) -> None:
        table = _table(client)
        kept = await self.room.delete(table, command.id)
        client.send_message(p.Ack(cmd="chat_delete", detail={"id": command.id,
                                                             "kept": kept}))
        # told even when no longer among the last 50: screens still show older lines
        frame = p.encode(p.ChatDeleted(id=command.id, table=table))
        await self.publish(TableNote(table=table, frame=frame))

    async def sign_in(self, client: Client, command: p.DealerSignIn) -> None:
        table = _table(client)
        name = clean(command.name)  # one line, as a chat line is
        if not name:
            client.send_message(p.Error(code="bad_command", message="a dealer needs a name"))
            return
        bound = self.bound_to(name)
        identity = client.identity
        if bound is not None and (identity is None or identity.id.casefold() != bound):
            client.send_message(p.Error(code="bad_command", message=(
                f"{name!r} is a presenter of this studio: only their own staff token "
                "signs in as them")))
            return
        presenter = p.Presenter(name=name, photo=self.photo_of(name))
        await self.room.set_presenter(table, presenter)
        self.signed_in[client] = name
        client.send_message(p.Ack(cmd="dealer_sign_in", detail={
            "name": name, "photo": presenter.photo}))
        await self.publish(TableNote(table=table, frame=p.encode(p.DealerChanged(
            table=table, name=name, photo=presenter.photo))))

    def photo_of(self, name: str) -> str | None:
        """The dealer's photo from the ``presenters`` setting (names match ignoring case)."""
        folded = name.casefold()
        for known, url in self.settings.presenters.items():
            if presenter_of(known)[1].casefold() == folded:
                return url
        return None

    def bound_to(self, name: str) -> str | None:
        """The staff id (folded) a presenter's name is bound to (``--presenter
        ID:NAME=URL``), if ``name`` is one or looks like one (case, marks, look-alikes:
        ``chat.folded``); None for a name no presenter has."""
        alike = folded(name)
        for known in self.settings.presenters:
            staff, presenter = presenter_of(known)
            if folded(presenter) == alike:
                return staff.casefold()
        return None

    async def say(self, table: str, text: str, notice: p.ChatNotice) -> None:
        """A line from the server itself (role ``system``): ``text`` in English, and the
        ``notice`` it says, for pages in other languages."""
        await self._publish(await self.room.add(p.ChatMessage(
            id="", table=table, sender="", role="system", text=text, at=now_ms(),
            notice=notice)))

    # --- the welcome, and notes from the bus ----------------------------------------------

    async def welcome_part(self, client: Client, table: str
                           ) -> tuple[list[p.ChatMessage], p.Presenter | None]:
        """The last messages (as this client may see them) and the presenter."""
        recent = await self.room.recent(table)
        if client.kind != "dealer":
            recent = [_public(message) for message in recent]
        return recent, await self.room.presenter(table)

    def deliver(self, note: TableNote) -> None:
        """A note from the bus to the table's watchers (synchronous, like a table step)."""
        feed = self.tables.feeds.get(note.table)
        if feed is None or not feed.clients:
            return
        # a note without a public frame is for the dealer consoles only (a tip)
        public = (note.frame.decode(), text_frame(note.frame)) if note.frame else None
        staff = public if note.staff is None else (note.staff.decode(),
                                                    text_frame(note.staff))
        for client in list(feed.clients):
            frame = staff if client.kind == "dealer" else public
            if frame is not None:
                client.send(*frame)

    async def _publish(self, message: p.ChatMessage) -> None:
        staff = p.encode(message)
        public = p.encode(_public(message)) if message.player_id else None
        await self.publish(TableNote(table=message.table, frame=public or staff,
                                     staff=staff if public else None))

    def _reject(self, client: Client, command: p.ChatSend, code: p.ChatRejectionCode,
                until: int | None = None) -> None:
        self.metrics.inc("livetable_chat_rejected_total")
        message = CHAT_REJECTIONS[code]
        if until is not None:  # how long, not "a while": whole minutes, rounded up
            message = f"the dealer muted you for {-(-(until - now_ms()) // 60_000)} more min"
        client.send_message(p.ChatRejected(client_msg_id=command.client_msg_id, code=code,
                                           message=message, muted_until=until))


def _public(message: p.ChatMessage) -> p.ChatMessage:
    """``message`` without its sender's id: what players and viewers see."""
    return p.ChatMessage(id=message.id, table=message.table, sender=message.sender,
                         role=message.role, text=message.text, at=message.at,
                         notice=message.notice)


def _table(client: Client) -> str:
    """The table of a dealer's console (these commands decode on /ws/dealer only)."""
    assert client.kind == "dealer" and client.table is not None
    return client.table
