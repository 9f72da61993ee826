"""The wallet log on Redis: the same contract as
:class:`~livetable.operator.log_sqlite.SQLiteWalletLog`.

Keyed by table, so that a Redis Cluster can shard it: every call belongs to one table
(its round's), and every script touches one table's keys only (hash tag ``{<t>}``)::

    lt:wallet:{<t>}:calls            hash  tx_id -> the call without its body (msgpack map)
    lt:wallet:{<t>}:bodies           hash  tx_id -> the exact JSON body sent
    lt:wallet:{<t>}:slips            hash  "<player>\\0<slip_key>" -> debit tx_id
    lt:wallet:{<t>}:open             zset  debits not closed yet, by created_at
    lt:wallet:{<t>}:due              zset  queued credits and rollbacks, by next_at
    lt:wallet:{<t>}:round:<r>        set   tx_ids of the round
    lt:wallet:{<t>}:player:<p>       zset  tx_ids of the player at this table, by created_at

Each change of state is one Lua script (compare-and-set inside Redis), so two processes —
a gateway waiting for a debit's answer and a sweeper giving up on it — cannot both win.
A call is a msgpack map; fields that are None are left out of it (msgspec's default
fills them back), which is how Lua's ``cmsgpack`` reads and writes them too.
"""

from __future__ import annotations

from typing import Any

import msgspec
from redis.asyncio import Redis

from livetable.operator.log import CallRecord, CallState, WalletCall
from livetable.store.base import surface_outages
from livetable.store.keys import DEFAULT_PREFIX, RedisKeys
from livetable.store.redis import is_redis_outage

_ENCODER = msgspec.msgpack.Encoder()


_RECORD = msgspec.msgpack.Decoder(CallRecord)

# KEYS: calls, bodies, slips, open, round index, player index.
# ARGV: tx_id, slip field, meta, body, created_at.  Returns the prior debit's tx_id or ''.
_BEGIN_LUA = """
local prior = redis.call('HGET', KEYS[3], ARGV[2])
if prior then return prior end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[1])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[1])
return ''
"""

# KEYS: calls, open.  ARGV: tx_id, state, answer, now, closed_by ('' = none).
_ANSWER_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local c = cmsgpack.unpack(raw)
if c.state ~= 'pending' then return 0 end
c.state, c.answer, c.updated_at = ARGV[2], ARGV[3], tonumber(ARGV[4])
c.attempts = (c.attempts or 0) + 1
if ARGV[5] ~= '' and not c.closed_by then
  c.closed_by = ARGV[5]
  redis.call('ZREM', KEYS[2], ARGV[1])
end
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(c))
return 1
"""

# KEYS: calls, open.  ARGV: before, now.  Returns the tx_ids turned unknown.
_EXPIRE_LUA = """
local out = {}
for _, tx in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local c = cmsgpack.unpack(redis.call('HGET', KEYS[1], tx))
  if c.state == 'pending' and (c.deadline or 0) < tonumber(ARGV[1]) then
    c.state, c.answer, c.updated_at = 'unknown', 'no answer by the deadline', tonumber(ARGV[2])
    redis.call('HSET', KEYS[1], tx, cmsgpack.pack(c))
    out[#out + 1] = tx
  end
end
return out
"""

# KEYS: calls, bodies, due, open, round index, player index.
# ARGV: now, n, then n × (tx_id, meta, body, next_at, created_at), then the debits closed.
_ENQUEUE_LUA = """
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local closer
for i = 0, n - 1 do
  local tx, meta, body, next_at, created = ARGV[3 + i * 5], ARGV[4 + i * 5], ARGV[5 + i * 5],
                                           ARGV[6 + i * 5], ARGV[7 + i * 5]
  closer = closer or tx
  if redis.call('HSETNX', KEYS[1], tx, meta) == 1 then
    redis.call('HSET', KEYS[2], tx, body)
    redis.call('ZADD', KEYS[3], next_at, tx)
    redis.call('SADD', KEYS[5], tx)
    redis.call('ZADD', KEYS[6], created, tx)
  end
end
for i = 3 + n * 5, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local c = cmsgpack.unpack(raw)
    if not c.closed_by then
      c.closed_by, c.updated_at = closer, now
      redis.call('HSET', KEYS[1], ARGV[i], cmsgpack.pack(c))
    end
  end
  redis.call('ZREM', KEYS[4], ARGV[i])
end
return 1
"""

# KEYS: calls, due.  ARGV: tx_id, ok ('1'/'0'), answer, next_at, now.
_DELIVERED_LUA = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local c = cmsgpack.unpack(raw)
if c.state ~= 'queued' then return 0 end
c.answer, c.updated_at, c.next_at = ARGV[3], tonumber(ARGV[5]), tonumber(ARGV[4])
c.attempts = (c.attempts or 0) + 1
if ARGV[2] == '1' then
  c.state = 'ok'
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(c))
return 1
"""


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@surface_outages(is_redis_outage)
class RedisWalletLog:
    """The :class:`~livetable.operator.log.WalletLog` contract on Redis."""

    def __init__(self, client: Redis, tables: list[str], *, prefix: str = DEFAULT_PREFIX,
                 owns_client: bool = False) -> None:
        self.redis = client
        self._owns_client = owns_client
        self.tables = list(tables)
        self.keys = RedisKeys(prefix)
        self._begin = client.register_script(_BEGIN_LUA)
        self._answer = client.register_script(_ANSWER_LUA)
        self._expire = client.register_script(_EXPIRE_LUA)
        self._enqueue = client.register_script(_ENQUEUE_LUA)
        self._delivered = client.register_script(_DELIVERED_LUA)

    def _key(self, table: str, name: str) -> str:
        return self.keys.wallet(table, name)

    @staticmethod
    def _meta(call: WalletCall) -> bytes:
        fields = {name: getattr(call, name) for name in CallRecord.__struct_fields__}
        return _ENCODER.encode(CallRecord(**fields))

    async def _fetch(self, table: str, tx_ids: list[str]) -> list[WalletCall]:
        if not tx_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self._key(table, "calls"), tx_ids)
            pipe.hmget(self._key(table, "bodies"), tx_ids)
            metas, bodies = await pipe.execute()
        out = []
        for meta, body in zip(metas, bodies, strict=True):
            if meta is None:
                continue
            record = msgspec.structs.asdict(_RECORD.decode(meta))
            out.append(WalletCall(**record, body=bytes(body or b"")))
        return out

    async def begin_debit(self, call: WalletCall) -> WalletCall | None:
        t = call.table_id
        prior = await self._begin(
            keys=[self._key(t, "calls"), self._key(t, "bodies"), self._key(t, "slips"),
                  self._key(t, "open"), self._key(t, f"round:{call.round_id}"),
                  self._key(t, f"player:{call.player_id}")],
            args=[call.tx_id, f"{call.player_id}\0{call.slip_key}", self._meta(call),
                  call.body, call.created_at])
        if not prior:
            return None
        found = await self._fetch(t, [_s(prior)])
        return found[0] if found else None

    async def answer_debit(self, debit: WalletCall, state: CallState, answer: str, now: int,
                           closed_by: str | None = None) -> bool:
        t = debit.table_id
        done = await self._answer(keys=[self._key(t, "calls"), self._key(t, "open")],
                                  args=[debit.tx_id, state, answer, now, closed_by or ""])
        return bool(done)

    async def debit_of(self, player_id: str, table_id: str, slip_key: str
                       ) -> WalletCall | None:
        tx_id = await self.redis.hget(self._key(table_id, "slips"), f"{player_id}\0{slip_key}")
        if tx_id is None:
            return None
        found = await self._fetch(table_id, [_s(tx_id)])
        return found[0] if found else None

    async def expire_debits(self, before: int, now: int) -> list[WalletCall]:
        out: list[WalletCall] = []
        for t in self.tables:
            expired = await self._expire(keys=[self._key(t, "calls"), self._key(t, "open")],
                                         args=[before, now])
            out += await self._fetch(t, [_s(x) for x in expired])
        return out

    async def enqueue(self, calls: list[WalletCall], closes: list[str], now: int) -> None:
        if not calls:
            return
        first = calls[0]
        t = first.table_id
        args: list[Any] = [now, len(calls)]
        for call in calls:
            args += [call.tx_id, self._meta(call), call.body, call.next_at, call.created_at]
        args += closes
        await self._enqueue(
            keys=[self._key(t, "calls"), self._key(t, "bodies"), self._key(t, "due"),
                  self._key(t, "open"), self._key(t, f"round:{first.round_id}"),
                  self._key(t, f"player:{first.player_id}")], args=args)

    async def open_debits(self, limit: int) -> list[WalletCall]:
        out: list[WalletCall] = []
        for t in self.tables:
            ids = await self.redis.zrange(self._key(t, "open"), 0, limit - 1)
            out += await self._fetch(t, [_s(x) for x in ids])
        return sorted(out, key=lambda c: c.created_at)[:limit]

    async def due(self, now: int, limit: int) -> list[WalletCall]:
        out: list[WalletCall] = []
        for t in self.tables:
            ids = await self.redis.zrangebyscore(self._key(t, "due"), "-inf", now, start=0,
                                                 num=limit)
            out += await self._fetch(t, [_s(x) for x in ids])
        return sorted(out, key=lambda c: c.next_at)[:limit]

    async def delivered(self, call: WalletCall, ok: bool, answer: str, next_at: int,
                        now: int) -> None:
        t = call.table_id
        await self._delivered(keys=[self._key(t, "calls"), self._key(t, "due")],
                              args=[call.tx_id, "1" if ok else "0", answer, next_at, now])

    async def calls(self, round_id: str | None = None, player_id: str | None = None,
                    limit: int = 10_000) -> list[WalletCall]:
        out: list[WalletCall] = []
        for t in self.tables:
            if round_id is not None:
                ids = [_s(x) for x in await self.redis.smembers(self._key(t, f"round:{round_id}"))]
            elif player_id is not None:
                ids = [_s(x) for x in await self.redis.zrange(self._key(t, f"player:{player_id}"),
                                                              0, -1)]
            else:
                ids = [_s(x) for x in await self.redis.hkeys(self._key(t, "calls"))]
            calls = await self._fetch(t, ids)
            out += [c for c in calls if player_id is None or c.player_id == player_id]
        return sorted(out, key=lambda c: (c.created_at, c.tx_id))[:limit]

    async def backlog(self) -> int:
        total = 0
        for t in self.tables:
            total += int(await self.redis.zcard(self._key(t, "due")))
        return total

    @classmethod
    def from_url(cls, url: str, tables: list[str]) -> RedisWalletLog:
        """A log with a client of its own (closed by :meth:`close`): for the CLI."""
        return cls(Redis.from_url(url), tables, owns_client=True)

    async def close(self) -> None:
        """Closes the client only if it is the log's own (:meth:`from_url`)."""
        if self._owns_client:
            await self.redis.aclose()
