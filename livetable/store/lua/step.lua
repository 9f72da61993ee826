-- One engine step, all or nothing.
-- KEYS: ledger(6), bets, rounds index, table state, table events, lease token, pending
--       rounds, then the keys the effects name by index (round info, round bets).
-- ARGV: fencing token ('' = none), now, engine state (sealed), effects (msgpack), event
--       retention, chunk size, the head where this store left the table (epoch, seq; '' ''
--       = not known), the table's public snapshot (what a gateway catches up from: it holds
--       no shoe key; '' = none), then the events flat: epoch, seq, frame, epoch, seq, ...
-- Refused, writing nothing: {'fenced', holder}, {'hold_taken', round, kind},
--   {'out_of_step', head epoch, head seq} (the step does not follow on: store/base.py's
--   out_of_step, mirrored here), {'round_state', effect index, state} (the round is not
--   in the state the effect expects).
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

-- 0. the step follows on from the stored head (store/base.py: out_of_step)
local head = redis.call('HMGET', STATE, 'epoch', 'seq')
local head_epoch, head_seq = tonumber(head[1] or '0'), tonumber(head[2] or '0')
if head[1] then
  if #ARGV >= 12 then
    local epoch, first = tonumber(ARGV[10]), tonumber(ARGV[11])
    if not ((epoch == head_epoch and first == head_seq + 1)
            or (first == 1 and (head_seq == 0 or epoch > head_epoch))) then
      return {'out_of_step', head_epoch, head_seq}
    end
  elseif ARGV[7] ~= '' and (tonumber(ARGV[7]) ~= head_epoch
                            or tonumber(ARGV[8]) ~= head_seq) then
    return {'out_of_step', head_epoch, head_seq}
  end
end

local OPEN = {betting = true, paused = true, closed = true}
-- ... and each round is in the state its effect expects: a round opens once; betting is
-- set, and a round settled or cancelled, only while it is open. Effects apply in order, so
-- a round's state is followed through the step's earlier effects.
local round_states = {}
for i, e in ipairs(effects) do
  local kind, info = e[1], KEYS[e[2]]
  if kind == 'open' or kind == 'betting' or kind == 'settle' or kind == 'cancel' then
    local state = round_states[info]
    if state == nil then state = redis.call('HGET', info, 'state') or false end
    if kind == 'open' then
      if state then return {'round_state', i, state} end
      state = 'betting'
    elseif not OPEN[state] then
      return {'round_state', i, state or ''}
    elseif kind == 'betting' then
      state = e[3]
    else
      state = kind == 'settle' and 'settling' or 'refunding'
    end
    round_states[info] = state
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
    if e[3] == 'closed' then  -- keep the deadline, as engine/bets.py's closed_deadline
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

-- 3. the events (they follow the log's head: checked above) and the engine's state, with
-- the new head.
local last_epoch, last_seq
for i = 10, #ARGV - 2, 3 do
  local epoch, seq = ARGV[i], ARGV[i + 1]
  redis.call('XADD', EVENTS, 'MAXLEN', '~', ARGV[5], '*', 'epoch', epoch, 'seq', seq,
             'frame', ARGV[i + 2])
  last_epoch, last_seq = epoch, seq
end
redis.call('HSET', STATE, 'state', ARGV[3])
if ARGV[9] ~= '' then redis.call('HSET', STATE, 'snapshot', ARGV[9]) end
if last_seq and tonumber(last_seq) > 0 then
  redis.call('HSET', STATE, 'epoch', last_epoch, 'seq', last_seq)
else
  redis.call('HSETNX', STATE, 'epoch', 0)
  redis.call('HSETNX', STATE, 'seq', 0)
end
-- the settled rows as one msgpack array of arrays (see settle.lua)
return {'ok', cmsgpack.pack(settled)}
