-- Argo CD health of outbox.dev/DeadLetterReplay (docs/argocd-health.md).
-- Runs without Lua's string library (Argo CD's default), so only .. and tostring.
local hs = {status = "Progressing", message = "Waiting for the operator to start the replay"}

local function condition(t)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local function text(c)
  if c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return c.reason
end

local function count(n)
  if n == nil then
    return "0"
  end
  return tostring(n)
end

if obj.status == nil then
  return hs
end
local st = obj.status
local gen = obj.metadata.generation
if gen ~= nil and (st.observedGeneration == nil or st.observedGeneration < gen) then
  hs.message = "Waiting for the operator to observe generation " .. tostring(gen)
  return hs
end
local ready = condition("Ready")
if st.phase == "Succeeded" then
  hs.status = "Healthy"
  if obj.spec.dryRun then
    hs.message = "Dry run: " .. count(st.matched) .. " events match; nothing was replayed"
  else
    hs.message = "Replayed " .. count(st.replayed) .. " of " .. count(st.matched) .. " matched events: " ..
      count(st.succeeded) .. " succeeded, " .. count(st.deadAgain) .. " dead again"
  end
  return hs
end
-- Failed, or cannot start (pipeline, Secret or consumer missing): both need a human.
if st.phase == "Failed" or (ready ~= nil and ready.status == "False") then
  hs.status = "Degraded"
  if ready ~= nil then
    hs.message = text(ready)
  else
    hs.message = "Replay failed"
  end
  return hs
end
local phase = st.phase
if phase == nil then
  phase = "Pending"
end
hs.message = phase .. ": " .. count(st.replayed) .. " of " .. count(st.matched) .. " matched events replayed"
return hs
