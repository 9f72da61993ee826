-- A round's hold and what its open bets took, read together (the audit checks that they
-- agree: a slip moves both in one script, a settlement chunk too).
-- KEYS: balances, bets, the round's bet seqs. ARGV: the round's hold account.
-- Returns {held, taken by the open bets}.
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local open = 0
local seqs = redis.call('LRANGE', KEYS[3], 0, -1)
for i = 1, #seqs, 1000 do
  local rows = redis.call('HMGET', KEYS[2], unpack(seqs, i, math.min(i + 999, #seqs)))
  for _, raw in ipairs(rows) do
    if raw then
      local b = cmsgpack.unpack(raw)
      if b[10] == 'accepted' then open = open + b[7] end
    end
  end
end
return {held, open}
