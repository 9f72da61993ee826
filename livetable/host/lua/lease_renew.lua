-- Renew a table's lease we hold (server/scaleout.py, LeasedTables).
-- KEYS: lease owner, lease token. ARGV: owner, ttl (ms), our lease token.
-- Returns 1 when the lease is ours for ttl more, 0 when another engine took it.
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
-- Lapsed (a starved event loop renewed late) but nobody took it since: the lease token
-- is still ours, so no other engine drove the table. Take it back, keep the round.
if not owner and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
