"""The Redis store: the scale-out ledger, where many gateways take bets at once.

Why Lua. Every decision that reads money and then moves it — taking a bet, closing or
reopening betting, settling a round, refunding one — runs as one Lua script inside Redis,
registered once (``register_script``) and called by SHA. Redis runs a script to the end
before it serves any other command, so a bet script and the step script that closes betting
are strictly ordered: a bet either lands before the close (and is in the hold, and is
settled or refunded with the round) or is refused with ``betting_closed``; never in
between. The stateless checks stay in Python (:func:`~livetable.store.base.precheck`); the
rules never enter Lua: the settle script multiplies each bet by the returned multiple that
the engine put in :class:`~livetable.engine.table.SettleRound`.

One engine step is one script too (:meth:`RedisStore.commit_step`): its effects (open a
round, close/pause/reopen betting, settle, refund), its events and the engine's new state
are written together or not at all, so a step is never stored half, and never announced
before it is stored. Settling and refunding are idempotent by round id (an ended round is
left alone); a bet by ``(player, bet_id)``; events already in the log (at or below the head
of the same epoch) are not appended again, so a runner that retries a step logs it once.
Redis does not roll back a script that fails half way, so every script reads and validates
first and writes only once nothing can fail any more (the step script checks that every
accepted bet of a round it settles has a result before its first write).

Cost. Redis serves nothing else while a script runs. Taking a bet is about twenty commands
inside one script; settling a round costs about as much per bet (one payout transfer per
player, one record update per bet), all in one block: a round of N bets holds every other
client for roughly the time its N bets took to place (tens of microseconds of Redis time
per bet). Rounds of a few thousand bets settle in well under a second; a round of hundreds
of thousands would need a chunked settlement (and would trip Redis' busy-script threshold).

Integers. Lua numbers are doubles: integers are exact up to 2^53 (9.0e15). Amounts are at
most ``MAX_AMOUNT`` = 1e12 and a return at most 12 times that, so every amount and sum the
scripts compute is exact; the balances themselves are kept by Redis (``HINCRBY``, int64) and
read into Lua only to compare or report. Deposits that would take an account past 2^53 - 1
are refused (:class:`AmountOverflow`), so what Lua reads stays exact.

Key layout (``lt`` is the default prefix; ``<t>`` a table id, ``<r>`` a round id,
``<p>`` a player id)::

    lt:{ledger}:balances          hash   account -> balance (players, house, external,
                                         hold:<r>)
    lt:{ledger}:accounts          hash   account -> kind (player house external hold)
    lt:{ledger}:debits / credits  hash   account -> running total of its debits / credits
    lt:{ledger}:journal           stream every transfer: id debit credit amount kind ref at
    lt:{ledger}:names / created   hash   player -> name / created_at
    lt:{ledger}:deposit-ids       hash   deposit transfer id -> player (idempotency)
    lt:{ledger}:bets              hash   bet seq -> the bet record (msgpack array)
    lt:{ledger}:bet-seq           string the last bet seq (global, increasing: the Bet
                                         Record cursor)
    lt:{ledger}:rounds            hash   round id -> table (round_view, audit)
    lt:{ledger}:player:<p>:bet-ids hash  bet_id -> seq (the (player, bet_id) key)
    lt:{ledger}:player:<p>:bets   zset   seq (score and member): the Bet Record
    lt:{ledger}:player:<p>:rounds hash   round id -> "seq,seq,…" (resume settlements)
    lt:{ledger}:shoes             hash   shoe id -> table (ended auto shoes only)
    lt:table:{<t>}:state          hash   state (the engine's bytes, sealed: store/sealing.py),
                                         epoch, seq (the log head)
    lt:table:{<t>}:events         stream epoch seq frame, XADD MAXLEN ~ event_retention
    lt:table:{<t>}:round:<r>:info   hash the round: state closes_at limits cards spots …
    lt:table:{<t>}:round:<r>:bets   list its bet seqs in order
    lt:table:{<t>}:round:<r>:totals hash "<spot>:<p>" -> amount, "*:<p>" -> deducted
    lt:table:{<t>}:shoe:<s>:info  hash   an ended auto shoe: commitment salt cut_at order …
    lease:{<t>}:token             string the table lease's fencing token (the lease holder
                                         writes it; see :func:`lease_token_key`)

Every key name ends in a fixed suffix, so ids containing ``:`` cannot collide. Table ids
may not contain ``{`` or ``}`` (they are the hash tag).

Redis Cluster, and the ledger decision. A script may only touch keys of one hash slot in a
cluster. Everything of one table is tagged ``{<t>}``, so a table's state, event log,
rounds and its lease live in one slot. Money cannot be split that way: a player's balance
is one number that a bet at any table must check and debit atomically, together with that
table's round. So all money — balances, holds, journal, bet records — lives under one tag,
``{ledger}``, and the bet and step scripts touch ``{ledger}`` and ``{<t>}`` keys together.
That is fine on one Redis primary (AOF with ``appendfsync always`` for durability; replicas
and Sentinel for failover, which being asynchronous can lose the last acknowledged writes):
the scripts declare every key they touch, and one primary takes far more bets a second than
live tables send. It is *not* valid on Redis Cluster (the scripts would fail with
CROSSSLOT). The ways past one primary are (a) put everything under
one tag — it runs on a cluster, but one shard carries every bet, so the cluster only
spreads pub/sub; or (b) per-table player wallets (chips at a table: the bet scripts use
``{<t>}`` wallets only, and money moves between the ``{ledger}`` wallet and a table wallet
by idempotent two-phase transfers with a recovery sweep) — a product change (a player's
balance would be split by table), not a storage detail. We take the single primary.

Fencing. A lease holder sets ``store.fence_tokens[table] = token`` once it holds the table's
lease (token written at :func:`lease_token_key`). From then on every ``commit_step`` for that
table first compares the token inside the step script and writes nothing, raising
:class:`FencedOut`, if another engine has taken the table since.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import msgspec
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from livetable import protocol as p
from livetable.accounts import AccountError, check_player_id
from livetable.engine.table import (
    CancelRound,
    Effect,
    OpenRound,
    RevealShoe,
    SetBetting,
    SettleRound,
)
from livetable.rules import BetSpot
from livetable.rules.fairness import ShoeRecord, ShoeRound
from livetable.store.base import AuditReport, BetRequest, Settled, cursor_of, precheck, rejected
from livetable.store.sealing import StateSeal, open_state, seal_state

#: How many events per table the log keeps for resume (``XADD MAXLEN ~``: at least this).
DEFAULT_EVENT_RETENTION = 20_000

#: The largest integer a Lua number (a double) holds exactly.
MAX_EXACT = 2**53 - 1


class FencedOut(Exception):
    """``commit_step`` was refused: the table's lease token is no longer ours.

    Another engine took the table over (its lease holder wrote a newer token). Nothing of
    the step was written; the engine must stop driving the table.
    """

    def __init__(self, table: str, token: int, holder: str | None) -> None:
        super().__init__(f"table {table!r}: our fencing token {token} is not the lease's "
                         f"({holder or 'none'})")
        self.table = table
        self.token = token
        self.holder = holder


class AmountOverflow(ValueError):
    """A deposit would take a balance past 2^53 - 1, beyond what the scripts keep exact."""


def lease_token_key(table: str) -> str:
    """Where the lease holder of ``table`` keeps its fencing token (in the table's slot)."""
    return f"lease:{{{_tag(table)}}}:token"


def _tag(table: str) -> str:
    if not table or "{" in table or "}" in table:
        raise ValueError(f"table id {table!r} must be non-empty and without braces")
    return table


# --- Lua ---------------------------------------------------------------------------------

#: Shared by the money scripts; KEYS[1..5] are always the ledger's.
_LEDGER_LUA = """
local BALANCES, ACCOUNTS, DEBITS, CREDITS, JOURNAL = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local MAX_EXACT = 9007199254740991

-- One transfer, double entry: both balances, both running totals and a journal line.
-- Returns the debit and the credit account's new balances.
local function transfer(id, debit, credit, amount, kind, ref, at)
  if debit == credit then  -- before any write: it would log money that never moved
    error('SAME_ACCOUNT transfer ' .. id .. ' debits and credits ' .. debit)
  end
  local d = redis.call('HINCRBY', BALANCES, debit, -amount)
  redis.call('HINCRBY', DEBITS, debit, amount)
  local c = redis.call('HINCRBY', BALANCES, credit, amount)
  redis.call('HINCRBY', CREDITS, credit, amount)
  redis.call('XADD', JOURNAL, '*', 'id', id, 'debit', debit, 'credit', credit,
             'amount', amount, 'kind', kind, 'ref', ref, 'at', at)
  return d, c
end

local function balance(account)
  return tonumber(redis.call('HGET', BALANCES, account) or '0')
end

local function int(n) return string.format('%d', n) end

-- The two accounts that exist from the start (so that no player can take their ids).
local function open_ledger()
  redis.call('HSETNX', ACCOUNTS, 'house', 'house')
  redis.call('HSETNX', ACCOUNTS, 'external', 'external')
end
"""

# KEYS: ledger(5), names, created.  ARGV: player, name, initial balance, now.
_ENSURE_PLAYER_LUA = _LEDGER_LUA + """
local NAMES, CREATED = KEYS[6], KEYS[7]
local pid, name, initial, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
open_ledger()
if redis.call('HSETNX', ACCOUNTS, pid, 'player') == 1 then
  redis.call('HSET', NAMES, pid, name)
  redis.call('HSET', CREATED, pid, now)
  redis.call('HSETNX', BALANCES, pid, 0)
  if initial > 0 then
    transfer('open:' .. pid, 'external', pid, initial, 'deposit', pid, now)
  end
else
  local kind = redis.call('HGET', ACCOUNTS, pid)
  if kind ~= 'player' then return {'not_a_player', kind} end
  if name ~= '' then redis.call('HSET', NAMES, pid, name) end
end
return {'ok', redis.call('HGET', NAMES, pid) or '', balance(pid)}
"""

# KEYS: ledger(5), deposit-ids.  ARGV: transfer id, account, amount, now.
_DEPOSIT_LUA = _LEDGER_LUA + """
local DEPOSIT_IDS = KEYS[6]
local tid, account, amount, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
open_ledger()
if redis.call('HGET', ACCOUNTS, account) ~= 'player' then return {'no_account'} end
if amount > 0 and not redis.call('HGET', DEPOSIT_IDS, tid) then
  if balance(account) + amount > MAX_EXACT or amount - balance('external') > MAX_EXACT then
    return {'overflow', balance(account)}
  end
  redis.call('HSET', DEPOSIT_IDS, tid, account)
  transfer('deposit:' .. tid, 'external', account, amount, 'deposit', account, now)
end
return {'ok', balance(account)}
"""

# KEYS: ledger(5), bets, bet-seq, round info, round bets, round totals, player bet-ids,
#       player bets, player rounds.
# ARGV: player, bet_id, table, round, spot, amount, deducted multiple, is_pair, now.
# A bet record: {player, bet_id, table, round, spot, amount, deducted, placed_at,
#                balance_at_accept, state[, outcome, odds, returned, settled_at, balance_after]}
_PLACE_BET_LUA = _LEDGER_LUA + """
local BETS, BET_SEQ, ROUND, ROUND_BETS, TOTALS = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local BET_IDS, RECORD, PLAYER_ROUNDS = KEYS[11], KEYS[12], KEYS[13]
local pid, bet_id, tbl, rid, spot = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local amount, multiple, now = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[9])

local prior = redis.call('HGET', BET_IDS, bet_id)
if prior then
  local b = cmsgpack.unpack(redis.call('HGET', BETS, prior))
  if b[4] == rid and b[5] == spot and b[6] == amount then
    return {'accepted', b[4], b[5], b[6], b[7], b[9]}
  end
  return {'rejected', 'duplicate_bet_id'}
end
local r = redis.call('HMGET', ROUND, 'state', 'closes_at', 'min', 'max', 'pair_min',
                     'pair_max', 'round_max')
if not r[1] then return {'rejected', 'unknown_round'} end
if r[1] == 'paused' then return {'rejected', 'paused'} end
if r[1] ~= 'betting' or r[2] == '' or now >= tonumber(r[2]) then
  return {'rejected', 'betting_closed'}
end
local low, high = tonumber(r[3]), tonumber(r[4])
if ARGV[8] == '1' then low, high = tonumber(r[5]), tonumber(r[6]) end
if amount < low then return {'rejected', 'below_min', low} end
local spot_field, round_field = spot .. ':' .. pid, '*:' .. pid
if tonumber(redis.call('HGET', TOTALS, spot_field) or '0') + amount > high then
  return {'rejected', 'above_max', high}
end
local deducted = amount * multiple
local round_max = tonumber(r[7])
if tonumber(redis.call('HGET', TOTALS, round_field) or '0') + deducted > round_max then
  return {'rejected', 'round_limit', round_max}
end
if redis.call('HGET', ACCOUNTS, pid) ~= 'player' then return {'rejected', 'not_a_player'} end
local bal = balance(pid)
if bal < deducted then return {'rejected', 'insufficient_funds', deducted, bal} end

local hold = 'hold:' .. rid
redis.call('HSETNX', ACCOUNTS, hold, 'hold')  -- opened with the round; kept for old rounds
local seq = int(redis.call('INCR', BET_SEQ))
-- Transfer ids name the bet by its seq: player and bet ids are free text, so
-- "bet:<player>:<bet_id>" could read the same for two bets.
local after = transfer('bet:' .. seq, pid, hold, deducted, 'bet', rid, ARGV[9])
redis.call('HSET', BETS, seq, cmsgpack.pack({pid, bet_id, tbl, rid, spot, amount, deducted,
                                             now, after, 'accepted'}))
redis.call('RPUSH', ROUND_BETS, seq)
redis.call('HINCRBY', TOTALS, spot_field, amount)
redis.call('HINCRBY', TOTALS, round_field, deducted)
redis.call('HSET', BET_IDS, bet_id, seq)
redis.call('ZADD', RECORD, seq, seq)
local seqs = redis.call('HGET', PLAYER_ROUNDS, rid)
redis.call('HSET', PLAYER_ROUNDS, rid, seqs and (seqs .. ',' .. seq) or seq)
return {'accepted', rid, spot, amount, deducted, after}
"""

# KEYS: ledger(5), bets, rounds index, table state, table events, lease token,
#       then the keys the effects name by index (round info, round bets).
# ARGV: fencing token ('' = none), now, engine state, effects (msgpack), event retention,
#       then the events flat: epoch, seq, frame, epoch, seq, frame, ...
# Effects: {'open', info, round, table, shoe, round_no, closes_at, min, max, pair_min,
#            pair_max, round_max}
#          {'betting', info, status, closes_at or ''}
#          {'settle', info, bets, round, cards json, spots json, {spot: {outcome, odds, mult}}}
#          {'cancel', info, bets, round, reason}
#          {'shoe', info, shoes index, shoe, table, commitment, salt, cut_at, burn_card,
#           burned, order json, rounds json}
_STEP_LUA = _LEDGER_LUA + """
local BETS, ROUNDS, STATE, EVENTS, LEASE = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local fence, now = ARGV[1], ARGV[2]
if fence ~= '' then
  local holder = redis.call('GET', LEASE)
  if holder ~= fence then return {'fenced', holder or ''} end
end
local effects = cmsgpack.unpack(ARGV[4])
-- A round opens only on an escrow account that is the round's own (checked before any
-- write: a script that fails half-way keeps what it wrote).
for _, e in ipairs(effects) do
  if e[1] == 'open' then
    local kind = redis.call('HGET', ACCOUNTS, 'hold:' .. e[3])
    if kind and kind ~= 'hold' then return {'hold_taken', e[3], kind} end
  end
end

local function hmget_all(key, fields)
  local out = {}
  for i = 1, #fields, 500 do
    local chunk = {}
    for j = i, math.min(i + 499, #fields) do chunk[#chunk + 1] = fields[j] end
    for _, v in ipairs(redis.call('HMGET', key, unpack(chunk))) do out[#out + 1] = v end
  end
  return out
end

-- The round's bets still open (accepted), in the order they were taken.
local function open_bets(round_bets)
  local seqs = redis.call('LRANGE', round_bets, 0, -1)
  local out = {}
  for i, raw in ipairs(hmget_all(BETS, seqs)) do
    local b = cmsgpack.unpack(raw)
    if b[10] == 'accepted' then out[#out + 1] = {seq = seqs[i], rec = b} end
  end
  return out
end

local function ended(state) return state == 'settled' or state == 'cancelled' end

-- Read once per step: a round's open bets change only when a settle or cancel ends the
-- round, and no later effect of the step reads the bets of an ended round.
local read = {}
local function open_bets_once(round_bets)
  if not read[round_bets] then read[round_bets] = open_bets(round_bets) end
  return read[round_bets]
end

-- 1. validate: a failing script keeps what it wrote, so nothing may fail after a write.
for _, e in ipairs(effects) do
  if e[1] == 'settle' then
    for _, b in ipairs(open_bets_once(KEYS[e[3]])) do
      if e[7][b.rec[5]] == nil then
        return redis.error_reply('MISSING_SPOT ' .. b.rec[5])
      end
    end
  end
end

-- 2. apply, in order.
open_ledger()
local settled = {}
local function close_bet(b, state, outcome, odds, returned, bal)
  local r = b.rec
  r[10], r[11], r[12], r[13], r[14], r[15] = state, outcome, odds, returned, tonumber(now), bal
  redis.call('HSET', BETS, b.seq, cmsgpack.pack(r))
  settled[#settled + 1] = {r[1], r[2], r[4], r[5], r[6], outcome, odds, returned, bal}
end

for _, e in ipairs(effects) do
  local kind, info = e[1], KEYS[e[2]]
  if kind == 'open' then
    redis.call('HSETNX', ACCOUNTS, 'hold:' .. e[3], 'hold')
    if redis.call('HSETNX', ROUNDS, e[3], e[4]) == 1 then
      redis.call('HSET', info, 'round_id', e[3], 'table', e[4], 'shoe_id', e[5],
                 'round_no', e[6], 'state', 'betting', 'closes_at', e[7], 'min', e[8],
                 'max', e[9], 'pair_min', e[10], 'pair_max', e[11], 'round_max', e[12],
                 'opened_at', now)
    end
  elseif kind == 'betting' then
    local state = redis.call('HGET', info, 'state')
    if state == 'betting' or state == 'paused' or state == 'closed' then
      redis.call('HSET', info, 'state', e[3], 'closes_at', e[4])
    end
  elseif kind == 'settle' then
    local state = redis.call('HGET', info, 'state')
    if state and not ended(state) then
      redis.call('HSET', info, 'state', 'settled', 'cards', e[5], 'spots', e[6],
                 'ended_at', now)
      local bets = open_bets_once(KEYS[e[3]])
      if #bets > 0 then
        local rid, held, paid, players = e[4], 0, {}, {}
        for _, b in ipairs(bets) do
          held = held + b.rec[7]
          local pid = b.rec[1]
          if not paid[pid] then paid[pid] = 0; players[#players + 1] = pid end
          paid[pid] = paid[pid] + b.rec[6] * e[7][b.rec[5]][3]
        end
        transfer('settle:' .. rid, 'hold:' .. rid, 'house', held, 'settle', rid, now)
        -- One payout per player; every bet reports the player's balance after the round.
        local after = {}
        for _, pid in ipairs(players) do
          if paid[pid] > 0 then
            local _
            _, after[pid] = transfer('payout:' .. rid .. ':' .. pid, 'house', pid, paid[pid],
                                     'payout', rid, now)
          else
            after[pid] = balance(pid)
          end
        end
        for _, b in ipairs(bets) do
          local r = b.rec
          local result = e[7][r[5]]
          close_bet(b, 'settled', result[1], result[2], r[6] * result[3], after[r[1]])
        end
      end
    end
  elseif kind == 'shoe' then
    if redis.call('HSETNX', KEYS[e[3]], e[4], e[5]) == 1 then
      redis.call('HSET', info, 'shoe_id', e[4], 'table', e[5], 'commitment', e[6],
                 'salt', e[7], 'cut_at', e[8], 'burn_card', e[9], 'burned', e[10],
                 'order', e[11], 'rounds', e[12], 'ended_at', now)
    end
  elseif kind == 'cancel' then
    local state = redis.call('HGET', info, 'state')
    if state and not ended(state) then
      redis.call('HSET', info, 'state', 'cancelled', 'reason', e[5], 'closes_at', '',
                 'ended_at', now)
      -- every refund first, then each bet records its player's balance after the round's
      -- refunds (as settlement does): one balance per player per round
      local refunded = open_bets_once(KEYS[e[3]])
      local after = {}
      for _, b in ipairs(refunded) do
        local r = b.rec
        local _
        _, after[r[1]] = transfer('refund:' .. b.seq, 'hold:' .. e[4], r[1], r[7], 'refund',
                                  e[4], now)
      end
      for _, b in ipairs(refunded) do
        local r = b.rec
        close_bet(b, 'refunded', 'refund', 0, r[7], after[r[1]])
      end
    end
  end
end

-- 3. the events (those past the log's head) and the engine's state, with the new head.
local head = redis.call('HMGET', STATE, 'epoch', 'seq')
local head_epoch, head_seq = tonumber(head[1] or '0'), tonumber(head[2] or '0')
local last_epoch, last_seq
for i = 6, #ARGV - 2, 3 do
  local epoch, seq = ARGV[i], ARGV[i + 1]
  if not (tonumber(epoch) == head_epoch and tonumber(seq) <= head_seq) then
    redis.call('XADD', EVENTS, 'MAXLEN', '~', ARGV[5], '*', 'epoch', epoch, 'seq', seq,
               'frame', ARGV[i + 2])
  end
  last_epoch, last_seq = epoch, seq
end
redis.call('HSET', STATE, 'state', ARGV[3])
if last_seq and tonumber(last_seq) > 0 then
  redis.call('HSET', STATE, 'epoch', last_epoch, 'seq', last_seq)
else
  redis.call('HSETNX', STATE, 'epoch', 0)
  redis.call('HSETNX', STATE, 'seq', 0)
end
return {'ok', settled}
"""

# KEYS: table state, table events.  ARGV: epoch, seq, limit.
# Returns {0} (cannot resume), or {1, frame, frame, ...}.
_EVENTS_AFTER_LUA = """
local head = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
if not head[1] then return {0} end
local head_epoch, head_seq = tonumber(head[1]), tonumber(head[2])
local epoch, seq, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if head_epoch ~= epoch or seq > head_seq then return {0} end
if seq == head_seq then return {1} end
local n = head_seq - seq
if n > limit then return {0} end
local rows = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', n)
if #rows ~= n then return {0} end
local out = {1}
for i = n, 1, -1 do
  local f = rows[i][2]
  local fields = {}
  for j = 1, #f, 2 do fields[f[j]] = f[j + 1] end
  if tonumber(fields.epoch) ~= epoch or tonumber(fields.seq) ~= seq + (n - i + 1) then
    return {0}  -- trimmed, or rewritten: the log no longer holds every later event
  end
  out[#out + 1] = fields.frame
end
return out
"""


# --- Python side ---------------------------------------------------------------------


class _BetRecord(msgspec.Struct, array_like=True, frozen=True):
    """A bet as the scripts store it (a msgpack array; the settlement fields come later)."""

    player_id: str
    bet_id: str
    table: str
    round_id: str
    spot: str
    amount: int
    deducted: int
    placed_at: int
    balance_at_accept: int
    state: p.BetState
    outcome: str | None = None
    odds: int | None = None
    returned: int | None = None
    settled_at: int | None = None
    balance_after: int | None = None


_BET_DECODER = msgspec.msgpack.Decoder(_BetRecord)


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _b(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _int_or_none(value: bytes | None) -> int | None:
    return None if value is None or value == b"" else int(value)


class _Keys:
    """The key names (see the module docstring)."""

    def __init__(self, prefix: str) -> None:
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
        self.deposit_ids = f"{ledger}:deposit-ids"
        self.identity = f"{ledger}:identity"
        self.bets = f"{ledger}:bets"
        self.bet_seq = f"{ledger}:bet-seq"
        self.rounds = f"{ledger}:rounds"
        self.shoes = f"{ledger}:shoes"

    @property
    def money(self) -> list[str]:
        return [self.balances, self.accounts, self.debits, self.credits, self.journal]

    def player_bet_ids(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:bet-ids"

    def player_bets(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:bets"

    def player_rounds(self, player_id: str) -> str:
        return f"{self.ledger}:player:{player_id}:rounds"

    def table(self, table: str) -> str:
        return f"{self.prefix}:table:{{{_tag(table)}}}"

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

    def shoe_info(self, table: str, shoe_id: str) -> str:
        return f"{self.table(table)}:shoe:{shoe_id}:info"


class RedisStore:
    """The :class:`~livetable.store.base.Store` contract on one Redis primary."""

    def __init__(self, client: Redis, *, prefix: str = "lt",
                 event_retention: int = DEFAULT_EVENT_RETENTION,
                 owns_client: bool = False, seal: StateSeal | None = None) -> None:
        if isinstance(client, RedisCluster):
            raise TypeError("RedisStore needs one Redis primary, not a cluster: its scripts "
                            "touch the {ledger} slot and a table's slot together (see the "
                            "module docstring); point the store at a standalone primary")
        self.redis = client
        self.keys = _Keys(prefix)
        self.event_retention = event_retention
        #: Seals engine states at rest (store/sealing.py); None only in tests.
        self.seal = seal
        #: table -> our fencing token; set by the table's lease holder (see FencedOut).
        self.fence_tokens: dict[str, int] = {}
        self._pending_bets: list[tuple[tuple[list[str], list[Any]], asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._owns_client = owns_client
        self._ensure_player_script = client.register_script(_ENSURE_PLAYER_LUA)
        self._deposit_script = client.register_script(_DEPOSIT_LUA)
        self._place_bet_script = client.register_script(_PLACE_BET_LUA)
        self._step_script = client.register_script(_STEP_LUA)
        self._events_after_script = client.register_script(_EVENTS_AFTER_LUA)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "lt",
                 event_retention: int = DEFAULT_EVENT_RETENTION,
                 max_connections: int = 64, pool_timeout: float = 10.0,
                 seal: StateSeal | None = None) -> RedisStore:
        """A store with its own connection pool (closed by :meth:`close`).

        The pool blocks when all ``max_connections`` are busy (a burst of bets waits its
        turn for up to ``pool_timeout`` seconds rather than failing).
        """
        pool = BlockingConnectionPool.from_url(url, max_connections=max_connections,
                                               timeout=pool_timeout)
        return cls(Redis.from_pool(pool), prefix=prefix, event_retention=event_retention,
                   owns_client=True, seal=seal)

    async def load_scripts(self) -> None:
        """Load every script now (a gateway does it at start: a broken script fails early,
        and the first bets do not each pay for a NOSCRIPT round trip). Calls load them
        lazily anyway, and again after a Redis restart or SCRIPT FLUSH."""
        for script in (self._ensure_player_script, self._deposit_script,
                       self._place_bet_script, self._step_script, self._events_after_script):
            script.sha = _s(await self.redis.script_load(script.script))

    # --- accounts --------------------------------------------------------------------

    async def ensure_player(self, player_id: str, name: str, initial_balance: int,
                            now: int) -> p.PlayerView:
        check_player_id(player_id)
        if initial_balance > MAX_EXACT:
            raise AmountOverflow(f"initial balance {initial_balance} exceeds {MAX_EXACT}")
        k = self.keys
        reply = await self._ensure_player_script(
            keys=[*k.money, k.names, k.created],
            args=[player_id, name, initial_balance, now])
        if reply[0] != b"ok":
            raise AccountError(f"{player_id!r} is a {_s(reply[1])} account, not a player")
        return p.PlayerView(id=player_id, name=_s(reply[1]), balance=int(reply[2]))

    async def player(self, player_id: str) -> p.PlayerView | None:
        k = self.keys
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(k.accounts, player_id)
            pipe.hget(k.names, player_id)
            pipe.hget(k.balances, player_id)
            kind, name, balance = await pipe.execute()
        if kind != b"player":
            return None
        return p.PlayerView(id=player_id, name=_s(name or b""), balance=int(balance or 0))

    async def deposit(self, transfer_id: str, player_id: str, amount: int, now: int) -> int:
        check_player_id(player_id)
        if amount > MAX_EXACT:
            raise AmountOverflow(f"deposit {amount} exceeds {MAX_EXACT}")
        k = self.keys
        reply = await self._deposit_script(
            keys=[*k.money, k.deposit_ids], args=[transfer_id, player_id, amount, now])
        if reply[0] == b"no_account":
            raise KeyError(f"no player {player_id!r}")
        if reply[0] == b"overflow":
            raise AmountOverflow(f"a deposit of {amount} would take {player_id!r} past "
                                 f"{MAX_EXACT}")
        return int(reply[1])

    # --- bets ------------------------------------------------------------------------

    async def place_bet(self, bet: BetRequest, now: int) -> p.BetAccepted | p.BetRejected:
        bad = precheck(bet)
        if bad is not None:
            return bad
        try:
            k, table = self.keys, _tag(bet.table)
        except ValueError:
            return rejected(bet.bet_id, "unknown_round")
        spot = BetSpot(bet.spot)
        call = (
            [*k.money, k.bets, k.bet_seq, k.round_info(table, bet.round_id),
             k.round_bets(table, bet.round_id), k.round_totals(table, bet.round_id),
             k.player_bet_ids(bet.player_id), k.player_bets(bet.player_id),
             k.player_rounds(bet.player_id)],
            [bet.player_id, bet.bet_id, bet.table, bet.round_id, bet.spot, bet.amount,
             spot.deducted_multiple, int(spot.is_pair), now])
        # Bets that arrive in one turn of the event loop go to Redis in one pipeline: one
        # round trip for all, each still its own atomic script.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending_bets.append((call, future))
        if len(self._pending_bets) == 1:
            loop.call_soon(self._send_pending_bets)
        reply = await future
        if reply[0] == b"accepted":
            return p.BetAccepted(bet_id=bet.bet_id, round_id=_s(reply[1]), spot=_s(reply[2]),
                                 amount=int(reply[3]), deducted=int(reply[4]),
                                 balance=int(reply[5]))
        code = _s(reply[1])
        return rejected(bet.bet_id, code, _rejection_detail(code, reply[2:]))

    def _send_pending_bets(self) -> None:
        batch, self._pending_bets = self._pending_bets, []
        task = asyncio.get_running_loop().create_task(self._pipeline_bets(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pipeline_bets(self, batch: list[tuple[tuple[list[str], list[Any]],
                                                     asyncio.Future[Any]]]) -> None:
        try:
            if len(batch) == 1:
                (keys, args), _ = batch[0]
                replies = [await self._place_bet_script(keys=keys, args=args)]
            else:
                pipe = self.redis.pipeline(transaction=False)
                for (keys, args), _ in batch:
                    await self._place_bet_script(keys=keys, args=args, client=pipe)
                replies = await pipe.execute(raise_on_error=False)
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):  # that bet's script failed; the others stand
                future.set_exception(reply)
            else:
                future.set_result(reply)

    # --- engine steps ------------------------------------------------------------------

    async def commit_step(self, table: str, state: bytes, events: list[tuple[int, int, bytes]],
                          effects: list[Effect], now: int) -> list[Settled]:
        k = self.keys
        token = self.fence_tokens.get(table)
        keys = [*k.money, k.bets, k.rounds, k.table_state(table), k.table_events(table),
                lease_token_key(table)]

        def key(name: str) -> int:  # the Lua index of a key the effects name
            keys.append(name)
            return len(keys)

        plan: list[list[Any]] = []
        for effect in effects:
            if isinstance(effect, OpenRound):
                lim = effect.limits
                plan.append(["open", key(k.round_info(effect.table, effect.round_id)),
                             effect.round_id, effect.table, effect.shoe_id, effect.round_no,
                             effect.closes_at, lim.min, lim.max, lim.pair_min, lim.pair_max,
                             lim.round_max])
            elif isinstance(effect, SetBetting):
                plan.append(["betting", key(k.round_info(effect.table, effect.round_id)),
                             effect.status, "" if effect.closes_at is None else effect.closes_at])
            elif isinstance(effect, SettleRound):
                plan.append(["settle", key(k.round_info(effect.table, effect.round_id)),
                             key(k.round_bets(effect.table, effect.round_id)), effect.round_id,
                             json.dumps(effect.cards), json.dumps(effect.spots),
                             {spot: list(result) for spot, result in effect.spots.items()}])
            elif isinstance(effect, RevealShoe):
                plan.append(["shoe", key(k.shoe_info(effect.table, effect.shoe_id)),
                             key(k.shoes), effect.shoe_id, effect.table, effect.commitment,
                             effect.salt, effect.cut_at, effect.burn_card, effect.burned,
                             json.dumps(effect.order), json.dumps(effect.rounds)])
            elif isinstance(effect, CancelRound):
                plan.append(["cancel", key(k.round_info(effect.table, effect.round_id)),
                             key(k.round_bets(effect.table, effect.round_id)), effect.round_id,
                             effect.reason])
            else:
                raise TypeError(f"unknown effect {effect!r}")
        args: list[bytes | str | int] = [
            "" if token is None else str(token), now, seal_state(self.seal, table, state),
            msgspec.msgpack.encode(plan),
            self.event_retention]
        for epoch, seq, frame in events:
            args += [epoch, seq, frame]
        try:
            reply = await self._step_script(keys=keys, args=args)
        except ResponseError as exc:
            if str(exc).startswith("MISSING_SPOT"):
                raise KeyError(str(exc).split(" ", 1)[1]) from None
            if "SAME_ACCOUNT" in str(exc):
                raise AccountError(str(exc)) from None
            raise
        if reply[0] == b"fenced":
            assert token is not None
            raise FencedOut(table, token, _s(reply[1]) or None)
        if reply[0] == b"hold_taken":
            raise AccountError(f"round {_s(reply[1])}: its escrow account already exists as "
                               f"a {_s(reply[2])} account")
        return [
            Settled(_s(pid), p.BetSettled(
                bet_id=_s(bet_id), round_id=_s(round_id), spot=_s(spot), amount=int(amount),
                outcome=_s(outcome), odds=int(odds), returned=int(returned),
                balance=int(balance)))
            for pid, bet_id, round_id, spot, amount, outcome, odds, returned, balance in reply[1]
        ]

    # --- reading -----------------------------------------------------------------------

    async def load_table(self, table: str) -> bytes | None:
        state = await self.redis.hget(self.keys.table_state(table), "state")
        return None if state is None else open_state(self.seal, table, _b(state))

    async def events_after(self, table: str, epoch: int, seq: int,
                           limit: int) -> list[bytes] | None:
        k = self.keys
        reply = await self._events_after_script(
            keys=[k.table_state(table), k.table_events(table)], args=[epoch, seq, limit])
        if reply[0] == 0:
            return None
        return [bytes(frame) for frame in reply[1:]]

    async def _bets(self, seqs: Sequence[bytes | str | int]) -> list[tuple[int, _BetRecord]]:
        if not seqs:
            return []
        raw = await self.redis.hmget(self.keys.bets, list(seqs))
        return [(int(seq), _BET_DECODER.decode(_b(data)))
                for seq, data in zip(seqs, raw, strict=True) if data is not None]

    async def settlements_for_rounds(self, player_id: str,
                                     round_ids: list[str]) -> list[p.BetSettled]:
        if not round_ids:
            return []
        lists = await self.redis.hmget(self.keys.player_rounds(player_id), round_ids)
        seqs = sorted({int(seq) for item in lists if item for seq in _s(item).split(",")})
        return [
            p.BetSettled(bet_id=b.bet_id, round_id=b.round_id, spot=b.spot, amount=b.amount,
                         outcome=b.outcome or "", odds=b.odds or 0, returned=b.returned or 0,
                         balance=b.balance_after or 0)
            for _, b in await self._bets(seqs) if b.state != "accepted"
        ]

    async def bet_record(self, player_id: str, limit: int,
                         before: str | None) -> tuple[list[p.BetRecordEntry], str | None]:
        limit = max(1, min(limit, 200))
        cursor = cursor_of(before)
        members = await self.redis.zrevrangebyscore(
            self.keys.player_bets(player_id), "+inf" if cursor is None else f"({cursor}",
            "-inf", start=0, num=limit + 1)
        bets = await self._bets([_s(m) for m in members if isinstance(m, bytes | str)])
        # A settled bet's round was settled before we read the bet, so its cards are there.
        rounds = list({(b.table, b.round_id) for _, b in bets[:limit]})
        async with self.redis.pipeline(transaction=False) as pipe:
            for table, round_id in rounds:
                pipe.hmget(self.keys.round_info(table, round_id), ["shoe_id", "round_no", "cards"])
            infos = dict(zip(rounds, await pipe.execute(), strict=True))
        entries = []
        for _, b in bets[:limit]:
            shoe_id, round_no, cards_json = infos[(b.table, b.round_id)]
            cards = json.loads(cards_json) if cards_json and b.state == "settled" else None
            position = BetSpot(b.spot).position.value
            entries.append(p.BetRecordEntry(
                bet_id=b.bet_id, table=b.table, shoe_id=_s(shoe_id or b""), round_id=b.round_id,
                round_no=int(round_no or 0), spot=b.spot, amount=b.amount, deducted=b.deducted,
                placed_at=b.placed_at, state=b.state, outcome=b.outcome, odds=b.odds,
                returned=b.returned,
                net=None if b.returned is None else b.returned - b.deducted,
                settled_at=b.settled_at, cards=cards[position] if cards else None,
                banker_cards=cards["BANKER"] if cards else None, balance_after=b.balance_after))
        next_cursor = str(bets[limit - 1][0]) if len(bets) > limit else None
        return entries, next_cursor

    async def round_view(self, round_id: str) -> dict[str, object] | None:
        table = await self.redis.hget(self.keys.rounds, round_id)
        if table is None:
            return None
        raw = await self.redis.hgetall(self.keys.round_info(_s(table), round_id))
        if not raw:
            return None
        info = {_b(name): _b(value) for name, value in raw.items()}
        cards, spots = info.get(b"cards"), info.get(b"spots")
        return {"round_id": round_id, "table": _s(info[b"table"]),
                "shoe_id": _s(info[b"shoe_id"]), "round_no": int(info[b"round_no"]),
                "state": _s(info[b"state"]), "cards": json.loads(cards) if cards else None,
                "spots": json.loads(spots) if spots else None,
                "reason": _s(info[b"reason"]) if b"reason" in info else None,
                "opened_at": int(info[b"opened_at"]),
                "ended_at": _int_or_none(info.get(b"ended_at"))}

    async def shoe_view(self, shoe_id: str) -> ShoeRecord | None:
        table = await self.redis.hget(self.keys.shoes, shoe_id)
        if table is None:
            return None
        raw = await self.redis.hgetall(self.keys.shoe_info(_s(table), shoe_id))
        if not raw:
            return None
        info = {_s(name): _s(value) for name, value in raw.items()}
        taken: list[tuple[str, int]] = [(r, n) for r, n in json.loads(info["rounds"])]
        async with self.redis.pipeline(transaction=False) as pipe:
            for round_id, _ in taken:
                pipe.hmget(self.keys.round_info(_s(table), round_id),
                           ["round_no", "state", "cards"])
            stored = await pipe.execute()
        rounds = []
        for (round_id, dealt), (round_no, state, cards) in zip(taken, stored, strict=True):
            state = _s(state) if state else "unknown"
            rounds.append(ShoeRound(
                round_id=round_id, round_no=int(round_no or 0), state=state, dealt=dealt,
                cards=json.loads(cards) if cards and state == "settled" else None))
        return ShoeRecord(shoe_id=shoe_id, table=info["table"], commitment=info["commitment"],
                          salt=info["salt"], cut_at=int(info["cut_at"]),
                          burn_card=info["burn_card"], burned=int(info["burned"]),
                          order=json.loads(info["order"]), rounds=rounds,
                          ended_at=int(info["ended_at"]))

    async def audit(self) -> AuditReport:
        """Prove the ledger, without stopping Redis for the length of the whole history.

        One MULTI/EXEC reads every balance, both running totals and the journal's last
        entry: a consistent snapshot. The journal is append-only, so replaying it up to that
        entry afterwards gives exactly the transfers the snapshot reflects. Rounds are read
        *before* the snapshot: an ended round stays ended, so its hold must be empty in the
        later snapshot, and none of its bets may still be open when we scan them after.
        """
        k, r = self.keys, self.redis
        problems: list[str] = []
        index = {_s(rid): _s(table) for rid, table in (await r.hgetall(k.rounds)).items()}
        ended: set[str] = set()
        round_ids = list(index)
        for start in range(0, len(round_ids), 1000):
            chunk = round_ids[start:start + 1000]
            async with r.pipeline(transaction=False) as pipe:
                for rid in chunk:
                    pipe.hget(k.round_info(index[rid], rid), "state")
                states = await pipe.execute()
            ended.update(rid for rid, state in zip(chunk, states, strict=True)
                         if state in (b"settled", b"cancelled"))

        async with r.pipeline(transaction=True) as pipe:
            pipe.hgetall(k.balances)
            pipe.hgetall(k.accounts)
            pipe.hgetall(k.debits)
            pipe.hgetall(k.credits)
            pipe.xrevrange(k.journal, count=1)
            raw_balances, raw_kinds, raw_debits, raw_credits, last = await pipe.execute()
        balances = {_s(a): int(v) for a, v in raw_balances.items()}
        kinds = {_s(a): _s(v) for a, v in raw_kinds.items()}
        running = defaultdict(int, {_s(a): int(v) for a, v in raw_credits.items()})
        for a, v in raw_debits.items():
            running[_s(a)] -= int(v)

        journal: dict[str, int] = defaultdict(int)
        end = _b(last[0][0]) if last and last[0][0] is not None else None
        start_id = b"-"
        while end is not None:
            rows = await r.xrange(k.journal, min=start_id, max=end, count=5000) or []
            for entry_id, fields in rows:
                if entry_id is None or fields is None:
                    continue  # the journal is never trimmed; nothing to replay
                entry = {_s(name): _s(value) for name, value in fields.items()}
                amount = int(entry["amount"])
                journal[entry["debit"]] -= amount
                journal[entry["credit"]] += amount
                start_id = b"(" + _b(entry_id)
            if not rows or start_id == b"(" + end:
                break

        total = sum(balances.values())
        if total != 0:
            problems.append(f"accounts sum to {total}, not 0")
        for account in sorted(set(balances) | set(kinds) | set(journal) | set(running)):
            held, says = balances.get(account, 0), journal.get(account, 0)
            if held != says:
                problems.append(f"account {account} holds {held} but its transfers say {says}")
            if running.get(account, 0) != says:
                problems.append(f"account {account}: running debit/credit totals say "
                                f"{running.get(account, 0)}, its transfers {says}")
            if held < 0 and kinds.get(account) in ("player", "hold"):
                problems.append(f"account {account} is negative: {held}")
        for rid in sorted(ended):
            held = balances.get(f"hold:{rid}", 0)
            if held:
                problems.append(f"hold:{rid} of an ended round still holds {held}")

        stuck = 0
        async for _, data in r.hscan_iter(k.bets, count=1000):
            bet = _BET_DECODER.decode(_b(data))
            if bet.state == "accepted" and bet.round_id in ended:
                stuck += 1
        if stuck:
            problems.append(f"{stuck} bets of ended rounds are neither settled nor refunded")
        return AuditReport(ok=not problems, total=total, deposits=-balances.get("external", 0),
                           house=balances.get("house", 0), problems=problems)

    async def identity(self, create: bool = False) -> str | None:
        if create:
            await self.redis.set(self.keys.identity, uuid.uuid4().hex, nx=True)
        value = await self.redis.get(self.keys.identity)
        return None if value is None else _s(value)

    async def close(self) -> None:
        if self._owns_client:
            await self.redis.aclose()


def _rejection_detail(code: str, values: list[int]) -> str | None:
    """The same detail the SQLite store gives (the browser shows it after the message)."""
    if code == "below_min":
        return f"(minimum {values[0]})"
    if code == "above_max":
        return f"(maximum {values[0]} per spot)"
    if code == "round_limit":
        return f"(at most {values[0]})"
    if code == "insufficient_funds":
        return f"(needs {values[0]}, balance {values[1]})"
    return None

