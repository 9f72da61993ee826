"""The chat and the presenter: frames for a table's watchers that are not table events.

They travel on the table's channel like its events but are not numbered and not in the
table's log (docs/design.md §10): a chat line missed while away is not replayed, the
welcome carries the last ones instead. So they are kept apart from
:mod:`livetable.protocol.events`, whose every frame a resume must account for.
"""

from __future__ import annotations

from typing import Literal

from msgspec import Struct, field

ChatRole = Literal["player", "dealer", "system"]
#: ``chat_rejected.code`` (docs/protocol.md §14).
ChatRejectionCode = Literal[
    "empty", "too_long", "not_a_player", "muted", "blocked_word", "rate_limited",
]


class ChatNotice(Struct, kw_only=True):
    """What a ``system`` line says, for a page to say in its own language: ``muted`` (a
    player was muted for ``minutes``)."""

    key: Literal["muted"]
    minutes: int | None = None


class ChatMessage(Struct, tag="chat", tag_field="type", kw_only=True, omit_defaults=True):
    """One chat message, to everyone at the table. ``id`` names it for ``chat_delete``;
    ``player_id`` is sent to dealer consoles only (for ``chat_mute``); a ``system`` line's
    ``notice`` is its ``text`` as a key (the text is English)."""

    id: str
    table: str
    sender: str = field(name="from")
    role: ChatRole
    text: str
    at: int
    player_id: str | None = None
    notice: ChatNotice | None = None


class ChatAccepted(Struct, tag="chat_accepted", tag_field="type", kw_only=True):
    client_msg_id: str
    id: str


class ChatRejected(Struct, tag="chat_rejected", tag_field="type", kw_only=True,
                   omit_defaults=True):
    client_msg_id: str
    code: ChatRejectionCode
    message: str
    #: ``muted``: when the mute ends (epoch ms, the server's clock); absent otherwise.
    muted_until: int | None = None


class ChatDeleted(Struct, tag="chat_deleted", tag_field="type", kw_only=True):
    id: str
    table: str


class Presenter(Struct, kw_only=True):
    """Who is dealing at a table, and their photo (a URL, or null)."""

    name: str
    photo: str | None = None


class DealerChanged(Struct, tag="dealer_changed", tag_field="type", kw_only=True):
    """A dealer signed in at the table's console: the table shows them from now on."""

    table: str
    name: str
    photo: str | None = None


class TipReceived(Struct, tag="tip_received", tag_field="type", kw_only=True):
    """To the table's dealer consoles only: a player tipped the dealer ``amount`` (minor
    units of ``currency``, null for a player without one), ``from`` named as the chat names
    them."""

    table: str
    sender: str = field(name="from")
    amount: int
    currency: str | None
    at: int


#: A frame for a table's watchers that is not a numbered table event.
TableNote = ChatMessage | ChatDeleted | DealerChanged | TipReceived
