"""Every Redis key and pub/sub channel livetable uses, named in one place from one prefix.

Redis carries no money (PostgreSQL does: :mod:`livetable.store.postgres`). The bus, the
leases, the dealer command queue and the chat room take their
names from a :class:`RedisKeys`, so that a deployment's keys and channels all start with
``<prefix>:`` (two deployments can share one Redis, and the ACL of one is ``~<prefix>:*``
``&<prefix>:*``: deploy/redis-users.acl.template). The lease scripts (host/lua/) build no
key names: every key they touch is passed in ``KEYS``.

Key layout (``lt`` is the default prefix; ``<t>`` a table id, ``<p>`` a player id)::

    lt:table:{<t>}:commands       list   dealer commands for the table's engine (scale-out)
    lt:table:{<t>}:reply:<id>     list   the engine's answer to one command (expires)
    lt:table:{<t>}:steps          channel the table's stored steps (the bus), and its
                                         notes: chat, chat_deleted, dealer_changed
    lt:table:{<t>}:chat           stream the last 50 chat messages (XADD MAXLEN 50; the
                                         entry id is the message's id)
    lt:table:{<t>}:chat-mute:<p>  string a player muted at the table (SET PX: the mute)
    lt:table:{<t>}:presenter      string who is dealing: {name, photo} (JSON)
    lt:table:{<t>}:watchers       hash   gateway id -> "<count> <stale after, ms>": each
                                         gateway's connections watching the table (the
                                         players online summed over gateways: bus/redis.py)
    lt:chat-turn:<p>              string a player's chat window (SET NX PX 2000: the rate)
    lt:lease:{<t>}:owner          string who holds the table's lease (SET NX PX)
    lt:lease:{<t>}:counter        string the last lease token handed out (INCR)
    lt:lease:{<t>}:token          string the lease holder's token (a renewal of a lapsed
                                         lease compares it; the fencing token the store
                                         checks is PostgreSQL's own)
    lt:sessions:ended             channel a session ended: every gateway closes its sockets
    lt:sessions:balances          channel players whose balance a bet or a tip moved, by
                                         the gateway that took it: the player's
                                         connections on the others hear the balance
                                         (under lt:sessions:, which the ACL of
                                         deploy/ lets livetable use already)

Every key name ends in a fixed suffix, so ids containing ``:`` cannot collide. Table ids
may not contain ``{`` or ``}`` (they are the hash tag: everything of one table, its lease
included, lives in one cluster slot; sharded pub/sub spreads the bus by table).
"""

from __future__ import annotations

#: The prefix of every key and channel unless told otherwise.
DEFAULT_PREFIX = "lt"


def table_tag(table: str) -> str:
    """``table`` as a hash tag's content: refused if it could break out of the braces."""
    if not table or "{" in table or "}" in table:
        raise ValueError(f"table id {table!r} must be non-empty and without braces")
    return table


class RedisKeys:
    """The key names under one prefix (see the module docstring)."""

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"key prefix {prefix!r} must be non-empty and without braces")
        self.prefix = prefix

    # --- a table ---------------------------------------------------------------------------

    def table(self, table: str) -> str:
        return f"{self.prefix}:table:{{{table_tag(table)}}}"

    def commands(self, table: str) -> str:
        """The table engine's queue of dealer commands (scale-out)."""
        return f"{self.table(table)}:commands"

    def reply(self, table: str, request_id: str) -> str:
        """Where the engine answers one dealer command."""
        return f"{self.table(table)}:reply:{request_id}"

    def steps(self, table: str) -> str:
        """The bus channel of the table's stored steps (in the table's slot: sharded
        pub/sub spreads by table)."""
        return f"{self.table(table)}:steps"

    def chat(self, table: str) -> str:
        """The table's last chat messages (a capped stream: nothing of the chat is in the
        ledger)."""
        return f"{self.table(table)}:chat"

    def chat_mute(self, table: str, player_id: str) -> str:
        return f"{self.table(table)}:chat-mute:{player_id}"

    def presenter(self, table: str) -> str:
        return f"{self.table(table)}:presenter"

    def watchers(self, table: str) -> str:
        """Each gateway's count of the table's connections (players online, summed)."""
        return f"{self.table(table)}:watchers"

    def chat_turn(self, player_id: str) -> str:
        """A player's chat rate window, one for every table (a player has one voice)."""
        return f"{self.prefix}:chat-turn:{player_id}"

    # --- a table's lease -------------------------------------------------------------------

    def _lease(self, table: str) -> str:
        return f"{self.prefix}:lease:{{{table_tag(table)}}}"

    def lease_owner(self, table: str) -> str:
        return f"{self._lease(table)}:owner"

    def lease_counter(self, table: str) -> str:
        return f"{self._lease(table)}:counter"

    def lease_token(self, table: str) -> str:
        """Where the lease holder of ``table`` keeps its lease token (in the lease's slot:
        a renewal of a lapsed lease compares it, host/lua/lease_renew.lua)."""
        return f"{self._lease(table)}:token"

    # --- the gateways' shared names --------------------------------------------------------

    @property
    def sessions_ended(self) -> str:
        """The channel every gateway hears ended sessions on (the bus)."""
        return f"{self.prefix}:sessions:ended"

    @property
    def balances(self) -> str:
        """The channel every gateway hears of balances moved on another (the bus)."""
        return f"{self.prefix}:sessions:balances"
