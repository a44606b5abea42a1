
local answer = decide()
local after = {}
for i = 1, #KEYS do
  after[i] = value_of(KEYS[i])
end
return {answer, before, after}
