-- A plain sliding window log in Lua, as blog posts publish it: a sorted set of request times
-- trimmed with ZREMRANGEBYSCORE and counted with ZCARD. The baseline of the sliding-log
-- comparison in benches/redis.rs.
local token = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])

local clearBefore = now - window
redis.call('ZREMRANGEBYSCORE', token, 0, clearBefore)

local amount = redis.call('ZCARD', token)
if amount < limit then
redis.call('ZADD', token, now, now)
end
redis.call('EXPIRE', token, window)

return limit - amount
