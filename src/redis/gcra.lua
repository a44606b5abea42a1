-- flowgate: the schedule family (GCRA, the leaky bucket, credit) over one or more buckets,
-- decided all or nothing, in one call.
--
-- The arithmetic is flowgate's in-process schedule (src/algorithm/schedule.rs) in integer
-- microseconds. Lua's numbers are doubles: every value here stays below 2^53 (the client checks
-- each quota's window against that, and requests past the horizon are refused), so every
-- operation is exact. A number handed to redis.call is turned into text by Redis: exact digits
-- below 2^53 ("%.17g") up to 7.0 and from 7.2.5, but in exponent form ("1e+08") for multiples of
-- 10^8 on 7.2.0-7.2.4 (redis/redis#13113), which neither GET's reader here nor INCRBY accepts.
-- So a number the script writes is passed as such only when it is not a multiple of 10^8, and
-- formatted here ("%.0f", exact below 2^53) when it is: one modulo per number written.
--
-- KEYS[i]  bucket i: its theoretical arrival time (TAT), in microseconds, as a decimal string
--          without leading zeros (as Redis writes integers, so that INCRBY reads it); absent
--          means full. All keys of one call share one hash tag.
-- ARGV[1]  the reading to decide at, in microseconds, or '' for the server's TIME (tests only)
-- ARGV[2]  n, the cells to take (0 <= n <= every bucket's burst: checked by the client)
-- Then, for the common call (one bucket, no lease, not a dry run: four arguments in all):
-- ARGV[3], ARGV[4]  the bucket's emission interval T and its window tau = burst * T
-- Or, for every other call:
-- ARGV[3]  want >= n: take up to `want` cells if every bucket has them, at least n (a lease)
-- ARGV[4]  give, cells given back to every bucket before deciding (an expired lease's rest)
-- ARGV[5]  the buckets of dry-run policies: 'first-last' ranges of bucket numbers, comma-
--          separated, one per policy ('' if none). A dry-run policy takes its cells only if
--          every one of its buckets admits, and never refuses.
-- ARGV[3i+3], ARGV[3i+4], ARGV[3i+5]  bucket i's emission interval T, its window
--          tau = burst * T, and its slack: the debt admitted beyond tau (with a delay, which
--          the client works out: a shaper's queue, credit's debt; 0 for GCRA). A request is
--          admitted when the TAT it leaves lies at most lead = tau + slack ahead.
-- Buckets come in the policies' order of evaluation.
--
-- Replies. The common call, when its value needs no repair or clamp, is answered with one
-- integer, because a table costs the server more than the rest of the decision: debt >= 0 when
-- admitted (the new TAT less now), or -(debt + 1) when refused (debt: the TAT less now, at
-- least 0; the wait is debt + n * T - tau, which the client knows). Every other answer is
-- {1, repaired, granted, dry, dry_wait, debt_1, ..., debt_m} when every bucket of every
-- enforcing policy admitted (granted: the cells taken, n <= granted <= want, from every bucket
-- but those of dry-run policies that would refuse; debt_i: how far bucket i's TAT lies ahead
-- of now, after the decision), or {0, repaired, i, debt, wait, dry,
-- dry_wait, debt_1, ..., debt_m} when bucket i refused with the longest wait (the first on a
-- tie; wait -1: never, past the horizon); debt is its TAT (clamped) less now, and debt_j
-- bucket j's as it stands (for headers that describe every quota). Either answer ends with
-- the first refusing bucket of every dry-run policy that would have refused (as dry), in
-- order, for the client to count. dry is the first bucket that refused
-- in the first dry-run policy that would have refused (before the first enforcing bucket that
-- refused, if any: the order in which a policy set evaluates), 0 if none, and dry_wait its
-- wait. repaired counts buckets whose value was not a TAT (overwritten by something else):
-- each is taken as fully booked and rewritten.
--
-- Expiry. A key lives until its bucket would be full again, rounded up to the 10 ms grid and one
-- cell more: TAT <= expiry - GRID at every write. A write whose TAT stays within the grid cell
-- of the TAT it read (one it did not clamp or repair) keeps the key's TTL, which is still past
-- the new TAT: it adds the difference with INCRBY, which keeps the TTL and updates the stored
-- integer in place (cheaper for the server than a SET). Every other write sets PX. A busy
-- bucket therefore rewrites its TTL once per 10 ms of schedule, not once per call, and an idle
-- key outlives its bucket by 20 ms at most. (A stored TAT is below 2^53, so INCRBY's 64-bit
-- integers hold it.) A key whose TTL someone else shortened or removed is not detected: that is
-- no different from someone deleting it.
local HORIZON = 9007199254740991 -- 2^53 - 1
-- Changing GRID or the expiry rule breaks the invariant for keys written under the old rule
-- (INCRBY would keep their TTL): change the keys' names with it.
local GRID = 10000 -- µs
local E8 = 100000000

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end

-- The common call. Anything unusual (a value to repair or clamp, a schedule past the horizon)
-- falls through to the general path below, which reads the key again with want = n, give = 0
-- and the bucket's T and tau where a general call has them.
if #ARGV == 4 then
  local raw = redis.pcall('GET', KEYS[1])
  local old
  if type(raw) == 'string' and #raw <= 16 and string.find(raw, '^[1-9]%d*$') then
    old = tonumber(raw)
    if old > HORIZON then old = nil end
  end
  local window = tonumber(ARGV[4])
  if (old or raw == false) and not (old and old > now + window) then
    local n = tonumber(ARGV[2])
    local base = now
    if old and old > now then base = old end
    local new_tat = base + n * ARGV[3]
    if new_tat <= HORIZON then
      if new_tat - now > window then
        return now - base - 1
      end
      if n > 0 then
        if old and new_tat - new_tat % GRID <= old then
          local step = new_tat - old
          if step % E8 == 0 then step = string.format('%.0f', step) end
          redis.call('INCRBY', KEYS[1], step)
        else
          local value = new_tat
          if value % E8 == 0 then value = string.format('%.0f', value) end
          local ms = math.ceil((new_tat - new_tat % GRID + 2 * GRID - now) / 1000)
          if ms % E8 == 0 then ms = string.format('%.0f', ms) end
          redis.call('SET', KEYS[1], value, 'PX', ms)
        end
      end
      return new_tat - now
    end
  end
end

local n = tonumber(ARGV[2])
-- Bucket i's T, tau and slack are ARGV[3i + at], ARGV[3i + at + 1] and ARGV[3i + at + 2]
-- (the common call has no slack: 0).
local want, give, at, dry = n, 0, 0, ''
if #ARGV ~= 4 then
  want, give, dry, at = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], 3
end
-- Bucket i's emission interval, and its lead: the debt it admits at all (tau + slack).
local function quota(i)
  local k = 3 * i + at
  return tonumber(ARGV[k]), tonumber(ARGV[k + 1]) + (tonumber(ARGV[k + 2]) or 0)
end
local m = #KEYS
-- The first bucket of each dry-run bucket's policy, by bucket.
local group = {}
for first, last in string.gmatch(dry, '(%d+)-(%d+)') do
  first = tonumber(first)
  for i = first, tonumber(last) do group[i] = first end
end

-- Per call, tables of the TATs read (when they were TATs) and as they stand after repair,
-- clamp and give-back, of the waits of buckets that refuse, and, only when a bucket needs
-- writing on a refusal, one of flags.
local olds, tats, waits = {}, {}, {}
local writes
local repaired = 0
local refused, worst, wait_of, first = 0, -1, 0, m + 1

for i = 1, m do
  local interval, lead = quota(i)
  local latest = now + lead
  local raw = redis.pcall('GET', KEYS[i])
  local tat = 0
  local write = false
  if type(raw) == 'string' then
    if #raw <= 16 and string.find(raw, '^[1-9]%d*$') then
      tat = tonumber(raw)
      -- Past 2^53 a value is not exact in Lua: not a TAT this script wrote.
      if tat > HORIZON then tat = nil else olds[i] = tat end
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
    -- of now, as in-process (the script's reading is never stale: it runs atomically). The
    -- key's TTL was set for the schedule as booked, under another clock (a test's or one that
    -- stepped) or by another writer: it is set anew, never kept.
    tat = latest
    write = true
    olds[i] = nil
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
  elseif debt > lead then
    wait = debt - lead
    if wait < 1 then wait = 1 end
  end
  waits[i] = wait
  if wait and not group[i] then
    if first > m then first = i end
    if wait > worst then
      refused, worst, wait_of = i, wait, tat - now
      if wait_of < 0 then wait_of = 0 end
    end
  end
end

-- Dry-run policies that would refuse take nothing (skip, by their first bucket); those
-- evaluated before any enforcing refusal are reported (the first refusing bucket of each, in
-- `dries`), the first of them with its wait.
local skip, dries = {}, {}
local dry_at, dry_wait = 0, 0
for i = 1, m do
  local g = group[i]
  if g and waits[i] and not skip[g] then
    skip[g] = true
    if i < first then
      dries[#dries + 1] = i
      if dry_at == 0 then dry_at, dry_wait = i, waits[i] end
    end
  end
end
if dry_wait == math.huge then dry_wait = -1 end

-- A number to write, as Redis will read it back on every version (see the top).
local function exact(x)
  if x % E8 == 0 then return string.format('%.0f', x) end
  return x
end

-- A bucket full at now is deleted; any other keeps or gets a TTL past its TAT (see Expiry).
local function store(i, tat)
  if tat <= now then
    redis.call('DEL', KEYS[i])
    return
  end
  local old = olds[i]
  if tat == old then
    return
  elseif old and tat - tat % GRID <= old then
    redis.call('INCRBY', KEYS[i], exact(tat - old))
  else
    local expiry = tat - tat % GRID + 2 * GRID
    redis.call('SET', KEYS[i], exact(tat), 'PX', exact(math.ceil((expiry - now) / 1000)))
  end
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
  local answer = {0, repaired, refused, wait_of, wait, dry_at, dry_wait}
  for i = 1, m do
    local debt = tats[i] - now
    if debt < 0 then debt = 0 end
    answer[7 + i] = debt
  end
  for k = 1, #dries do answer[7 + m + k] = dries[k] end
  return answer
end

-- Every bucket that takes admits n: take up to `want`, as many as every one of them holds (at
-- least n, since n * T fits between each base and latest).
local granted = n
if want > n then
  granted = want
  for i = 1, m do if not skip[group[i] or 0] then
    local interval, lead = quota(i)
    local latest = now + lead
    local base = tats[i]
    if now > base then base = now end
    local room = math.floor((latest - base) / interval)
    -- The quotient of two integers below 2^53 is rounded once: step back if it rounded up.
    if base + room * interval > latest then room = room - 1 end
    if room < granted then granted = room end
  end end
end
local answer = {1, repaired, granted, dry_at, dry_wait}
for i = 1, m do
  local base = tats[i]
  if now > base then base = now end
  if skip[group[i] or 0] then
    -- A dry-run policy that would refuse: as it stands (repaired or clamped if need be).
    if writes and writes[i] then store(i, tats[i]) end
    answer[5 + i] = base - now
  else
    local tat = base + granted * quota(i)
    store(i, tat)
    answer[5 + i] = tat - now
  end
end
for k = 1, #dries do answer[5 + m + k] = dries[k] end
return answer
