-- Argo CD health of outbox.dev/RetentionPolicy (docs/argocd-health.md).
-- Runs without Lua's string library (Argo CD's default), so only .. and tostring.
local hs = {status = "Progressing", message = "Waiting for the operator to report status"}

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

if obj.status == nil then
  return hs
end
local gen = obj.metadata.generation
if gen ~= nil and (obj.status.observedGeneration == nil or obj.status.observedGeneration < gen) then
  hs.message = "Waiting for the operator to observe generation " .. tostring(gen)
  return hs
end
local ready = condition("Ready")
if ready == nil then
  return hs
end
-- Not scheduled: pipeline, Secret or spec problem.
if ready.status ~= "True" then
  hs.status = "Degraded"
  hs.message = text(ready)
  return hs
end
-- The newest archive run failed (True), or its history cannot be read (Unknown).
local degraded = condition("Degraded")
if degraded ~= nil and degraded.status ~= "False" then
  hs.status = "Degraded"
  hs.message = text(degraded)
  return hs
end
if ready.reason == "Suspended" then
  hs.status = "Suspended"
  hs.message = text(ready)
  return hs
end
hs.status = "Healthy"
hs.message = text(ready)
return hs
