-- flowgate: every one-word algorithm over one or more buckets, decided all or nothing, in one
-- call: schedules (GCRA, the leaky bucket, credit: a TAT per bucket) and window counters (the
-- interval refill and the fixed window, 'index:used'; the sliding window counter,
-- 'index:previous:current', with window indices counted from the Unix epoch in windows of the
-- bucket's length, shifted by its phase: a window starts where now + phase is a multiple of the
-- length, as in process). The script decides and writes; the client works out what it reports
-- from the states the reply carries, with the in-process algorithms.
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
-- ARGV[1]  '' to decide at the server's TIME (the default), or a reading in microseconds
--          (tests: `RedisBackend::client_time`)
-- ARGV[2]  n, the cells to take (0 <= n <= every bucket's burst: checked by the client)
-- Then, for the common call (one bucket, no lease, not a dry run: four arguments in all):
-- ARGV[3], ARGV[4]  the bucket's emission interval T and its window tau = burst * T
-- The common call at the server's TIME leaves out ARGV[1]: three arguments, n, T and tau.
-- Or, for every other call:
-- ARGV[3]  want >= n: take as many cells as every bucket of every enforcing policy holds, up to
--          `want` and at least n (a lease; `check_up_to`, with n = 1); a dry-run policy then
--          takes that many only if every one of its buckets admits them
-- ARGV[4]  the buckets of dry-run policies: 'first-last' ranges of bucket numbers, comma-
--          separated, one per policy ('' if none). A dry-run policy takes its cells only if
--          every one of its buckets admits, and never refuses.
-- ARGV[4i+1] to ARGV[4i+4]  bucket i's kind and three numbers; a window counter's kind carries
--          its phase p (0 <= p < its length, in µs) as kind + 4 * p. 0, a schedule: its emission
--          interval T, its window tau = burst * T, and its slack, the debt admitted beyond tau
--          (with a delay, which the client works out: a shaper's queue, credit's debt; 0 for
--          GCRA); a request is admitted when the TAT it leaves lies at most tau + slack ahead.
--          1, a counter refilled at window boundaries: the window's length, the burst, the
--          refill per boundary. 2, a sliding window counter: the window's length, the limit,
--          and the weight's scale (the previous window's count weighs (L - offset) >> shift
--          out of L >> shift, in nanoseconds, as in process; compared exactly in two limbs).
-- Buckets come in the policies' order of evaluation.
--
-- Replies. The common call, when its value needs no repair or clamp, is answered with one
-- integer, because a table costs the server more than the rest of the decision: debt >= 0 when
-- admitted (the new TAT less now), or -(debt + 1) when refused (debt: the TAT less now, at
-- least 0; the wait is debt + n * T - tau, which the client knows). Every other answer is
-- {1, repaired, granted, dry, dry_wait, now, s_1, ..., s_m} when every bucket of every
-- enforcing policy admitted (granted: the cells taken, n <= granted <= want, from every bucket
-- but those of dry-run policies that would refuse them; s_i: bucket i's state after the
-- decision; with want > n, the dry-run refusals listed are those of the granted cells),
-- or {0, repaired, i, s_i, wait, dry, dry_wait, now, s_1, ..., s_m} when bucket i refused with
-- the longest wait among schedules (the first on a tie; wait -1: never, past the horizon; a
-- window counter's wait, which the client works out, counts as 1), every state as it stands.
-- A state is a schedule's TAT less now (at least 0), or a counter's windows ahead of now's
-- (a clock that stepped back) * 2^24 + used, or a sliding counter's windows ahead * 2^36 +
-- previous * 2^18 + current. Either answer ends with
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

-- n is ARGV[o + 2], and the common call's T and tau ARGV[o + 3] and ARGV[o + 4].
local o, now = 0, nil
if #ARGV == 3 then
  o = -1
elseif ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
end
if not now then
  local time = redis.call('TIME')
  now = time[1] * 1000000 + time[2]
end
local general = #ARGV > 4

-- The common call. Anything unusual (a value to repair or clamp, a schedule past the horizon)
-- falls through to the general path below, which reads the key again with want = n
-- and the bucket's T and tau where a general call has them.
if not general then
  local raw = redis.pcall('GET', KEYS[1])
  local old
  if type(raw) == 'string' and #raw <= 16 and string.find(raw, '^[1-9]%d*$') then
    old = tonumber(raw)
    if old > HORIZON then old = nil end
  end
  local window = tonumber(ARGV[o + 4])
  if (old or raw == false) and not (old and old > now + window) then
    local n = tonumber(ARGV[o + 2])
    local base = now
    if old and old > now then base = old end
    local new_tat = base + n * ARGV[o + 3]
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

local n = tonumber(ARGV[o + 2])
-- Bucket i's kind and numbers are ARGV[4i + 1] to ARGV[4i + 4]; the common call's one bucket
-- is a schedule with T = ARGV[o + 3], tau = ARGV[o + 4] and no slack.
local want, dry = n, ''
if general then
  want, dry = tonumber(ARGV[3]), ARGV[4]
end
-- Bucket i's kind, its numbers, and a window counter's phase.
local function quota(i)
  if not general then return 0, tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), 0, 0 end
  local k = 4 * i + 1
  local kind = tonumber(ARGV[k])
  return kind % 4, tonumber(ARGV[k + 1]), tonumber(ARGV[k + 2]), tonumber(ARGV[k + 3]),
    math.floor(kind / 4)
end

-- The window of length len and phase p that now falls in, and how far into it now is (µs).
local function window(len, p)
  local cur = math.floor((now + p) / len)
  return cur, now + p - cur * len
end
local m = #KEYS
-- The first bucket of each dry-run bucket's policy, by bucket.
local group = {}
for first, last in string.gmatch(dry, '(%d+)-(%d+)') do
  first = tonumber(first)
  for i = first, tonumber(last) do group[i] = first end
end

-- x * y as (hi, lo) with x * y = hi * 2^21 + lo, exact for x < 2^18 and y < 2^43 (every part
-- below 2^53); and whether a * b <= c * d for such products.
local P21 = 2097152
local function mul(x, y)
  local yh = math.floor(y / P21)
  local lo = x * (y - yh * P21)
  local carry = math.floor(lo / P21)
  return x * yh + carry, lo - carry * P21
end
local function le(a, b, c, d)
  local h1, l1 = mul(a, b)
  local h2, l2 = mul(c, d)
  return h1 < h2 or (h1 == h2 and l1 <= l2)
end

-- A window counter's state (kind 1: {index, used}; kind 2: {index, previous, current}) as
-- read at now: missing is empty, anything else than what this script writes is repaired as
-- full, and counts move on to the reading's window. Also whether it was repaired.
local function counted(kind, len, limit, refill, p, raw)
  local cur = window(len, p)
  local idx, u, v
  if raw == false then
    return {cur, 0, 0}, false
  elseif type(raw) == 'string' and #raw <= 60 then
    if kind == 1 then
      local x, y = string.match(raw, '^(%d+):(%d+)$')
      if x then idx, u, v = tonumber(x), tonumber(y), 0 end
    else
      local x, y, z = string.match(raw, '^(%d+):(%d+):(%d+)$')
      if x then idx, u, v = tonumber(x), tonumber(y), tonumber(z) end
    end
  end
  if not idx or idx > HORIZON or u > limit or v > limit then
    if kind == 1 then return {cur, limit, 0}, true end
    return {cur, 0, limit}, true
  end
  if kind == 1 and idx < cur then
    u = u - (cur - idx) * refill
    if u < 0 then u = 0 end
    idx = cur
  elseif kind == 2 and idx == cur - 1 then
    idx, u, v = cur, v, 0
  elseif kind == 2 and idx < cur then
    idx, u, v = cur, 0, 0
  end
  return {idx, u, v}, false
end

-- Whether a window counter in state `st` refuses k cells (a state ahead of the reading, from a
-- clock that stepped back, is judged from the start of its window, as in process).
local function refuses(kind, len, limit, shift, p, st, k)
  local idx, u, v = st[1], st[2], st[3]
  if kind == 1 then return u + k > limit end
  local after = v + k
  if after > limit then return true end
  local cur, into = window(len, p)
  local off = 0
  if idx <= cur then off = into * 1000 end
  local scale = 2 ^ shift
  local total = len * 1000
  local unit = math.floor(total / scale)
  local weight = math.floor((total - off) / scale)
  return not le(u, weight, limit - after, unit)
end

-- A window counter's state as the reply carries it: the windows it lies ahead of the reading,
-- then its counts, in one integer.
local function encode(kind, len, p, st)
  local ahead = st[1] - window(len, p)
  if kind == 1 then return ahead * 16777216 + st[2] end
  return ahead * 68719476736 + st[2] * 262144 + st[3]
end

-- The wait of k cells from a schedule whose TAT is `tat` (nil: admitted; math.huge: never, past
-- the horizon).
local function schedule_wait(tat, interval, lead, k)
  local base = tat
  if now > base then base = now end
  local new_tat = base + k * interval
  if new_tat > HORIZON then return math.huge end
  local debt = new_tat - now
  if debt > lead then
    if debt - lead < 1 then return 1 end
    return debt - lead
  end
  return nil
end

-- Per call, tables of the TATs read (when they were TATs) and of the states as they stand
-- after repair and clamp (a TAT, or a window counter's table), of the waits of
-- buckets that refuse, and, only when a bucket needs writing on a refusal, one of flags.
local olds, tats, waits = {}, {}, {}
local writes
local repaired = 0
local refused, worst, wait_of, first = 0, -1, 0, m + 1

for i = 1, m do
  local kind, a, b, c, p = quota(i)
  local raw = redis.pcall('GET', KEYS[i])
  local write = false
  local wait
  if kind == 0 then
    local interval, lead = a, b + c
    local latest = now + lead
    local tat = 0
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
      -- Booked further ahead than any reading explains: the clock stepped back. Fully booked
      -- as of now, as in-process (the script's reading is never stale: it runs atomically).
      -- The key's TTL was set for the schedule as booked, under another clock (a test's or one
      -- that stepped) or by another writer: it is set anew, never kept.
      tat = latest
      write = true
      olds[i] = nil
    end
    tats[i] = tat
    wait = schedule_wait(tat, interval, lead, n)
  else
    local st, fixed = counted(kind, a, b, c, p, raw)
    if fixed then
      repaired = repaired + 1
      write = true
    end
    tats[i] = st
    -- The client works out a window counter's wait; here it only orders the refusals.
    if refuses(kind, a, b, c, p, st, n) then wait = 1 end
  end
  if write then
    writes = writes or {}
    writes[i] = true
  end
  waits[i] = wait
  if wait and not group[i] then
    if first > m then first = i end
    if wait > worst then
      refused, worst = i, wait
      if kind == 0 then
        wait_of = tats[i] - now
        if wait_of < 0 then wait_of = 0 end
      else
        wait_of = encode(kind, a, p, tats[i])
      end
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

-- A schedule full at now is deleted; any other keeps or gets a TTL past its TAT (see Expiry).
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

-- A window counter, kept until it counts nothing again: a refill counter until every cell
-- used has come back, a sliding window two windows after its own (windows end where now + p
-- is a multiple of len).
local function store_counts(i, kind, len, refill, p, st)
  local idx, u, v = st[1], st[2], st[3]
  local until_empty
  if kind == 1 then
    if u == 0 then
      redis.call('DEL', KEYS[i])
      return
    end
    until_empty = (idx + math.ceil(u / refill)) * len - p
    redis.call('SET', KEYS[i], string.format('%.0f:%.0f', idx, u), 'PX',
      exact(math.ceil((until_empty - now) / 1000) + 1))
  else
    until_empty = (idx + 2) * len - p
    redis.call('SET', KEYS[i], string.format('%.0f:%.0f:%.0f', idx, u, v), 'PX',
      exact(math.ceil((until_empty - now) / 1000) + 1))
  end
end

-- Writes bucket i as it stands (repaired or clamped), or after taking `cells`.
local function put(i, cells)
  local kind, a, b, c, p = quota(i)
  if kind == 0 then
    local tat = tats[i]
    if cells > 0 then
      if now > tat then tat = now end
      tat = tat + cells * a
    end
    store(i, tat)
    return
  end
  local st = tats[i]
  local cur = window(a, p)
  if cells == 0 and st[1] > cur and waits[i] then
    -- Refused against a window ahead of the reading: the clock stepped back. The count moves
    -- to the reading's window (as in process), which it then stays in.
    st = {cur, st[2], st[3]}
  elseif kind == 1 then
    st = {st[1], st[2] + cells, 0}
  else
    st = {st[1], st[2], st[3] + cells}
  end
  store_counts(i, kind, a, c, p, st)
end

-- Bucket i's state as the reply carries it.
local function value(i, cells)
  local kind, a, _, _, p = quota(i)
  local st = tats[i]
  if kind == 0 then
    local base = st
    if now > base then base = now end
    return base + cells * a - now
  end
  if kind == 1 then
    st = {st[1], st[2] + cells, 0}
  else
    st = {st[1], st[2], st[3] + cells}
  end
  return encode(kind, a, p, st)
end

if refused > 0 then
  -- Nothing is taken; clamped or repaired buckets are written as they now stand,
  -- and so are window counters refused against a window ahead of the reading.
  for i = 1, m do
    local kind, a, _, _, p = quota(i)
    if (writes and writes[i]) or (kind ~= 0 and tats[i][1] > window(a, p) and waits[i]) then
      put(i, 0)
    end
  end
  local wait = worst
  if wait == math.huge then wait = -1 end
  local answer = {0, repaired, refused, wait_of, wait, dry_at, dry_wait, now}
  for i = 1, m do answer[8 + i] = value(i, 0) end
  for k = 1, #dries do answer[8 + m + k] = dries[k] end
  return answer
end

-- Every bucket that takes admits n: take up to `want`, as many as every bucket of every
-- enforcing policy holds (at least n, which each admits): a schedule's room in one division, a
-- window counter's by bisection over what it refuses. Dry-run policies do not limit the count.
local function wait_at(i, k)
  local kind, a, b, c, p = quota(i)
  if kind == 0 then return schedule_wait(tats[i], a, b + c, k) end
  if refuses(kind, a, b, c, p, tats[i], k) then return 1 end
  return nil
end
local granted = n
if want > n then
  granted = want
  for i = 1, m do if not group[i] then
    local kind, interval, b, c, p = quota(i)
    local room
    if kind == 0 then
      local latest = now + b + c
      local base = tats[i]
      if now > base then base = now end
      room = math.floor((latest - base) / interval)
      -- The quotient of two integers below 2^53 is rounded once: step back if it rounded up.
      if base + room * interval > latest then room = room - 1 end
    else
      local low, high = n, granted
      if high > b then high = b end
      while low < high do
        local mid = low + math.ceil((high - low) / 2)
        if refuses(kind, interval, b, c, p, tats[i], mid) then high = mid - 1 else low = mid end
      end
      room = low
    end
    if room < granted then granted = room end
  end end
  -- Each dry-run policy is judged at the count: one that would refuse it takes nothing and is
  -- reported (its first bucket that refuses the count), as a dry run of n is above.
  -- (Monotone: a bucket that refuses n refuses the count too.)
  skip, dries, dry_at, dry_wait = {}, {}, 0, 0
  for i = 1, m do
    local g = group[i]
    if g and not skip[g] then
      local w = wait_at(i, granted)
      if w then
        skip[g] = true
        dries[#dries + 1] = i
        if dry_at == 0 then dry_at, dry_wait = i, w end
      end
    end
  end
  if dry_wait == math.huge then dry_wait = -1 end
end
local answer = {1, repaired, granted, dry_at, dry_wait, now}
for i = 1, m do
  if skip[group[i] or 0] then
    -- A dry-run policy that would refuse: as it stands (repaired or clamped if need be).
    if writes and writes[i] then put(i, 0) end
    answer[6 + i] = value(i, 0)
  else
    if granted > 0 or (writes and writes[i]) then put(i, granted) end
    answer[6 + i] = value(i, granted)
  end
end
for k = 1, #dries do answer[6 + m + k] = dries[k] end
return answer
