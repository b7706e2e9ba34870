"""The broker's Lua scripts (each one atomic step in Redis) and the lifetimes of the keys they write."""

from __future__ import annotations

WORKERS = "workers"
INGRESS = "ingress"
#: How long a message stays marked answered (the window in which a late second reply is dropped).
SENT_TTL = 24 * 3600
#: How long a message id stays known once queued (``P:seen:<message>``): delivered again within it,
#: the message is not queued again (one turn, one reply per message id).
SEEN_TTL = SENT_TTL
#: How long a message's first reply is kept (``P:answer:<message>``, at most a reply record) to be
#: sent again to a duplicate delivery of the message; later, a duplicate gets nothing (logged).
ANSWER_TTL = 3600
#: Undelivered replies kept per platform (P:undelivered:<platform>, the oldest trimmed first).
UNDELIVERED_KEPT = 10_000

#: Checks the types of a script's keys before it writes anything: a key of another type (written by
#: someone else) makes the script fail with MISTYPED, untouched, for the broker to set it aside.
_TYPED = """
local function mistyped(kinds)
  for i, kind in ipairs(kinds) do
    local found = redis.call('TYPE', KEYS[i])['ok']
    if kind ~= '' and found ~= 'none' and found ~= kind then
      return redis.error_reply('MISTYPED ' .. KEYS[i] .. ' is a ' .. found .. ', not a ' .. kind)
    end
  end
  return nil
end
"""

#: The messages really queued: the lengths of the streams of the chats that have a token (``P:count``
#: is set to it).  The counter is repaired with it whenever it reads full, missing or garbled.
_RECOUNT = """
local function recount(active, count, chats)
  local n = 0
  local names = redis.pcall('HKEYS', active)
  if type(names) == 'table' and not names['err'] then
    for _, chat in ipairs(names) do
      local len = redis.pcall('XLEN', chats .. chat)
      if type(len) == 'number' then n = n + len end
    end
  end
  redis.call('SET', count, n)
  return n
end
"""

SUBMIT = (
    _TYPED
    + _RECOUNT
    + """
-- KEYS: chat stream, ready stream, active hash, count, seen, answer, out stream
-- ARGV: chat key, payload, max_pending, the chat streams' key prefix, '1' to send an answer again
local bad = mistyped({'stream', 'stream', 'hash', 'string', 'string', 'string', 'stream'})
if bad then return bad end
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- A duplicate: answered, its first reply goes out again (a new entry, not through P:sent); in
  -- progress, the reply to come answers it.
  local answer = redis.call('GET', KEYS[6])
  if answer and ARGV[5] == '1' then
    redis.call('XADD', KEYS[7], '*', 'r', answer)
    return 'resent'
  end
  return 'seen'
end
local count = tonumber(redis.call('GET', KEYS[4]) or '')
if count == nil or count >= tonumber(ARGV[3]) then count = recount(KEYS[3], KEYS[4], ARGV[4]) end
if count >= tonumber(ARGV[3]) then return false end
local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[2])
redis.call('INCR', KEYS[4])
redis.call('SET', KEYS[5], id, 'EX', SEEN_TTL)
if redis.call('HSETNX', KEYS[3], ARGV[1], id) == 1 then
  redis.call('XADD', KEYS[2], '*', 'chat', ARGV[1])
end
return id
""".replace("SEEN_TTL", str(SEEN_TTL))
)

COUNT = (
    _RECOUNT
    + """
-- KEYS: active, count; ARGV: the chat streams' key prefix
return recount(KEYS[1], KEYS[2], ARGV[1])
"""
)

_OWNED = """
local function owned(ready, group, worker, token)
  local p = redis.call('XPENDING', ready, group, token, token, 1)
  return #p > 0 and p[1][2] == worker
end
"""

FINISH = (
    _OWNED
    + _TYPED
    + """
-- KEYS: ready, chat stream, active, count, out stream, session key, sent marker, attempts, answer
-- ARGV: group, worker, token, message id or '', reply or '', chat key, session or ''
local bad = mistyped({'stream', 'stream', 'hash', 'string', 'stream', 'string', 'string', 'hash', 'string'})
if bad then return bad end
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return {-1} end
if ARGV[4] ~= '' then
  if redis.call('XDEL', KEYS[2], ARGV[4]) == 0 then return {-1} end
  redis.call('HDEL', KEYS[8], ARGV[4] .. ' ' .. ARGV[6])
  local count = tonumber(redis.call('GET', KEYS[4]) or '')
  if count == nil then
    redis.call('DEL', KEYS[4])  -- garbled: the next submit counts again
  elseif count > 0 then
    redis.call('DECR', KEYS[4])
  else
    redis.call('SET', KEYS[4], 0)
  end
  -- The message's first reply is the one sent: a second one (the same message queued twice by a
  -- platform that delivered it twice) is dropped here.
  if ARGV[5] ~= '' and redis.call('SET', KEYS[7], '1', 'NX', 'EX', SENT_TTL) then
    redis.call('XADD', KEYS[5], '*', 'r', ARGV[5])
    redis.call('SET', KEYS[9], ARGV[5], 'EX', ANSWER_TTL)  -- for a duplicate delivery
  end
  if ARGV[7] ~= '' then redis.call('SET', KEYS[6], ARGV[7]) end
end
local nxt = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #nxt == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], ARGV[6])
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  redis.call('XDEL', KEYS[1], ARGV[3])
  return {0}
end
return {1, nxt[1][1], nxt[1][2][2]}
""".replace("SENT_TTL", str(SENT_TTL)).replace("ANSWER_TTL", str(ANSWER_TTL))
)

RELEASE = (
    _OWNED
    + """
-- KEYS: ready; ARGV: group, worker, token, chat key
if not owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
redis.call('XADD', KEYS[1], '*', 'chat', ARGV[4])
return 1
"""
)

HEARTBEAT = (
    _OWNED
    + """
-- KEYS: ready, members; ARGV: group, worker, member, tokens...
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local lost = {}
for i = 4, #ARGV do
  if owned(KEYS[1], ARGV[1], ARGV[2], ARGV[i]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    table.insert(lost, ARGV[i])
  end
end
return lost
"""
)


HOLD = """
-- KEYS: the platform's lease; ARGV: member, ttl in ms
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return false
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return false
end
return holder
"""

DROP = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

FORGET = """
-- KEYS: members; ARGV: member, its record as read (a member that beat since is kept)
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
"""
