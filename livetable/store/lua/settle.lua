-- Settling and refunding a round, one bounded chunk at a time (store/bets.py: settle_chunk
-- says what a chunk moves; the SQLite store does the same in Python). KEYS[7] is the bets
-- hash in every script that settles.
local BETS = KEYS[7]

-- The next chunk of the round's bets: whole players (all of a player's bets of the round
-- together, so one payout per player per round and one balance after), about `limit` bets,
-- players in the order they first bet. Each bet is settled (or refunded) once, its record
-- updated. The round's info keeps a cursor into its list of players, moved in the same
-- script: a crash between two chunks loses nothing and settles nothing twice. When no
-- player is left the round is settled / cancelled and leaves the table's pending set.
-- Returns the chunk's bet_settled rows and whether bets remain. The scripts reply with the
-- rows packed as one msgpack string, which the Python side decodes straight into its
-- Settled structs: Redis turning 250 rows of 9 values into RESP, and redis-py turning
-- them back into 2,250 Python objects, cost more than the settling itself.
local function close_chunk(INFO, PLAYERS, BY_PLAYER, PENDING, rid, now, limit)
  local r = redis.call('HMGET', INFO, 'state', 'results', 'cursor')
  local state = r[1]
  if state ~= 'settling' and state ~= 'refunding' then return {}, false end
  local cursor = tonumber(r[3] or '0')
  local pids = redis.call('LRANGE', PLAYERS, cursor, cursor + limit - 1)
  local seqs, taken = {}, 0
  if #pids > 0 then
    for i, list in ipairs(hmget_all(BY_PLAYER, pids)) do
      for seq in string.gmatch(list, '[^,]+') do seqs[#seqs + 1] = seq end
      taken = i
      if #seqs >= limit then break end
    end
  end
  local out = {}
  if #seqs > 0 then
    local bets = {}
    for i, raw in ipairs(hmget_all(BETS, seqs)) do
      local b = cmsgpack.unpack(raw)
      if b[10] == 'accepted' then bets[#bets + 1] = {seq = seqs[i], rec = b} end
    end
    local hold, after = 'hold:' .. rid, {}
    local records = {}
    local function close_bet(b, bet_state, outcome, odds, returned)
      local rec = b.rec
      local bal = after[rec[1]]
      rec[10], rec[11], rec[12], rec[13], rec[14], rec[15] =
        bet_state, outcome, odds, returned, tonumber(now), bal
      records[#records + 1] = b.seq
      records[#records + 1] = cmsgpack.pack(rec)
      out[#out + 1] = {rec[1], rec[2], rec[4], rec[5], rec[6], outcome, odds, returned, bal}
    end
    if #bets > 0 and state == 'settling' then
      local results = cmsgpack.unpack(r[2])
      local first, held, paid, firsts, players = nil, 0, {}, {}, {}
      for _, b in ipairs(bets) do
        local seq = tonumber(b.seq)
        if not first or seq < first then first = seq end
        held = held + b.rec[7]
        local pid = b.rec[1]
        if not paid[pid] then paid[pid] = 0; firsts[pid] = seq; players[#players + 1] = pid end
        if seq < firsts[pid] then firsts[pid] = seq end
        paid[pid] = paid[pid] + b.rec[6] * results[b.rec[5]][3]
      end
      transfer('settle:' .. int(first), hold, 'house', held, 'settle', rid, now)
      for _, pid in ipairs(players) do
        if paid[pid] > 0 then
          local _
          _, after[pid] = transfer('payout:' .. int(firsts[pid]), 'house', pid, paid[pid],
                                   'payout', rid, now)
        else
          after[pid] = balance(pid)
        end
      end
      for _, b in ipairs(bets) do
        local result = results[b.rec[5]]
        close_bet(b, 'settled', result[1], result[2], b.rec[6] * result[3])
      end
    elseif #bets > 0 then
      for _, b in ipairs(bets) do
        local _
        _, after[b.rec[1]] = transfer('refund:' .. b.seq, hold, b.rec[1], b.rec[7], 'refund',
                                      rid, now)
      end
      for _, b in ipairs(bets) do close_bet(b, 'refunded', 'refund', 0, b.rec[7]) end
    end
    if #records > 0 then hset_all(BETS, records) end
  end
  cursor = cursor + taken
  local more = cursor < redis.call('LLEN', PLAYERS)
  if more then
    redis.call('HSET', INFO, 'cursor', cursor)
  else
    redis.call('HSET', INFO, 'cursor', cursor,
               'state', state == 'settling' and 'settled' or 'cancelled')
    redis.call('SREM', PENDING, rid)
  end
  return out, more
end
