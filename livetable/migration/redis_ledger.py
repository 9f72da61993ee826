"""The retired Redis ledger, read back: what ``livetable migrate-store`` copies.

Scale-out kept its money in Redis until PostgreSQL took it over; that store and its Lua
scripts are gone, and this module is all that still knows their layout — the key names
(:class:`Layout`, from the RedisStore's own list of its keys) and how each value was
written — so that a deployment can move its money (:mod:`livetable.migration.redis_to_postgres`). It
only reads, with plain commands, and expects the engines stopped: nothing moves while it
reads. Each thing read is a Struct shaped as the PostgreSQL row it becomes; the bets,
which may be millions, are read in batches (:func:`bet_batches`) as they are copied.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec
from redis.asyncio import Redis

#: The retired ledger's prefix unless told otherwise (the bus keeps the same default:
#: livetable/bus/keys.py; repeated here so that the store imports nothing of the bus).
DEFAULT_PREFIX = "lt"


class Layout:
    """The retired Redis ledger's key names, kept here only to read them back (``lt`` the
    prefix, ``<t>`` a table, ``<r>`` a round, ``<s>`` a shoe)::

        lt:{ledger}:identity            string the store's identity (the installation id)
        lt:{ledger}:accounts            hash   account -> kind (player house external hold)
        lt:{ledger}:balances            hash   account -> balance
        lt:{ledger}:names / created     hash   player -> name / created_at
        lt:{ledger}:journal             stream every transfer: id debit credit amount kind
                                               ref at
        lt:{ledger}:rounds / shoes      hash   round / ended shoe id -> its table
        lt:{ledger}:bets                hash   bet seq -> bet record (msgpack array: Bet)
        lt:{ledger}:player:<p>:slips    hash   slip_id -> its bet seqs (msgpack)
        lt:table:{<t>}:state            hash   state (sealed), epoch, seq, snapshot
        lt:table:{<t>}:events           stream epoch seq frame
        lt:table:{<t>}:round:<r>:info   hash   the round: state closes_at min max … cards
                                               spots reason opened_at ended_at cursor
        lt:table:{<t>}:round:<r>:players / bets  list  its players / its bet seqs
        lt:table:{<t>}:shoe:<s>:info    hash   an ended shoe: commitment salt cut_at order …
        lt:lease:{<t>}:owner            string the engine holding the table (expires)
        lt:wallet:{<t>}:calls / bodies  hash   tx_id -> a wallet call (msgpack map) / its body
    """

    def __init__(self, prefix: str = DEFAULT_PREFIX) -> None:
        self.prefix = prefix
        money = f"{prefix}:{{ledger}}"
        self.balances, self.accounts = f"{money}:balances", f"{money}:accounts"
        self.names, self.created = f"{money}:names", f"{money}:created"
        self.journal, self.identity = f"{money}:journal", f"{money}:identity"
        self.bets, self.rounds, self.shoes = f"{money}:bets", f"{money}:rounds", f"{money}:shoes"

    def table(self, table: str, name: str) -> str:
        return f"{self.prefix}:table:{{{table}}}:{name}"

    def round(self, table: str, round_id: str, name: str) -> str:
        return self.table(table, f"round:{round_id}:{name}")

    def player_slips(self, player: str) -> str:
        return f"{self.prefix}:{{ledger}}:player:{player}:slips"

    def lease_owner(self, table: str) -> str:
        return f"{self.prefix}:lease:{{{table}}}:owner"

    def wallet(self, table: str, name: str) -> str:
        return f"{self.prefix}:wallet:{{{table}}}:{name}"

    async def tagged(self, redis: Redis, kind: str, suffix: str) -> list[str]:
        """The tables that have a ``<prefix>:<kind>:{<t>}:<suffix>`` key (``table``
        ``state``: a stored engine state; ``wallet`` ``calls``: a wallet log; ``lease``
        ``owner``: an engine holding the table now)."""
        exact = re.compile(re.escape(f"{self.prefix}:{kind}:{{") + r"([^{}]+)\}:"
                           + re.escape(suffix))
        found = {m.group(1) for key in await _scan(redis, f"{self.prefix}:{kind}:*:{suffix}")
                 if (m := exact.fullmatch(key))}
        return sorted(found)


async def _scan(redis: Redis, pattern: str) -> list[str]:
    return [_s(key) async for key in redis.scan_iter(match=pattern, count=1000)]


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _b(value: Any) -> bytes:
    """A value as redis-py hands it (bytes: the client does not decode)."""
    return value if isinstance(value, bytes) else str(value).encode()


def _text(raw: dict[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in raw.items()}


def _int(value: str | None) -> int | None:
    return None if value is None or value == "" else int(value)


# --- what the Redis holds ----------------------------------------------------------------


class Transfer(msgspec.Struct, frozen=True):
    id: str
    debit: str
    credit: str
    amount: int
    kind: str
    ref: str
    at: int


class Player(msgspec.Struct, frozen=True):
    id: str
    name: str
    created_at: int
    balance: int


class Round(msgspec.Struct, frozen=True):
    """A row of the PostgreSQL ``rounds`` table, in its column order."""

    round_id: str
    table_id: str
    shoe_id: str
    round_no: int
    state: str
    closes_at: int | None
    limits: str
    cards: str | None
    spots: str | None
    reason: str | None
    opened_at: int
    ended_at: int | None
    players: int
    bets: int
    cursor: int


class Shoe(msgspec.Struct, frozen=True):
    """A row of the PostgreSQL ``shoes`` table, in its column order."""

    shoe_id: str
    table_id: str
    commitment: str
    salt: str
    cut_at: int
    burn_card: str
    burned: int
    card_order: str
    rounds: str
    ended_at: int


class Table(msgspec.Struct, frozen=True):
    table: str
    state: bytes
    epoch: int
    seq: int
    snapshot: bytes | None
    events: list[tuple[int, int, bytes]]


class WalletRow(msgspec.Struct, kw_only=True):
    """A seamless wallet call: a row of ``wallet_calls`` (schema.py, migration 2), read from
    the Redis log's msgpack map (fields at their default left out) and its body."""

    tx_id: str
    method: str
    player_id: str
    currency: str
    table_id: str
    round_id: str
    amount: int
    state: str
    answer: str | None = None
    attempts: int = 0
    created_at: int = 0
    updated_at: int = 0
    slip_key: str | None = None
    deadline: int = 0
    closed_by: str | None = None
    next_at: int = 0
    debits: str = ""
    body: bytes = b""


class RedisLedger(msgspec.Struct, kw_only=True):
    """Everything the copy needs, read from the Redis."""

    identity: str | None
    players: list[Player]
    #: Every account that is not a player's: house, external, hold:<r>.
    others: dict[str, int]
    #: The transfers from or to ``external`` (deposits, withdrawals), in journal order.
    outside: list[Transfer]
    journal: int
    rounds: list[Round]
    shoes: list[Shoe]
    tables: list[Table]
    #: table -> the engine holding its lease now (none once the engines are stopped).
    engines: dict[str, str]
    wallet: list[WalletRow]
    bets: int

    def balance(self, account: str) -> int:
        return self.others.get(account, 0)

    def transfers(self, now: int) -> list[Transfer]:
        """What the copy posts: the outside transfers, then one per player for play."""
        assert self.identity is not None
        net: Counter[str] = Counter()
        for t in self.outside:
            net[t.credit] += t.amount
            net[t.debit] -= t.amount
        moves = list(self.outside)
        for player in self.players:
            won = player.balance - net[player.id]
            debit, credit = ("house", player.id) if won > 0 else (player.id, "house")
            if won:
                moves.append(Transfer(
                    f"migrate:{self.identity}:{player.id}", debit, credit, abs(won),
                    "migrate", f"migrate-store from Redis {self.identity}", now))
        return moves


async def read_redis(redis: Redis, keys: Layout) -> RedisLedger:
    """The Redis ledger as it stands (the engines stopped: nothing moves meanwhile)."""
    identity = await redis.get(keys.identity)
    kinds = _text(await redis.hgetall(keys.accounts))
    balances = {k: int(v) for k, v in _text(await redis.hgetall(keys.balances)).items()}
    names = _text(await redis.hgetall(keys.names))
    created = _text(await redis.hgetall(keys.created))
    players = [Player(a, names.get(a, ""), int(created.get(a, 0)), balances.get(a, 0))
               for a in sorted(kinds) if kinds[a] == "player"]
    others = {a: b for a, b in balances.items() if kinds.get(a) != "player"}
    outside, journal = await _read_outside(redis, keys)
    return RedisLedger(
        identity=None if identity is None else _s(identity), players=players, others=others,
        outside=outside, journal=journal, rounds=await _read_rounds(redis, keys),
        shoes=await _read_shoes(redis, keys),
        tables=[await _read_table(redis, keys, t)
                for t in await keys.tagged(redis, "table", "state")],
        engines={t: _s(await redis.get(keys.lease_owner(t)) or b"?")
                 for t in await keys.tagged(redis, "lease", "owner")},
        wallet=await _read_wallet(redis, keys), bets=int(await redis.hlen(keys.bets)))


async def _read_outside(redis: Redis, keys: Layout) -> tuple[list[Transfer], int]:
    """The journal's transfers from or to ``external``, and how many transfers in all."""
    outside: list[Transfer] = []
    seen, start = 0, "-"
    while True:
        rows = await redis.xrange(keys.journal, min=start, max="+", count=5000) or []
        for entry_id, raw in rows:
            f = _text(raw or {})
            seen += 1
            if "external" in (f["debit"], f["credit"]):
                outside.append(Transfer(f["id"], f["debit"], f["credit"], int(f["amount"]),
                                        f["kind"], f["ref"], int(f["at"])))
            start = "(" + _s(entry_id or b"")
        if len(rows) < 5000:
            return outside, seen


#: The fields of a round's info hash that are text (``results`` is msgpack: the engine's
#: settlement, kept in ``spots`` as JSON too; ``bet:<spot>`` marks only what was bet).
_ROUND_FIELDS = ["shoe_id", "round_no", "state", "closes_at", "min", "max", "pair_min",
                 "pair_max", "round_max", "cards", "spots", "reason", "opened_at", "ended_at",
                 "cursor"]


async def _read_rounds(redis: Redis, keys: Layout) -> list[Round]:
    index = sorted(_text(await redis.hgetall(keys.rounds)).items())
    rounds = []
    for start in range(0, len(index), 500):  # pipelined: one round trip per 500 rounds
        chunk = index[start:start + 500]
        async with redis.pipeline(transaction=False) as pipe:
            for round_id, table in chunk:
                pipe.hmget(keys.round(table, round_id, "info"), _ROUND_FIELDS)
                pipe.llen(keys.round(table, round_id, "players"))
                pipe.llen(keys.round(table, round_id, "bets"))
            replies = await pipe.execute()
        for n, (round_id, table) in enumerate(chunk):
            values, players, bets = replies[3 * n:3 * n + 3]
            info = {f: _s(v) for f, v in zip(_ROUND_FIELDS, values, strict=True)
                    if v is not None}
            if info:
                rounds.append(_round(round_id, table, info, int(players), int(bets)))
    return rounds


def _round(round_id: str, table: str, info: dict[str, str], players: int,
           bets: int) -> Round:
    limits = {name: int(info[name]) for name in ("min", "max", "pair_min", "pair_max",
                                                 "round_max")}
    return Round(
        round_id=round_id, table_id=table, shoe_id=info["shoe_id"],
        round_no=int(info["round_no"]), state=info["state"],
        closes_at=_int(info.get("closes_at")), limits=msgspec.json.encode(limits).decode(),
        cards=info.get("cards") or None, spots=info.get("spots") or None,
        reason=info.get("reason"), opened_at=int(info["opened_at"]),
        ended_at=_int(info.get("ended_at")), players=players, bets=bets,
        cursor=int(info.get("cursor") or 0))


async def _read_shoes(redis: Redis, keys: Layout) -> list[Shoe]:
    shoes = []
    for shoe_id, table in sorted(_text(await redis.hgetall(keys.shoes)).items()):
        info = _text(await redis.hgetall(keys.table(table, f"shoe:{shoe_id}:info")))
        if info:
            shoes.append(Shoe(shoe_id, table, info["commitment"], info["salt"],
                              int(info["cut_at"]), info["burn_card"], int(info["burned"]),
                              info["order"], info["rounds"], int(info["ended_at"])))
    return shoes


async def _read_table(redis: Redis, keys: Layout, table: str) -> Table:
    raw = {_s(k): _b(v) for k, v in (await redis.hgetall(keys.table(table, "state"))).items()}
    events = []
    for _, fields in await redis.xrange(keys.table(table, "events")) or []:
        f = {_s(k): v for k, v in (fields or {}).items()}
        events.append((int(f["epoch"]), int(f["seq"]), _b(f["frame"])))
    epoch, seq = int(raw.get("epoch", b"0")), int(raw.get("seq", b"0"))
    # only the events of the head's epoch, up to it: what a resume may replay
    return Table(table, raw["state"], epoch, seq, raw.get("snapshot"),
                 [e for e in events if e[0] == epoch and e[1] <= seq])


_WALLET = msgspec.msgpack.Decoder(WalletRow)


async def _read_wallet(redis: Redis, keys: Layout) -> list[WalletRow]:
    calls = []
    for table in await keys.tagged(redis, "wallet", "calls"):
        metas = await redis.hgetall(keys.wallet(table, "calls"))
        bodies = {_s(k): _b(v) for k, v in
                  (await redis.hgetall(keys.wallet(table, "bodies"))).items()}
        for tx_id, meta in metas.items():
            call = _WALLET.decode(_b(meta))
            call.body = bodies.get(_s(tx_id), b"")
            calls.append(call)
    return sorted(calls, key=lambda c: (c.created_at, c.tx_id))




# --- the bets: history, read in batches (a ledger holds millions) ---------------------------


class Bet(msgspec.Struct, array_like=True, frozen=True):
    """A bet record as the old scripts packed it (place_slips.lua, settle.lua)."""

    player_id: str
    bet_id: str
    table_id: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    placed_at: int
    balance_at_accept: int
    state: str
    outcome: str | None = None
    odds: int | None = None
    returned: int | None = None
    settled_at: int | None = None
    balance_after: int | None = None


_BET = msgspec.msgpack.Decoder(Bet)
BET_BATCH = 5_000


async def bet_batches(redis: Redis, keys: Layout) -> AsyncIterator[list[tuple[int, Bet]]]:
    """Every bet with its seq, a batch at a time (``HSCAN``: each bet once, in no order)."""
    batch: list[tuple[int, Bet]] = []
    async for seq, raw in redis.hscan_iter(keys.bets, count=BET_BATCH):
        batch.append((int(seq), _BET.decode(_b(raw))))
        if len(batch) >= BET_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def named_slips(redis: Redis, keys: Layout,
                      players: Iterable[str]) -> dict[int, tuple[str, str]]:
    """Bet seq -> (player, slip_id) of every bet placed in a slip with an id (a
    ``place_bet`` has none: its bet is a slip of one)."""
    named: dict[int, tuple[str, str]] = {}
    players = list(players)
    for start in range(0, len(players), 500):  # pipelined: one round trip per 500 players
        chunk = players[start:start + 500]
        async with redis.pipeline(transaction=False) as pipe:
            for player in chunk:
                pipe.hgetall(keys.player_slips(player))
            replies = await pipe.execute()
        for player, slips in zip(chunk, replies, strict=True):
            for slip_id, packed in slips.items():
                for seq in msgspec.msgpack.decode(_b(packed)):
                    named[int(seq)] = (player, _s(slip_id))
    return named
