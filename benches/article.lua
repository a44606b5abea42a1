-- A plain token bucket in Lua, as blog posts publish it: the tokens left and the last time in a
-- hash (HGET, HSET), refilled on the client's clock. The baseline of benches/redis.rs and
-- scripts/redis-script-cost.
local token = KEYS[1]
local now = tonumber(ARGV[1])

local rate = tonumber(ARGV[2])
local capacity = tonumber(ARGV[3])

local lastTime = tonumber(redis.call('HGET', token, 'last_time') or 0)
local tokensLeft = tonumber(redis.call('HGET', token, 'tokens_left') or 0)

tokensLeft = math.min(capacity, tokensLeft + (now - lastTime) * rate)
redis.call('HSET', token, 'last_time', now)
if tokensLeft >= 1 then
redis.call('HSET', token, 'tokens_left', tokensLeft - 1)
return true
end

return false
