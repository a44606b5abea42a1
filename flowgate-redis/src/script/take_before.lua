-- flowgate: a take in one slot of a decision across Redis Cluster slots. This file, then the
-- decision script (gcra.lua) as the body of `decide`, then take_after.lua make one script,
-- which decides as gcra.lua does and also answers each bucket's value before and after it:
-- {answer, {before_1, ..., before_m}, {after_1, ..., after_m}}, false for a missing key (or a
-- key of another type). An undo (undo.lua) puts a "before" back where its "after" still stands.
local function value_of(key)
  local value = redis.pcall('GET', key)
  if type(value) ~= 'string' then
    return false
  end
  return value
end

local before = {}
for i = 1, #KEYS do
  before[i] = value_of(KEYS[i])
end
