-- The ledger, shared by every money script: KEYS[1..6] are always these.
local BALANCES, ACCOUNTS, DEBITS, CREDITS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local JOURNAL, TRANSFERS = KEYS[5], KEYS[6]
local MAX_EXACT = 9007199254740991

local function balance(account)
  return tonumber(redis.call('HGET', BALANCES, account) or '0')
end

-- One transfer, double entry: both balances, both running totals and a journal line.
-- Applied once per id, as SQLite's transfers table does (its primary key): a transfer
-- whose id was applied before, or whose amount is not positive, moves nothing.
-- Returns the debit and the credit account's balances after it.
local function transfer(id, debit, credit, amount, kind, ref, at)
  if debit == credit then  -- before any write: it would log money that never moved
    error('SAME_ACCOUNT transfer ' .. id .. ' debits and credits ' .. debit)
  end
  if amount <= 0 or redis.call('SADD', TRANSFERS, id) == 0 then
    return balance(debit), balance(credit)
  end
  local d = redis.call('HINCRBY', BALANCES, debit, -amount)
  redis.call('HINCRBY', DEBITS, debit, amount)
  local c = redis.call('HINCRBY', BALANCES, credit, amount)
  redis.call('HINCRBY', CREDITS, credit, amount)
  redis.call('XADD', JOURNAL, '*', 'id', id, 'debit', debit, 'credit', credit,
             'amount', amount, 'kind', kind, 'ref', ref, 'at', at)
  return d, c
end

local function int(n) return string.format('%d', n) end

-- The two accounts that exist from the start (so that no player can take their ids).
local function open_ledger()
  redis.call('HSETNX', ACCOUNTS, 'house', 'house')
  redis.call('HSETNX', ACCOUNTS, 'external', 'external')
end

-- HMGET of many fields, a few hundred at a time (Lua's unpack has a stack limit).
local function hmget_all(key, fields)
  local out = {}
  for i = 1, #fields, 500 do
    local chunk = {}
    for j = i, math.min(i + 499, #fields) do chunk[#chunk + 1] = fields[j] end
    for _, v in ipairs(redis.call('HMGET', key, unpack(chunk))) do out[#out + 1] = v end
  end
  return out
end

-- HSET of many field/value pairs (a flat list), a few hundred pairs at a time.
local function hset_all(key, pairs)
  for i = 1, #pairs, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #pairs) do chunk[#chunk + 1] = pairs[j] end
    redis.call('HSET', key, unpack(chunk))
  end
end
