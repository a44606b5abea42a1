-- flowgate: GCRA over one or more buckets, decided all or nothing, in one call.
--
-- The arithmetic is flowgate's in-process schedule (src/algorithm/schedule.rs) in integer
-- microseconds. Lua's numbers are doubles: every value here stays below 2^53 (the client checks
-- each quota's window against that, and requests past the horizon are refused), so every
-- operation is exact.
--
-- KEYS[i]  bucket i: its theoretical arrival time (TAT), in microseconds, as a decimal string;
--          absent means full. All keys of one call share one hash tag.
-- ARGV[1]  the reading to decide at, in microseconds, or '' for the server's TIME (tests only)
-- ARGV[2]  n, the cells to take (0 <= n <= every bucket's burst: checked by the client)
-- ARGV[3]  want >= n: take up to `want` cells if every bucket has them, at least n (a lease)
-- ARGV[4]  give, cells given back to every bucket before deciding (an expired lease's rest)
-- ARGV[2i+3], ARGV[2i+4]  bucket i's emission interval T and its window tau = burst * T
--
-- Returns {1, now, repaired, granted, debt_1, ..., debt_m} when every bucket admitted n cells
-- (granted: the cells taken, n <= granted <= want; debt_i: how far bucket i's new TAT lies
-- ahead of now), or {0, now, repaired, i, debt, wait} when bucket i
-- refused with the longest wait (the first on a tie; wait -1: never, past the horizon); debt is
-- its TAT (clamped) less now. repaired counts buckets whose value was not a TAT (overwritten by
-- something else): each is taken as fully booked and rewritten.
local HORIZON = 9007199254740991 -- 2^53 - 1

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
local n = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local give = tonumber(ARGV[4])
local m = #KEYS

-- Per call, one table of TATs (as they stand after repair, clamp and give-back) and, only when
-- a bucket needs writing on a refusal, one of flags: every table is garbage the server collects.
local tats = {}
local writes
local repaired = 0
local refused, worst, wait_of = 0, -1, 0

for i = 1, m do
  local interval = tonumber(ARGV[2 * i + 3])
  local window = tonumber(ARGV[2 * i + 4])
  local latest = now + window
  local raw = redis.pcall('GET', KEYS[i])
  local tat = 0
  local write = false
  if type(raw) == 'string' then
    if #raw <= 16 and string.match(raw, '^%d+$') then
      tat = tonumber(raw)
    else
      tat = nil
    end
  elseif raw ~= false then
    -- An error reply (a key of another type) or anything else that is not a string.
    tat = nil
  end
  if tat == nil then
    repaired = repaired + 1
    tat = latest
    write = true
  elseif tat > latest then
    -- Booked further ahead than any reading explains: the clock stepped back. Fully booked as
    -- of now, as in-process (the script's reading is never stale: it runs atomically).
    tat = latest
    write = true
  end
  if give > 0 and tat > now then
    -- An expired lease's unused cells: the TAT moves back by at most give * T and never below
    -- now, so no more is freed than was given (as a refund in-process).
    tat = tat - give * interval
    if tat < now then tat = now end
    write = true
  end
  if write then
    writes = writes or {}
    writes[i] = true
  end
  tats[i] = tat

  local base = tat
  if now > base then base = now end
  local new_tat = base + n * interval
  local debt = new_tat - now
  local wait
  if new_tat > HORIZON then
    wait = math.huge
  elseif debt > window then
    wait = debt - window
    if wait < 1 then wait = 1 end
  end
  if wait and wait > worst then
    refused, worst, wait_of = i, wait, tat - now
    if wait_of < 0 then wait_of = 0 end
  end
end

-- A bucket full at now is deleted; any other is kept until it would be full again.
local function store(i, tat)
  if tat <= now then
    redis.call('DEL', KEYS[i])
    return
  end
  redis.call('SET', KEYS[i], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
end

if refused > 0 then
  -- Nothing is taken; clamped, repaired or given-back buckets are written as they now stand.
  if writes then
    for i = 1, m do
      if writes[i] then
        store(i, tats[i])
      end
    end
  end
  local wait = worst
  if wait == math.huge then wait = -1 end
  return {0, now, repaired, refused, wait_of, wait}
end

-- Every bucket admits n: take up to `want`, as many as every bucket holds (at least n, since
-- n * T fits between each base and latest).
local granted = n
if want > n then
  granted = want
  for i = 1, m do
    local interval = tonumber(ARGV[2 * i + 3])
    local latest = now + tonumber(ARGV[2 * i + 4])
    local base = tats[i]
    if now > base then base = now end
    local room = math.floor((latest - base) / interval)
    -- The quotient of two integers below 2^53 is rounded once: step back if it rounded up.
    if base + room * interval > latest then room = room - 1 end
    if room < granted then granted = room end
  end
end
local answer = {1, now, repaired, granted}
for i = 1, m do
  local base = tats[i]
  if now > base then base = now end
  local tat = base + granted * tonumber(ARGV[2 * i + 3])
  store(i, tat)
  answer[4 + i] = tat - now
end
return answer
