-- Argo CD health of outbox.dev/OutboxPipeline (docs/argocd-health.md).
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
-- spec.paused: no workers on purpose; events wait as PENDING.
if ready.reason == "Paused" then
  hs.status = "Suspended"
  hs.message = text(ready)
  return hs
end
-- Degraded means the operator wants a human: a Secret, the spec, the database, the
-- table, the brokers, delayed or dying events.
local degraded = condition("Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = text(degraded)
  return hs
end
local progressing = condition("Progressing")
if progressing ~= nil and progressing.status == "True" then
  hs.message = text(progressing)
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = text(ready)
  return hs
end
-- Rolled out but no worker ready yet: pods starting, or crashing (the relay
-- Deployment turns Degraded itself after its progress deadline).
if ready.reason == "WorkersNotReady" then
  hs.message = text(ready)
  return hs
end
hs.status = "Degraded"
hs.message = text(ready)
return hs
