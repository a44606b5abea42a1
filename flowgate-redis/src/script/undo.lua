-- flowgate: the exact give-back, the only one: the undo of a take in one slot (take_before.lua)
-- after a later slot of the same decision refused or failed, and the return of a lease's unused
-- cells (its TAT moved back over them). KEYS[i] is a bucket the take changed; ARGV[2i - 1] the
-- value the take wrote, ARGV[2i] '0' if the key was missing before it, or '1' followed by the
-- value to put back. A bucket is put back only where it still holds the value the take wrote:
-- a decision that changed it since keeps what it took, and the take's cells stay booked (fewer
-- admissions, never more). The expiry is kept: the key may live a little longer than needed.
-- Answers how many buckets were put back.
local undone = 0
for i = 1, #KEYS do
  local now = redis.pcall('GET', KEYS[i])
  if now == ARGV[2 * i - 1] then
    local before = ARGV[2 * i]
    if before == '0' then
      redis.call('DEL', KEYS[i])
    else
      redis.call('SET', KEYS[i], string.sub(before, 2), 'KEEPTTL')
    end
    undone = undone + 1
  end
end
return undone
