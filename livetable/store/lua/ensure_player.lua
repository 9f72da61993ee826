-- KEYS: ledger(6), names, created.  ARGV: player, name, initial balance, now.
local NAMES, CREATED = KEYS[7], KEYS[8]
local pid, name, initial, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
open_ledger()
if redis.call('HSETNX', ACCOUNTS, pid, 'player') == 1 then
  redis.call('HSET', NAMES, pid, name)
  redis.call('HSET', CREATED, pid, now)
  redis.call('HSETNX', BALANCES, pid, 0)
  if initial > 0 then
    transfer('open:' .. pid, 'external', pid, initial, 'deposit', pid, now)
  end
else
  local kind = redis.call('HGET', ACCOUNTS, pid)
  if kind ~= 'player' then return {'not_a_player', kind} end
  if name ~= '' then redis.call('HSET', NAMES, pid, name) end
end
return {'ok', redis.call('HGET', NAMES, pid) or '', balance(pid)}
