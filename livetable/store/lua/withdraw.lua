-- KEYS: ledger(6), deposit-ids, withdraw-ids.
-- ARGV: transfer id, account, amount, now, against (a deposit id, '' = none).
-- A seamless wallet's money leaving livetable's books (docs/operator.md): once by id; with
-- `against`, only if that deposit was made; never below a balance of 0.
local DEPOSIT_IDS, WITHDRAW_IDS = KEYS[7], KEYS[8]
local tid, account, amount, now, against = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
if redis.call('HGET', ACCOUNTS, account) ~= 'player' then return {'no_account'} end
if amount > 0 and not redis.call('HGET', WITHDRAW_IDS, tid) then
  if against ~= '' and not redis.call('HGET', DEPOSIT_IDS, against) then return {'no_deposit'} end
  if balance(account) < amount then return {'short', balance(account)} end
  redis.call('HSET', WITHDRAW_IDS, tid, account)
  transfer('withdraw:' .. tid, account, 'external', amount, 'withdraw', account, now)
end
return {'ok', balance(account)}
