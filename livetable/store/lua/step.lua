-- One engine step, all or nothing.
-- KEYS: ledger(6), bets, rounds index, table state, table events, lease token, pending
--       rounds, then the keys the effects name by index (round info, round bets).
-- ARGV: fencing token ('' = none), now, engine state (sealed), effects (msgpack), event
--       retention, chunk size, the table's public snapshot (what a gateway catches up
--       from: it holds no shoe key), then the events flat: epoch, seq, frame, ...
-- Effects: {'open', info, round, table, shoe, round_no, closes_at, min, max, pair_min,
--            pair_max, round_max}
--          {'betting', info, status, closes_at or ''}
--          {'settle', info, players, round, cards json, spots json,
--            {spot: {outcome, odds, mult}}, bets by player}
--          {'cancel', info, players, round, reason, bets by player}
--          {'shoe', info, shoes index, shoe, table, commitment, salt, cut_at, burn_card,
--           burned, order json, rounds json}
local ROUNDS, STATE, EVENTS, LEASE, PENDING = KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local fence, now, limit = ARGV[1], ARGV[2], tonumber(ARGV[6])
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

local function ended(state)
  return state == 'settled' or state == 'cancelled' or state == 'settling'
    or state == 'refunding'
end

-- 1. validate: a failing script keeps what it wrote, so nothing may fail after a write.
-- The spots bet in a round are marked in its info ('bet:<spot>') as bets are taken.
local SPOTS = {'P1', 'P2', 'P3', 'P4', 'P5', 'P1_PAIR', 'P2_PAIR', 'P3_PAIR', 'P4_PAIR',
               'P5_PAIR'}
for _, e in ipairs(effects) do
  if e[1] == 'settle' then
    local fields = {}
    for i, spot in ipairs(SPOTS) do fields[i] = 'bet:' .. spot end
    local bet = redis.call('HMGET', KEYS[e[2]], unpack(fields))
    for i, spot in ipairs(SPOTS) do
      if bet[i] and e[7][spot] == nil then
        return redis.error_reply('MISSING_SPOT ' .. spot)
      end
    end
  end
end

-- 2. apply, in order.
open_ledger()
local settled = {}
local function add(rows)
  for _, row in ipairs(rows) do settled[#settled + 1] = row end
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
    local r = redis.call('HMGET', info, 'state', 'closes_at')
    local state, closes_at = r[1], e[4]
    if e[3] == 'closed' then  -- keep the deadline, as store/bets.py's closed_deadline
      closes_at = ''
      if r[2] and r[2] ~= '' then closes_at = int(math.min(tonumber(r[2]), tonumber(now))) end
    end
    if state == 'betting' or state == 'paused' or state == 'closed' then
      redis.call('HSET', info, 'state', e[3], 'closes_at', closes_at)
    end
  elseif kind == 'settle' then
    local state = redis.call('HGET', info, 'state')
    if state and not ended(state) then
      redis.call('HSET', info, 'state', 'settling', 'cards', e[5], 'spots', e[6],
                 'results', cmsgpack.pack(e[7]), 'ended_at', now)
      redis.call('SADD', PENDING, e[4])
      add(close_chunk(info, KEYS[e[3]], KEYS[e[8]], PENDING, e[4], now, limit))
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
      redis.call('HSET', info, 'state', 'refunding', 'reason', e[5], 'closes_at', '',
                 'ended_at', now)
      redis.call('SADD', PENDING, e[4])
      add(close_chunk(info, KEYS[e[3]], KEYS[e[6]], PENDING, e[4], now, limit))
    end
  end
end

-- 3. the events (those past the log's head) and the engine's state, with the new head.
local head = redis.call('HMGET', STATE, 'epoch', 'seq')
local head_epoch, head_seq = tonumber(head[1] or '0'), tonumber(head[2] or '0')
local last_epoch, last_seq
for i = 8, #ARGV - 2, 3 do
  local epoch, seq = ARGV[i], ARGV[i + 1]
  if not (tonumber(epoch) == head_epoch and tonumber(seq) <= head_seq) then
    redis.call('XADD', EVENTS, 'MAXLEN', '~', ARGV[5], '*', 'epoch', epoch, 'seq', seq,
               'frame', ARGV[i + 2])
  end
  last_epoch, last_seq = epoch, seq
end
redis.call('HSET', STATE, 'state', ARGV[3])
if ARGV[7] ~= '' then redis.call('HSET', STATE, 'snapshot', ARGV[7]) end
if last_seq and tonumber(last_seq) > 0 then
  redis.call('HSET', STATE, 'epoch', last_epoch, 'seq', last_seq)
else
  redis.call('HSETNX', STATE, 'epoch', 0)
  redis.call('HSETNX', STATE, 'seq', 0)
end
-- the settled rows as one msgpack array of arrays (see settle.lua)
return {'ok', cmsgpack.pack(settled)}
