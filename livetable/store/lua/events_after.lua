-- KEYS: table state, table events.  ARGV: epoch, seq, limit.
-- Returns {0} (cannot resume), or {1, frame, frame, ...}.
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
