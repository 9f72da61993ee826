-- Give a table's lease up, if it is still ours (server/scaleout.py, LeasedTables: a
-- graceful stop, or a table that could not start). KEYS: lease owner. ARGV: owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
