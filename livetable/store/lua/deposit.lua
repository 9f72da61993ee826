-- KEYS: ledger(6), deposit-ids.  ARGV: transfer id, account, amount, now.
local DEPOSIT_IDS = KEYS[7]
local tid, account, amount, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
open_ledger()
if redis.call('HGET', ACCOUNTS, account) ~= 'player' then return {'no_account'} end
if amount > 0 and not redis.call('HGET', DEPOSIT_IDS, tid) then
  if balance(account) + amount > MAX_EXACT or amount - balance('external') > MAX_EXACT then
    return {'overflow', balance(account)}
  end
  redis.call('HSET', DEPOSIT_IDS, tid, account)
  transfer('deposit:' .. tid, 'external', account, amount, 'deposit', account, now)
end
return {'ok', balance(account)}
