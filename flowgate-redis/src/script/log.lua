-- flowgate: the sliding window log in Redis, exact in every window of its length: a sorted set
-- of request times, trimmed on every call, never holding more than `limit` of them.
--
-- KEYS[1]  the log: a sorted set whose scores are request times in µs. Members are unique, so
--          that requests at one time each count: 'time:k' for the k-th time recorded while the
--          log counts k - 1 (within one µs the count only grows, so no member repeats).
-- ARGV[1]  '' to decide at the server's TIME (the default), or a reading in µs (tests:
--          `RedisBackend::client_time`)
-- ARGV[2]  n, the requests to record (0 <= n <= limit: checked by the client)
-- ARGV[3]  the window, in µs
-- ARGV[4]  the limit: at most this many times in any window
--
-- A time t counts at now while t + window > now (as in process: a slot is free again at
-- t + window). A request of n is admitted when the times that count and n are at most the
-- limit; it is then recorded n times at now. Replies: {1, repaired, count, reset} when
-- admitted, {0, repaired, count, reset, wait} when refused (nothing recorded): count is the
-- times that count after the decision, reset when the newest of them leaves the window (0 if
-- none), wait when the oldest time the request needs gone leaves it (at least 1), all in µs.
-- A key of another type is counted as repaired and replaced by a full log (limit times at now:
-- refused for one window, never admitting more).
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local n, window, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl = math.ceil(window / 1000) + 1

-- Records k times at now, after the `count` that count.
local function record(k, count)
  local args = {}
  for j = 1, k do
    args[#args + 1] = now
    args[#args + 1] = string.format('%.0f:%d', now, count + j)
    if #args >= 2000 or j == k then
      redis.call('ZADD', KEYS[1], unpack(args))
      args = {}
    end
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
end

local repaired = 0
if not pcall(redis.call, 'ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window) then
  -- A key of another type: replaced by a full log.
  repaired = 1
  redis.call('DEL', KEYS[1])
  record(limit, 0)
end
local count = redis.call('ZCARD', KEYS[1])

-- When the newest time that counts leaves the window.
local function reset()
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if newest[2] == nil then return 0 end
  return tonumber(newest[2]) + window - now
end

if count + n <= limit then
  if n == 0 then return {1, repaired, count, reset()} end
  record(n, count)
  -- The newest time is now's.
  return {1, repaired, count + n, window}
end
local need = count + n - limit
local leaving = redis.call('ZRANGE', KEYS[1], need - 1, need - 1, 'WITHSCORES')
local wait = tonumber(leaving[2]) + window - now
if wait < 1 then wait = 1 end
return {0, repaired, count, reset(), wait}
