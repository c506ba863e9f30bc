/** The outbox on Redis: every key under the commit's hash tag, each operation one script (docs/adapters.md#redis-key-layout). */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis/client.js';
import { streamOf, type DeadLetter, type NewOutboxEntry, type SettledEntry } from './contract.js';
import type { OutboxStats, OutboxStore } from './contract.js';

const KEY_NAMES = [
  'seq',
  'queue',
  'heads',
  'entries',
  'attempts',
  'leases',
  'pending',
  'dropped',
  'dead',
  'reasons',
  'due',
  'order',
] as const;

/** `due`'s member for a stream claimable at `at`; given a seq for `at`, its member in `order`. */
const DUE_MEMBER_LUA = `
local function due_member(stream, at)
  local cut = string.find(stream, '\\n', 1, true)
  return string.sub(stream, 1, cut) .. string.format('%016d', at) .. string.sub(stream, cut)
end
`;

// KEYS are always the twelve above, in that order. `unorder`: the queue member's entry leaves its subscription's
// order of waiting entries; `set_due`: when the stream's first entry may next be claimed (nil: it has none).
const PRELUDE = `${DUE_MEMBER_LUA}
local seq, queue, heads, entries, attempts, leases, pending, dropped, dead, reasons, due, order =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local function drop(member)
  for _, hash in ipairs({ entries, attempts, leases, reasons }) do redis.call('HDEL', hash, member) end
end
local function unorder(stream, member)
  redis.call('ZREM', order, due_member(stream, tonumber(string.sub(member, -16))))
end
local function first_of(stream)
  local member = redis.call('ZRANGEBYLEX', queue, '[' .. stream .. '\\0', '(' .. stream .. '\\1', 'LIMIT', 0, 1)
  return member[1]
end
local function set_due(stream, at)
  local before = redis.call('ZSCORE', heads, stream)
  if before then redis.call('ZREM', due, due_member(stream, tonumber(before))) end
  if at == nil then
    redis.call('ZREM', heads, stream)
  else
    redis.call('ZADD', heads, at, stream)
    redis.call('ZADD', due, 0, due_member(stream, tonumber(at)))
  end
end
`;

/** Appends entries (`k` the twelve keys; from `from`, per entry: subscription, stream, JSON); returns dropped subscriptions. */
export const OUTBOX_APPEND_LUA = `${DUE_MEMBER_LUA}
local function outbox_append(k, max, now, args, from)
  local seq, queue, heads, entries, pending, dropped, due, order = k[1], k[2], k[3], k[4], k[7], k[8], k[11], k[12]
  local refused = {}
  for i = from, #args, 3 do
    local subscription, stream = args[i], args[i + 1]
    if tonumber(redis.call('HGET', pending, subscription) or '0') >= max then
      redis.call('HINCRBY', dropped, subscription, 1)
      refused[#refused + 1] = subscription
    else
      local number = redis.call('INCR', seq)
      local member = stream .. '\\0' .. string.format('%016d', number)
      redis.call('ZADD', queue, 0, member)
      redis.call('ZADD', order, 0, due_member(stream, number))
      redis.call('HSET', entries, member, args[i + 2])
      redis.call('HINCRBY', pending, subscription, 1)
      if redis.call('ZADD', heads, 'NX', now, stream) == 1 then redis.call('ZADD', due, 0, due_member(stream, now)) end
    end
  end
  return refused
end
`;

const SCRIPTS = {
  // ARGV: maxPending, now, then per entry: subscription, stream, entry JSON.
  impersonationOutboxAppend: `${OUTBOX_APPEND_LUA}
return outbox_append(KEYS, tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV, 3)`,
  // ARGV: now, limit, leaseMs, lease prefix, deadBefore, room ('' for limit), then subscription and entries out pairs.
  // Takes, of each subscription with entries waiting and room, its streams due by now, earliest first, up to its room.
  impersonationOutboxClaim: `${PRELUDE}
local now, limit, leaseMs, prefix, deadBefore = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local each = tonumber(ARGV[6]) or limit
local out = {}
for i = 7, #ARGV, 2 do out[ARGV[i]] = tonumber(ARGV[i + 1]) end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', dead, '-inf', '(' .. deadBefore)) do drop(member) end
redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. deadBefore)
local until_now = string.format('%016d', now + 1)
local candidates = {}
local counts = redis.call('HGETALL', pending)
for i = 1, #counts, 2 do
  local subscription = counts[i]
  local room = math.min(limit, each - (out[subscription] or 0))
  if tonumber(counts[i + 1]) > 0 and room > 0 then
    local from = subscription .. '\\n'
    for _, member in ipairs(redis.call('ZRANGEBYLEX', due, '[' .. from, '(' .. from .. until_now, 'LIMIT', 0, room)) do
      local at = string.sub(member, #from + 1, #from + 16)
      candidates[#candidates + 1] = { at, from .. string.sub(member, #from + 18) }
    end
  end
end
table.sort(candidates, function(a, b) return a[1] < b[1] end)
local claimed = {}
for i = 1, math.min(limit, #candidates) do
  local stream = candidates[i][2]
  local member = first_of(stream)
  if member == nil then
    set_due(stream, nil)
  else
    local lease = prefix .. ':' .. member
    redis.call('HSET', leases, member, lease)
    local count = redis.call('HINCRBY', attempts, member, 1)
    set_due(stream, now + leaseMs)
    claimed[#claimed + 1] = { member, redis.call('HGET', entries, member), count, lease }
  end
end
return claimed`,
  // ARGV: now, then per entry: member, lease, outcome, retry time or reason, subscription, stream. Returns 1 per lease held, else 0.
  // `settle` changes nothing unless the lease is still the holder's and the entry its stream's first.
  impersonationOutboxSettleAll: `${PRELUDE}
local function settle(member, lease, outcome, now, detail, subscription, stream)
  if redis.call('HGET', leases, member) ~= lease or first_of(stream) ~= member then return 0 end
  redis.call('HDEL', leases, member)
  if outcome == 'retry' then
    set_due(stream, tonumber(detail))
    return 1
  end
  redis.call('ZREM', queue, member)
  unorder(stream, member)
  redis.call('HINCRBY', pending, subscription, -1)
  if outcome == 'dead' then
    redis.call('ZADD', dead, now, member)
    redis.call('HSET', reasons, member, detail)
  else
    drop(member)
  end
  if first_of(stream) == nil then set_due(stream, nil) else set_due(stream, tonumber(now)) end
  return 1
end
local held = {}
for i = 2, #ARGV, 6 do
  held[#held + 1] = settle(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[1], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
end
return held`,
  // ARGV: subscriptions. Returns, for each, the JSON of its oldest waiting entry (false when none waits).
  impersonationOutboxOldest: `${PRELUDE}
local oldest = {}
for i = 1, #ARGV do
  local from = ARGV[i] .. '\\n'
  local first = redis.call('ZRANGEBYLEX', order, '[' .. from, '(' .. ARGV[i] .. '\\v', 'LIMIT', 0, 1)[1]
  oldest[i] = false
  if first then
    local member = from .. string.sub(first, #from + 18) .. '\\0' .. string.sub(first, #from + 1, #from + 16)
    oldest[i] = redis.call('HGET', entries, member) or false
  end
end
return oldest`,
  // ARGV: the subscription. Its queue and order members fall between `<subscription>\n` and `<subscription>\v`.
  impersonationOutboxForget: `${PRELUDE}
local subscription = ARGV[1]
local from, to = '[' .. subscription .. '\\n', '(' .. subscription .. '\\v'
for _, member in ipairs(redis.call('ZRANGEBYLEX', queue, from, to)) do
  set_due(string.sub(member, 1, #member - 17), nil)
  drop(member)
end
redis.call('ZREMRANGEBYLEX', queue, from, to)
redis.call('ZREMRANGEBYLEX', order, from, to)
for _, member in ipairs(redis.call('ZRANGE', dead, 0, -1)) do
  if string.sub(member, 1, #subscription + 1) == subscription .. '\\n' then
    redis.call('ZREM', dead, member)
    drop(member)
  end
end
redis.call('HDEL', pending, subscription)
redis.call('HDEL', dropped, subscription)
return 1`,
};

type StoredEntry = NewOutboxEntry & { createdAt: number };
type Script = (...args: Array<string | number>) => Promise<unknown>;

/** The outbox's keys under `prefix`, tagged as the exchange's commit (Invariant 2). */
export function outboxKeys(prefix: string): string[] {
  return KEY_NAMES.map((name) => `${prefix}outbox:{${prefix}impersonation}:${name}`);
}

/** OUTBOX_APPEND_LUA's per-entry arguments. */
export function outboxAppendArgs(entries: readonly NewOutboxEntry[], now: number): string[] {
  return entries.flatMap((entry) => {
    const stored: StoredEntry = { ...entry, createdAt: now };
    return [entry.subscription, streamOf(entry), JSON.stringify(stored)];
  });
}

/** `ready` waits for a usable connection, as the adapter's own calls do. */
export function createRedisOutbox(client: RedisClient, prefix: string, ready: () => Promise<void>): OutboxStore {
  for (const [name, lua] of Object.entries(SCRIPTS))
    client.defineCommand(name, { numberOfKeys: KEY_NAMES.length, lua });
  const keys = outboxKeys(prefix);
  const key = (name: (typeof KEY_NAMES)[number]): string => keys[KEY_NAMES.indexOf(name)]!;
  /** Runs one of SCRIPTS over the outbox's keys, once the connection is usable. */
  async function script<Reply>(name: keyof typeof SCRIPTS, ...args: Array<string | number>): Promise<Reply> {
    await ready();
    return (await (client as unknown as Record<keyof typeof SCRIPTS, Script>)[name](...keys, ...args)) as Reply;
  }
  /** A settlement as the settling script takes it. */
  const settlementArgs = ({ entry, settlement }: SettledEntry) => [
    entry.lease.slice(entry.lease.indexOf(':') + 1),
    entry.lease,
    settlement.outcome,
    settlement.outcome === 'retry' ? settlement.at : settlement.outcome === 'dead' ? settlement.reason : '',
    entry.subscription,
    streamOf(entry),
  ];

  async function settleAll(settlements: readonly SettledEntry[], now: number): Promise<boolean[]> {
    const held = await script<number[]>('impersonationOutboxSettleAll', now, ...settlements.flatMap(settlementArgs));
    return held.map((one) => one === 1);
  }

  return {
    append(entries, maxPending, now) {
      return script<string[]>('impersonationOutboxAppend', maxPending, now, ...outboxAppendArgs(entries, now));
    },

    async claim(limit, leaseMs, now, deadBefore, bound) {
      const out = [...(bound?.out ?? [])].flat();
      const args = [now, limit, leaseMs, randomUUID(), deadBefore, bound?.each ?? '', ...out];
      const replies = await script<Array<[string, string, number, string]>>('impersonationOutboxClaim', ...args);
      return replies.map(([, json, attempts, lease]) => {
        const stored = JSON.parse(json) as StoredEntry;
        return { ...stored, attempts: Number(attempts), lease, leaseUntil: now + leaseMs };
      });
    },

    settle: async (entry, settlement, now) => (await settleAll([{ entry, settlement }], now))[0]!,
    settleAll,

    async waits(subscription) {
      await ready();
      return Number(await client.hget(key('pending'), subscription)) > 0;
    },

    async stats() {
      await ready();
      const [pending, dropped, deadMembers] = await Promise.all([
        client.hgetall(key('pending')),
        client.hgetall(key('dropped')),
        client.zrange(key('dead'), '0', '-1'),
      ]);
      const subscriptions: OutboxStats['subscriptions'] = {};
      const of = (name: string) => (subscriptions[name] ??= { pending: 0, dead: 0, dropped: 0 });
      for (const [name, count] of Object.entries(pending)) if (Number(count)) of(name).pending = Number(count);
      for (const [name, count] of Object.entries(dropped)) of(name).dropped = Number(count);
      for (const member of deadMembers) of(member.slice(0, member.indexOf('\n'))).dead += 1;
      const waiting = Object.keys(subscriptions).filter((name) => subscriptions[name]!.pending > 0);
      const firsts = waiting.length ? await script<Array<string | null>>('impersonationOutboxOldest', ...waiting) : [];
      const oldest: OutboxStats['oldest'] = {};
      for (const [i, json] of firsts.entries())
        if (json) oldest[waiting[i]!] = (JSON.parse(json) as StoredEntry).createdAt;
      return { subscriptions, oldest };
    },

    forget: (subscription) => script<void>('impersonationOutboxForget', subscription),

    async deadLetters(limit) {
      await ready();
      const members = await client.zrevrange(key('dead'), 0, limit - 1, 'WITHSCORES');
      const letters: DeadLetter[] = [];
      for (let i = 0; i < members.length; i += 2) {
        const member = members[i] as string;
        const fields = (['entries', 'attempts', 'reasons'] as const).map((hash) => client.hget(key(hash), member));
        const [json, attempts, reason] = await Promise.all(fields);
        if (typeof json !== 'string') continue;
        const stored = JSON.parse(json) as StoredEntry;
        letters.push({ ...stored, attempts: Number(attempts), deadAt: Number(members[i + 1]), reason: reason ?? '' });
      }
      return letters;
    },
  };
}
