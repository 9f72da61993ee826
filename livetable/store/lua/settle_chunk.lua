-- KEYS: ledger(6), bets, lease token, pending rounds, round info, round players, round bets
--       by player.
-- ARGV: fencing token ('' = none), round, now, chunk size.
local LEASE, PENDING, INFO, PLAYERS, BY_PLAYER = KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local fence = ARGV[1]
if fence ~= '' then
  local holder = redis.call('GET', LEASE)
  if holder ~= fence then return {'fenced', holder or ''} end
end
local out, more = close_chunk(INFO, PLAYERS, BY_PLAYER, PENDING, ARGV[2], ARGV[3],
                              tonumber(ARGV[4]))
-- the rows as one msgpack array of arrays (see settle.lua)
return {'ok', cmsgpack.pack(out), more and 1 or 0}
