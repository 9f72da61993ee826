-- Take a table's lease if nobody holds it (server/scaleout.py, LeasedTables).
-- KEYS: lease owner, lease counter, lease token. ARGV: owner, ttl (ms).
-- Returns the new lease token, or 0 when another engine holds the lease.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[3], token)
  return token
end
return 0
