"""Every Redis key and pub/sub channel livetable uses, named in one place from one prefix.

The store, the bus, the leases, the dealer command queue and the seamless wallet's log all
take their names from a :class:`RedisKeys`, so that a deployment's keys and channels all
start with ``<prefix>:`` (two deployments can share one Redis, and the ACL of one is
``~<prefix>:*`` ``&<prefix>:*``: deploy/redis-users.acl.template). The Lua scripts build no
key names: every key they touch is passed in ``KEYS``.

Key layout (``lt`` is the default prefix; ``<t>`` a table id, ``<r>`` a round id,
``<p>`` a player id, ``<s>`` a shoe id)::

    lt:{ledger}:balances          hash   account -> balance (players, house, external,
                                         hold:<r>)
    lt:{ledger}:accounts          hash   account -> kind (player house external hold)
    lt:{ledger}:debits / credits  hash   account -> running total of its debits / credits
    lt:{ledger}:journal           stream every transfer: id debit credit amount kind ref at
    lt:{ledger}:transfer-ids      set    every transfer id applied (each applied once)
    lt:{ledger}:names / created   hash   player -> name / created_at
    lt:{ledger}:deposit-ids       hash   deposit transfer id -> player (idempotency)
    lt:{ledger}:withdraw-ids      hash   withdrawal transfer id -> player (a seamless
                                         wallet's money leaving: docs/operator.md)
    lt:{ledger}:identity          string the store's identity (Store.identity)
    lt:{ledger}:bets              hash   bet seq -> the bet record (msgpack array, BetRow)
    lt:{ledger}:bet-seq           string the last bet seq (global, increasing: the Bet
                                         Record cursor)
    lt:{ledger}:slip-seq          string the last slip seq (names the slip's transfer)
    lt:{ledger}:rounds            hash   round id -> table (round_view, audit)
    lt:{ledger}:player:<p>:bet-ids hash  bet_id -> seq (the (player, bet_id) key)
    lt:{ledger}:player:<p>:slips  hash   slip_id -> its bet seqs (the (player, slip_id) key)
    lt:{ledger}:player:<p>:bets   zset   seq (score and member): the Bet Record
    lt:{ledger}:player:<p>:rounds hash   round id -> "seq,seq,…" (resume settlements)
    lt:{ledger}:shoes             hash   shoe id -> table (ended auto shoes only)
    lt:table:{<t>}:state          hash   state (the engine's bytes, sealed: store/sealing.py),
                                         epoch, seq (the log head), snapshot (the
                                         public TableSnapshot: gateways catch up from it)
    lt:table:{<t>}:events         stream epoch seq frame, XADD MAXLEN ~ event_retention
    lt:table:{<t>}:settling       set    its rounds still settling or refunding
    lt:table:{<t>}:round:<r>:info   hash the round: state closes_at limits cards spots
                                         results cursor, bet:<spot> (spots bet) …
    lt:table:{<t>}:round:<r>:bets   list its bet seqs in order
    lt:table:{<t>}:round:<r>:players list its players in the order they first bet
    lt:table:{<t>}:round:<r>:by-player hash player -> "seq,seq,…" (settlement by player)
    lt:table:{<t>}:round:<r>:totals hash "<spot>:<p>" -> amount, "*:<p>" -> deducted
    lt:table:{<t>}:shoe:<s>:info  hash   an ended auto shoe: commitment salt cut_at order …
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
    lt:lease:{<t>}:counter        string the last fencing token handed out (INCR)
    lt:lease:{<t>}:token          string the lease holder's fencing token (the store's
                                         scripts compare it before they write)
    lt:launch:<o>:<id>            string a launch request id seen (SET NX PX: a launch is
                                         used once; operator/launches.py)
    lt:session:<sid>              hash   an operator's session (engine/sessions.py):
                                         record, staked, returned, checked_at, ended_at,
                                         reason; expires with the session's token
    lt:sessions:ended             channel a session ended: every gateway closes its sockets
    lt:wallet:{<t>}:<name>        the seamless wallet's log of the table (operator/log_redis.py)

Every key name ends in a fixed suffix, so ids containing ``:`` cannot collide. Table ids
may not contain ``{`` or ``}`` (they are the hash tag: everything of one table, its lease
included, lives in one cluster slot).
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
        ledger = f"{prefix}:{{ledger}}"
        self.prefix = prefix
        self.ledger = ledger
        self.balances = f"{ledger}:balances"
        self.accounts = f"{ledger}:accounts"
        self.debits = f"{ledger}:debits"
        self.credits = f"{ledger}:credits"
        self.journal = f"{ledger}:journal"
        self.names = f"{ledger}:names"
        self.created = f"{ledger}:created"
        self.transfers = f"{ledger}:transfer-ids"
        self.deposit_ids = f"{ledger}:deposit-ids"
        self.withdraw_ids = f"{ledger}:withdraw-ids"
        self.identity = f"{ledger}:identity"
        self.bets = f"{ledger}:bets"
        self.bet_seq = f"{ledger}:bet-seq"
        self.slip_seq = f"{ledger}:slip-seq"
        self.rounds = f"{ledger}:rounds"
        self.shoes = f"{ledger}:shoes"

    # --- the ledger ------------------------------------------------------------------------

    @property
    def money(self) -> list[str]:
        """The six keys every money script takes first (lua/ledger.lua), in its order."""
        return [self.balances, self.accounts, self.debits, self.credits, self.journal,
                self.transfers]

    def player_bet_ids(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:bet-ids"

    def player_bets(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:bets"

    def player_rounds(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:rounds"

    def player_slips(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:slips"

    def slip_keys(self, table: str, round_id: str, player_id: str) -> list[str]:
        """The keys of one slip in place_slips.lua, in its order."""
        return [self.round_info(table, round_id), self.round_bets(table, round_id),
                self.round_totals(table, round_id), self.player_bet_ids(player_id),
                self.player_bets(player_id), self.player_rounds(player_id),
                self.player_slips(player_id), self.round_players(table, round_id),
                self.round_by_player(table, round_id)]

    # --- a table ---------------------------------------------------------------------------

    def table(self, table: str) -> str:
        return f"{self.prefix}:table:{{{table_tag(table)}}}"

    def table_state(self, table: str) -> str:
        return f"{self.table(table)}:state"

    def table_events(self, table: str) -> str:
        return f"{self.table(table)}:events"

    def round_info(self, table: str, round_id: str) -> str:
        return f"{self.table(table)}:round:{round_id}:info"

    def round_bets(self, table: str, round_id: str) -> str:
        return f"{self.table(table)}:round:{round_id}:bets"

    def round_totals(self, table: str, round_id: str) -> str:
        return f"{self.table(table)}:round:{round_id}:totals"

    def round_players(self, table: str, round_id: str) -> str:
        return f"{self.table(table)}:round:{round_id}:players"

    def round_by_player(self, table: str, round_id: str) -> str:
        return f"{self.table(table)}:round:{round_id}:by-player"

    def shoe_info(self, table: str, shoe_id: str) -> str:
        return f"{self.table(table)}:shoe:{shoe_id}:info"

    def pending_rounds(self, table: str) -> str:
        return f"{self.table(table)}:settling"

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

    def launch_request(self, operator_id: str, request_id: str) -> str:
        """A launch's request id, kept while a replay could still pass the clock check."""
        return f"{self.prefix}:launch:{operator_id}:{request_id}"

    def session(self, session_id: str) -> str:
        """An operator's session, until its token expires."""
        return f"{self.prefix}:session:{session_id}"

    @property
    def sessions_ended(self) -> str:
        """The channel every gateway hears ended sessions on (the bus)."""
        return f"{self.prefix}:sessions:ended"

    def lease_owner(self, table: str) -> str:
        return f"{self._lease(table)}:owner"

    def lease_counter(self, table: str) -> str:
        return f"{self._lease(table)}:counter"

    def lease_token(self, table: str) -> str:
        """Where the lease holder of ``table`` keeps its fencing token (in the table's
        slot: the store's scripts read it with the table's keys)."""
        return f"{self._lease(table)}:token"

    # --- the seamless wallet's log ---------------------------------------------------------

    def wallet(self, table: str, name: str) -> str:
        return f"{self.prefix}:wallet:{{{table_tag(table)}}}:{name}"
