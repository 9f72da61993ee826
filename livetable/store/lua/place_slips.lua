-- Many players' slips in one call: each judged and applied in turn, as engine/bets.py's
-- judge_slip does (the same checks in the same order, the same codes and detail values).
-- KEYS: ledger(6), bets, bet-seq, slip-seq, then 9 per slip from KEYS[base]: round info,
--       round bets, round totals, player bet-ids, player bets, player rounds, player slips,
--       round players, round bets by player.
-- ARGV[1]: msgpack list of slips {base, player, slip_id ('' = a place_bet), table, round,
--          now, {{bet_id, spot, amount, deducted multiple, is_pair (0/1)}, ...}[,
--          {min, max, pair_min, pair_max, round_max}: the session's limits, in place of
--          the round's]}.
-- A bet record: {player, bet_id, table, round, spot, amount, deducted, placed_at,
--                balance_at_accept, state[, outcome, odds, returned, settled_at, balance_after]}
-- Answers, one per slip: {'accepted', round, balance, {{bet_id, spot, amount, deducted}...}}
--                     or {'rejected', code, bet_id or '', detail values...}
local BET_SEQ, SLIP_SEQ = KEYS[8], KEYS[9]
local BETS = KEYS[7]

local function replay(taken)
  local bets, bal = {}, 0
  for i, t in ipairs(taken) do
    bets[i] = {t[2], t[5], t[6], t[7]}
    bal = t[9]
  end
  return {'accepted', taken[1][4], bal, bets}
end

local function same(rid, bets, taken)
  if #bets ~= #taken then return false end
  for i, b in ipairs(bets) do
    local t = taken[i]
    if t[2] ~= b[1] or t[4] ~= rid or t[5] ~= b[2] or t[6] ~= b[3] then return false end
  end
  return true
end

local function take(s)
  local base = s[1]
  local INFO, ROUND_BETS, TOTALS = KEYS[base], KEYS[base + 1], KEYS[base + 2]
  local BET_IDS, RECORD, PLAYER_ROUNDS, SLIPS =
    KEYS[base + 3], KEYS[base + 4], KEYS[base + 5], KEYS[base + 6]
  local PLAYERS, BY_PLAYER = KEYS[base + 7], KEYS[base + 8]
  local pid, slip_id, tbl, rid, now, bets = s[2], s[3], s[4], s[5], s[6], s[7]

  -- 1. a repeated slip: its first answer, or duplicate_slip_id
  if slip_id ~= '' then
    local prior = redis.call('HGET', SLIPS, slip_id)
    if prior then
      local taken = {}
      for i, raw in ipairs(hmget_all(BETS, cmsgpack.unpack(prior))) do
        taken[i] = cmsgpack.unpack(raw)
      end
      if same(rid, bets, taken) then return replay(taken) end
      return {'rejected', 'duplicate_slip_id', ''}
    end
  end
  -- 2. bet ids used before (a place_bet repeated: its first answer)
  for _, b in ipairs(bets) do
    local seq = redis.call('HGET', BET_IDS, b[1])
    if seq then
      local t = cmsgpack.unpack(redis.call('HGET', BETS, seq))
      if slip_id == '' and same(rid, {b}, {t}) then return replay({t}) end
      return {'rejected', 'duplicate_bet_id', b[1]}
    end
  end
  -- 3. the round, by the time the slip reached the gateway
  local r = redis.call('HMGET', INFO, 'state', 'closes_at', 'min', 'max', 'pair_min',
                       'pair_max', 'round_max')
  if not r[1] then return {'rejected', 'unknown_round', ''} end
  if r[1] == 'paused' then return {'rejected', 'paused', ''} end
  -- in time: taken even after the close step, until the round starts settling
  if (r[1] ~= 'betting' and r[1] ~= 'closed') or not r[2] or r[2] == ''
      or now >= tonumber(r[2]) then
    return {'rejected', 'betting_closed', ''}
  end
  -- 4. each bet against the limits (the session's, else the round's), counting the slip's
  --    earlier bets
  local own = s[8]
  if own then r[3], r[4], r[5], r[6], r[7] = own[1], own[2], own[3], own[4], own[5] end
  local round_field = '*:' .. pid
  local first_in_round = not redis.call('HGET', TOTALS, round_field)
  local on_round = tonumber(redis.call('HGET', TOTALS, round_field) or '0')
  local round_max = tonumber(r[7])
  local on_spot, deducted, total = {}, {}, 0
  for i, b in ipairs(bets) do
    local low, high = tonumber(r[3]), tonumber(r[4])
    if b[5] == 1 then low, high = tonumber(r[5]), tonumber(r[6]) end
    if b[3] < low then return {'rejected', 'below_min', b[1], low} end
    local spot = b[2]
    local now_on = on_spot[spot] or tonumber(redis.call('HGET', TOTALS, spot .. ':' .. pid)
                                             or '0')
    if now_on + b[3] > high then return {'rejected', 'above_max', b[1], high} end
    local cost = b[3] * b[4]
    if on_round + cost > round_max then
      return {'rejected', 'round_limit', b[1], round_max}
    end
    on_spot[spot] = now_on + b[3]
    on_round = on_round + cost
    deducted[i] = cost
    total = total + cost
  end
  -- 5. the account and its balance
  if redis.call('HGET', ACCOUNTS, pid) ~= 'player' then
    return {'rejected', 'not_a_player', ''}
  end
  local bal = balance(pid)
  if bal < total then return {'rejected', 'insufficient_funds', '', total, bal} end

  -- taken: one transfer for the slip, then each bet
  local hold = 'hold:' .. rid
  redis.call('HSETNX', ACCOUNTS, hold, 'hold')  -- opened with the round; kept for old rounds
  -- Transfer ids name the slip by its seq: player and slip ids are free text, so
  -- "slip:<player>:<slip_id>" could read the same for two slips.
  local after = transfer('slip:' .. int(redis.call('INCR', SLIP_SEQ)), pid, hold, total,
                         'bet', rid, now)
  local answer, seqs = {}, {}
  for i, b in ipairs(bets) do
    local seq = int(redis.call('INCR', BET_SEQ))
    seqs[i] = seq
    redis.call('HSET', BETS, seq, cmsgpack.pack({pid, b[1], tbl, rid, b[2], b[3], deducted[i],
                                                 now, after, 'accepted'}))
    redis.call('RPUSH', ROUND_BETS, seq)
    redis.call('HINCRBY', TOTALS, b[2] .. ':' .. pid, b[3])
    redis.call('HSET', BET_IDS, b[1], seq)
    redis.call('ZADD', RECORD, seq, seq)
    redis.call('HSET', INFO, 'bet:' .. b[2], 1)  -- the spots bet (step.lua validates by them)
    answer[i] = {b[1], b[2], b[3], deducted[i]}
  end
  redis.call('HINCRBY', TOTALS, round_field, total)
  local joined = table.concat(seqs, ',')
  local listed = redis.call('HGET', PLAYER_ROUNDS, rid)
  redis.call('HSET', PLAYER_ROUNDS, rid, listed and (listed .. ',' .. joined) or joined)
  -- the round's players in order, and each one's bets: settlement goes player by player
  if first_in_round then redis.call('RPUSH', PLAYERS, pid) end
  listed = redis.call('HGET', BY_PLAYER, pid)
  redis.call('HSET', BY_PLAYER, pid, listed and (listed .. ',' .. joined) or joined)
  if slip_id ~= '' then redis.call('HSET', SLIPS, slip_id, cmsgpack.pack(seqs)) end
  return {'accepted', rid, after, answer}
end

open_ledger()
local answers = {}
for i, s in ipairs(cmsgpack.unpack(ARGV[1])) do answers[i] = take(s) end
return answers
