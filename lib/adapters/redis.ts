import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type { AdapterPayload } from 'oidc-provider';
import { entryLifetimeMs, GRANTABLE_MODELS } from './contracts/entries.js';
import { comesAfter, type BoundedIndexAdd, type IndexEntry } from './contracts/indexes.js';
import { COMMITTED_TOGETHER, QUOTA_KIND, type CommitOutcome, type CommitWrite } from './contracts/commit.js';
import type { EveryDomainAdapter, ImpersonationAdapterClass } from './contract.js';
import { ReadAheads } from './read-aheads.js';
import { PLUGIN_MODELS } from './models.js';
import { DerivedOperations } from './quotas.js';
import type { OutboxStore } from '../outbox/contract.js';
import { createRedisOutbox, OUTBOX_APPEND_LUA, outboxAppendArgs, outboxKeys } from '../outbox/redis.js';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { invalidCall, unavailable } from '../errors/standalone.js';
import { clusterOf, type RedisClient, type RedisNode, type RedisPipeline } from '../redis/client.js';

export type { RedisClient, RedisNode, RedisPipeline } from '../redis/client.js';

export interface RedisAdapterOptions {
  /** A client you own (ioredis 5 or 6), never closed here; build it with `REDIS_CLIENT_OPTIONS`. */
  client?: RedisClient | undefined;
  /** Where to connect when no client is given. Default `redis://127.0.0.1:6379`. */
  url?: string | undefined;
  /** Redis Cluster nodes: the adapter opens `new Cluster(cluster, REDIS_CLUSTER_OPTIONS)` and closes it. */
  cluster?: ClusterNode[] | undefined;
  /** With `cluster`: your options over `REDIS_CLUSTER_OPTIONS` (`redisOptions` over `REDIS_CLIENT_OPTIONS`). */
  clusterOptions?: ClusterOptions | undefined;
  /** Put in front of every key, so that several deployments can share one server. Default `oidc:`. */
  keyPrefix?: string | undefined;
  /** Replicas that must confirm a write (`WAIT`) before it counts; none in time rejects. Default 0. */
  replicas?: number | undefined;
  /** How long a write waits for its replicas, milliseconds. Default 500. */
  replicaTimeoutMs?: number | undefined;
}

export interface RedisAdapterClass extends ImpersonationAdapterClass {
  /** Closes the connection opened from `url`; a client passed in is left to its owner. */
  close(): Promise<void>;
  /** @deprecated The same as `close()`, the name every store of the package closes with. */
  disconnect(): Promise<void>;
}

/** Client options that fail a call fast when Redis is down and never replay one (Invariant 9). */
export const REDIS_CLIENT_OPTIONS = {
  enableOfflineQueue: false,
  // Commands of one tick share a write: Redis CPU 11% → 3% of a core in the bench.
  enableAutoPipelining: true,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  socketTimeout: 2000,
  connectTimeout: 2000,
  // Never gives up, so the service serves again as soon as Redis is back.
  retryStrategy: (attempt: number) => Math.min(attempt * 50, 500),
} satisfies RedisOptions;

/** The same for `new Cluster(nodes, REDIS_CLUSTER_OPTIONS)`: only replies that say nothing ran are followed. */
export const REDIS_CLUSTER_OPTIONS = {
  redisOptions: REDIS_CLIENT_OPTIONS,
  enableOfflineQueue: false,
  enableAutoPipelining: true,
  retryDelayOnFailover: 0,
  retryDelayOnClusterDown: 100,
  retryDelayOnTryAgain: 100,
  // Learns a new slot owner soon after a failover even when no redirection tells it.
  slotsRefreshInterval: 1000,
  clusterRetryStrategy: (attempt: number) => Math.min(attempt * 50, 500),
} satisfies ClusterOptions;

/** How much longer than its last member an index key is kept when its TTL must grow (ms); one commit in PRUNE_EVERY drops expired members. */
const INDEX_SLACK_MS = 600_000;
const PRUNE_EVERY = 16;

/** How many uid → id pointers findByUid remembers, per createRedisAdapter(). */
const REMEMBERED_UIDS = 10_000;

const NO_EXPIRY = -1;

/** Replies of a Redis Cluster that mean the command did not run and may be sent again. */
const REDIRECTION = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /;
const MAX_REDIRECTIONS = 4;

/** How long a call waits for a (re)connection before it fails; longer than the longest retry delay. */
const READY_WAIT_MS = 1000;

// Invariant 2: each of these scripts touches one key, but the read-ahead, never sent to a Cluster.
const SCRIPTS = {
  // Sets `consumed` in place: the payload stays opaque (cjson would turn [] into {}).
  impersonationConsumeOnce: `
if redis.call('HEXISTS', KEYS[1], 'payload') == 0 then return 0 end
return redis.call('HSETNX', KEYS[1], 'consumed', ARGV[1])`,
  impersonationRelease: `
if redis.call('HGET', KEYS[1], 'consumed') ~= ARGV[1] then return 0 end
return redis.call('HDEL', KEYS[1], 'consumed')`,
  // Replaces the whole entry, so an earlier `consumed` cannot survive; TTL 0 only deletes, below 0 never expires.
  impersonationWrite: `
redis.call('DEL', KEYS[1])
local ttl = tonumber(ARGV[3])
if ttl == 0 then return 1 end
redis.call('HSET', KEYS[1], 'payload', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'consumed', ARGV[2]) end
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1`,
  // Invariant 7: the TTL only grows (EXPIRE GT needs Redis 7).
  impersonationAddToGrant: `
local before = redis.call('PTTL', KEYS[1])
redis.call('SADD', KEYS[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl <= 0 then redis.call('PERSIST', KEYS[1])
elseif before == -2 or (before >= 0 and before < ttl) then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1`,
  // Invariant 52: an access token, its sign-in's Session (by its uid's pointer) and its Grant; ARGV[1] the key prefix.
  impersonationReadAhead: `
local token = redis.call('HMGET', KEYS[1], 'payload', 'consumed')
local parsed, decoded = pcall(cjson.decode, token[1] or '')
if not parsed then return { token[1] } end
local uid, grant, session = decoded.sessionUid, { false, false }, { false, false }
if decoded.expiresWithSession == true and type(uid) == 'string' then
  local id = redis.call('GET', ARGV[1] .. 'Session:uid:{' .. uid .. '}')
  if id then session = redis.call('HMGET', ARGV[1] .. 'Session:{' .. id .. '}', 'payload', 'consumed') end
end
if type(decoded.grantId) == 'string' then grant = redis.call('HMGET', ARGV[1] .. 'Grant:{' .. decoded.grantId .. '}', 'payload', 'consumed') end
return { token[1], token[2], session[1], session[2], grant[1], grant[2] }`,
} as const;

/** Adds a member to a sorted index kept past its last member's expiry: pushed INDEX_SLACK_MS further when short, so most adds only read its TTL. */
const INDEX_ADD_LUA = `
local function index_add(key, score, member, now)
  redis.call('ZADD', key, score, member)
  local needed, left = math.floor(tonumber(score)) + 1000, redis.call('PTTL', key)
  if left < 0 or tonumber(now) + left < needed then redis.call('PEXPIREAT', key, needed + ${INDEX_SLACK_MS}) end
end
`;

/** Adds a member to indexes of one hash tag (expired members dropped) unless one is full, the member aside; ARGV: member, now, then per key expiry and bound. */
const INDEX_ADD_WITHIN = `${INDEX_ADD_LUA}
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[2])
  if not redis.call('ZSCORE', key, ARGV[1]) and redis.call('ZCARD', key) >= tonumber(ARGV[2 + 2 * i]) then
    return i
  end
end
for i, key in ipairs(KEYS) do index_add(key, ARGV[1 + 2 * i], ARGV[1], ARGV[2]) end
return 0`;

/**
 * One exchange's commit (Invariant 2). KEYS: the entry to consume (else the written one), the entry to
 * write, indexes, guards, counters, outbox keys; ARGV[12] '1' drops the indexes' expired members. Returns
 * {1, dropped…}, {0} consumed, {2, guard} ended (its payload has `"ended":`) or {3, counter} spent.
 */
const COMMIT = `${OUTBOX_APPEND_LUA}${INDEX_ADD_LUA}
local indexes, guards, quotas = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[10])
for i = 1, guards do
  local guard = redis.call('HGET', KEYS[2 + indexes + i], 'payload')
  if guard and string.find(guard, '"ended":', 1, true) then return { 2, i } end
end
local consuming = ARGV[11] == '1'
if consuming and (redis.call('HEXISTS', KEYS[1], 'payload') == 0 or redis.call('HEXISTS', KEYS[1], 'consumed') == 1) then
  return { 0 }
end
local counters = 2 + indexes + guards
for i = 1, quotas do
  local count = tonumber(redis.call('HGET', KEYS[counters + i], 'count') or '0')
  if count >= tonumber(ARGV[11 + 2 * i]) then return { 3, i } end
end
if consuming then redis.call('HSET', KEYS[1], 'consumed', ARGV[3]) end
for i = 1, quotas do
  local key = KEYS[counters + i]
  local count = redis.call('HINCRBY', key, 'count', 1)
  if count == 1 then redis.call('PEXPIREAT', key, ARGV[12 + 2 * i]) end
  redis.call('HSET', key, 'payload', '{"kind":"${QUOTA_KIND}","count":' .. count .. '}')
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'payload', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
for i = 3, 2 + indexes do
  if ARGV[12] == '1' then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[8]) end
  index_add(KEYS[i], ARGV[7], ARGV[6], ARGV[8])
end
local outbox = counters + quotas + 1
if #KEYS < outbox then return { 1 } end
local dropped = outbox_append({ unpack(KEYS, outbox, #KEYS) }, tonumber(ARGV[9]), tonumber(ARGV[8]), ARGV, 13 + 2 * quotas)
return { 1, unpack(dropped) }`;

/** The scripts given their number of keys in each call (the first argument): Invariant 2 keeps those keys in one slot. */
const KEYED_SCRIPTS = { impersonationIndexAddWithin: INDEX_ADD_WITHIN, impersonationCommit: COMMIT };

/** The adapter's scripts on a client, or queued on its pipeline (their replies come with `exec()`). */
type Scripted<Reply> = Record<keyof typeof SCRIPTS | keyof typeof KEYED_SCRIPTS, (...args: unknown[]) => Reply>;

const REDIS_OPTION_NAMES = Object.keys({
  client: true,
  url: true,
  cluster: true,
  clusterOptions: true,
  keyPrefix: true,
  replicas: true,
  replicaTimeoutMs: true,
} satisfies Record<keyof RedisAdapterOptions, true>);

const check: OptionChecks = optionChecks('createRedisAdapter');

/** The options' values, checked: every one names its option when refused. */
function checkedOptions(options: RedisAdapterOptions) {
  check.known(options, REDIS_OPTION_NAMES);
  const sources = (['client', 'url', 'cluster'] as const).filter((source) => options[source] !== undefined);
  if (sources.length > 1) {
    const given = sources.map((source) => `"${source}"`).join(' and ');
    throw invalidCall('createRedisAdapter', `pass one of "client", "url" and "cluster", not ${given}`);
  }
  if (options.clusterOptions !== undefined && options.cluster === undefined)
    throw invalidCall('createRedisAdapter', '"clusterOptions" go with "cluster"');
  // The adapter reads RESP2-shaped replies; ioredis 6 maps RESP3's only when asked to (a Cluster: in its nodes' options).
  const mapping = (options.client?.options ?? options.clusterOptions ?? {}) as RedisClient['options'] & {
    redisOptions?: RedisClient['options'];
  };
  if ((mapping.replyMapping ?? mapping.redisOptions?.replyMapping) === 'resp3') {
    const option = options.client ? 'client' : 'clusterOptions';
    check.fail(option, "must keep ioredis's legacy reply mapping, not 'resp3'");
  }
  const prefix = options.keyPrefix ?? 'oidc:';
  if (typeof prefix !== 'string') check.fail('keyPrefix', 'must be a string');
  const replicas = options.replicas ?? 0;
  if (!Number.isSafeInteger(replicas) || replicas < 0) check.fail('replicas', 'must be an integer of 0 or more');
  const replicaTimeoutMs = check.positive('replicaTimeoutMs', options.replicaTimeoutMs ?? 500);
  return { prefix, replicas, replicaTimeoutMs };
}

/** The client from `client`, `url` or `cluster`, with the adapter's scripts; a Cluster's nodes connected at once. */
function openClient(options: RedisAdapterOptions) {
  const owned = options.client === undefined;
  const client: RedisClient =
    options.client ??
    (options.cluster
      ? new Cluster(options.cluster, {
          ...REDIS_CLUSTER_OPTIONS,
          ...options.clusterOptions,
          redisOptions: { ...REDIS_CLIENT_OPTIONS, ...options.clusterOptions?.redisOptions },
        })
      : new Redis(options.url ?? 'redis://127.0.0.1:6379', REDIS_CLIENT_OPTIONS));
  const cluster = clusterOf(client);
  // Failed calls are reported by their requests; per-retry error events would repeat them.
  if (owned) client.on('error', () => {});
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 1, lua });
  for (const [name, lua] of Object.entries(KEYED_SCRIPTS)) client.defineCommand(name, { lua });
  if (cluster) {
    // Invariant 2: auto-pipelining would route these by their first argument, the number of keys.
    const ignored = (client.options.autoPipeliningIgnoredCommands ??= []);
    for (const name of Object.keys(KEYED_SCRIPTS)) if (!ignored.includes(name)) ignored.push(name);
    // Without an offline queue a node still opening fails its calls, so each is connected at once.
    const open = (node: RedisNode): void => {
      if (node.status === 'wait') node.connect().catch(() => {});
    };
    client.on('+node', open);
    for (const node of cluster.nodes('all')) open(node);
  }
  return { client, owned, cluster };
}

/** An oidc-provider adapter on Redis for every model and domain; keys: docs/adapters.md#redis-key-layout. */
export function createRedisAdapter(options: RedisAdapterOptions = {}): RedisAdapterClass {
  const { prefix, replicas, replicaTimeoutMs } = checkedOptions(options);
  const { client, owned, cluster } = openClient(options);
  const redis = client as RedisClient & Scripted<Promise<unknown>>;
  const { ready: isReady, whenReady } = readiness(client, cluster);

  const grantKey = (grantId: string): string => `${prefix}grant:{${grantId}}`;
  // Invariant 2: what an exchange commits shares one hash tag.
  const commitTag = `{${prefix}impersonation}`;
  const entryKey = (model: string, id: string): string =>
    COMMITTED_TOGETHER.has(model) ? `${prefix}${model}:${commitTag}:${id}` : `${prefix}${model}:{${id}}`;
  const sortedIndexKey = (model: string, index: string): string =>
    `${prefix}${model}:index:${COMMITTED_TOGETHER.has(model) ? commitTag : `{${model}}`}:${index}`;
  // Invariant 8: a remembered uid pointer saves only the pointer's round trip.
  const uidPointers = new LRUCache<string, string>({ max: REMEMBERED_UIDS });
  let commits = 0;
  // Invariant 52: what readAhead read, for this turn's finds; a write that may change a token, sent since, drops it.
  const readAheads = new ReadAheads<AdapterPayload | undefined>();
  const wrote = (model: string) => PLUGIN_MODELS.has(model) || readAheads.forget();
  let readingAhead = !cluster;

  let outbox: OutboxStore | undefined;

  class RedisAdapter extends DerivedOperations implements EveryDomainAdapter {
    readonly #name: string;

    constructor(name: string) {
      super();
      this.#name = name;
    }

    static async close(): Promise<void> {
      if (!owned) return;
      // QUIT lets replies in flight arrive; a connection that is already gone can only be dropped.
      if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }

    static disconnect(): Promise<void> {
      return RedisAdapter.close();
    }

    /** The webhooks' outbox, one per createRedisAdapter(), under the same key prefix. */
    outbox(): OutboxStore {
      return (outbox ??= createRedisOutbox(client, prefix, whenReady));
    }

    #indexKey(index: 'uid' | 'userCode', value: string): string {
      return `${prefix}${this.#name}:${index}:{${value}}`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      if (!isReady()) await whenReady();
      const key = entryKey(this.#name, id);
      // The scripts' TTL: milliseconds, 0 for an entry already expired, -1 for one that never expires.
      const ttl = entryLifetimeMs(expiresIn) ?? NO_EXPIRY;
      const { consumed, ...stored } = payload;
      // Invariant 7: indexes before the entry; an already expired entry needs none.
      if (ttl !== 0) {
        await Promise.all([
          payload.grantId && GRANTABLE_MODELS.has(this.#name)
            ? redis.impersonationAddToGrant(grantKey(payload.grantId), key, ttl)
            : undefined,
          payload.uid ? setPointer(this.#indexKey('uid', payload.uid), id, ttl) : undefined,
          payload.userCode ? setPointer(this.#indexKey('userCode', payload.userCode), id, ttl) : undefined,
        ]);
      }
      wrote(this.#name);
      await sendWrite('impersonationWrite', key, JSON.stringify(stored), consumed ? JSON.stringify(consumed) : '', ttl);
    }

    async readAhead(id: string): Promise<void> {
      if (!readingAhead) return;
      if (!isReady()) await whenReady();
      const asked = readAheads.forgotten;
      // A proxy that routes commands by key refuses the keys the script reads: the finds read alone from then on.
      const reply = (await redis.impersonationReadAhead(entryKey(this.#name, id), prefix).catch((error: Error) => {
        readingAhead = error.name !== 'ReplyError';
      })) as Array<string | null> | undefined;
      if (!reply) return;
      const [token, signIn] = [entryOf(reply[0], reply[1]), entryOf(reply[2], reply[3])];
      readAheads.leave(`${this.#name}\u0000${id}`, token, asked);
      const uid = token?.expiresWithSession === true && token.sessionUid;
      if (typeof uid === 'string')
        readAheads.leave(`Session\u0000uid\u0000${uid}`, signIn?.uid === uid ? signIn : undefined, asked);
      if (typeof token?.grantId === 'string')
        readAheads.leave(`Grant\u0000${token.grantId}`, entryOf(reply[4], reply[5]), asked);
    }

    forgetReadAheads(): void {
      readAheads.forget();
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const ahead = readAheads.take(`${this.#name}\u0000${id}`);
      if (ahead) return ahead.answer;
      if (!isReady()) await whenReady();
      const [payload, consumed] = await redis.hmget(entryKey(this.#name, id), 'payload', 'consumed');
      return entryOf(payload, consumed);
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const ahead = readAheads.take(`${this.#name}\u0000uid\u0000${uid}`);
      if (ahead) return ahead.answer;
      const index = this.#indexKey('uid', uid);
      const remembered = uidPointers.get(index);
      if (remembered !== undefined) {
        const entry = await this.find(remembered);
        if (entry?.uid === uid) return entry;
        uidPointers.delete(index);
      }
      return this.#byPointer('uid', uid);
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return this.#byPointer('userCode', userCode);
    }

    /** The entry `kind` points to, checked against it (Invariant 8); a uid pointer found is remembered. */
    async #byPointer(kind: 'uid' | 'userCode', value: string): Promise<AdapterPayload | undefined> {
      if (!isReady()) await whenReady();
      const index = this.#indexKey(kind, value);
      const id = (await redis.get(index)) ?? undefined;
      const entry = id === undefined ? undefined : await this.find(id);
      if (entry?.[kind] !== value) return undefined;
      if (kind === 'uid') uidPointers.set(index, id!);
      return entry;
    }

    async consumeOnce(id: string): Promise<boolean> {
      if (!isReady()) await whenReady();
      wrote(this.#name);
      return (
        (await sendWrite('impersonationConsumeOnce', entryKey(this.#name, id), Math.floor(Date.now() / 1000))) === 1
      );
    }

    // Invariant 8: indexes are left to expire.
    async destroy(id: string): Promise<void> {
      if (!isReady()) await whenReady();
      wrote(this.#name);
      await redis.del(entryKey(this.#name, id));
    }

    async indexAdd(indexes: readonly string[], member: string, expiresAt: number): Promise<void> {
      const adds = indexes.map((index) => ({ index, expiresAt, bound: Number.MAX_SAFE_INTEGER }));
      await this.indexAddWithin(adds, member);
    }

    /** INDEX_ADD_WITHIN, for indexAdd (unbounded) and indexAddWithin alike. */
    async indexAddWithin(adds: readonly BoundedIndexAdd[], member: string): Promise<string | undefined> {
      if (!adds.length) return undefined;
      if (!isReady()) await whenReady();
      const keys = adds.map((add) => sortedIndexKey(this.#name, add.index));
      const limits = adds.flatMap((add) => [add.expiresAt, add.bound]);
      const full = await redis.impersonationIndexAddWithin(keys.length, ...keys, member, Date.now(), ...limits);
      return full === 0 ? undefined : adds[(full as number) - 1]!.index;
    }

    async commitOnce(commit: CommitWrite): Promise<CommitOutcome> {
      const { consume, write, indexes, expiresAt, guards, quotas = [], outbox: notes } = commit;
      if ((consume && !COMMITTED_TOGETHER.has(consume.model)) || !COMMITTED_TOGETHER.has(write.model))
        throw invalidCall('commitOnce', `commits only ${[...COMMITTED_TOGETHER].join(' and ')} entries`);
      const ttl = entryLifetimeMs(write.expiresIn);
      if (ttl === undefined || ttl === 0) throw invalidCall('commitOnce', 'the entry to write needs a lifetime');
      if (!isReady()) await whenReady();
      const appending = notes !== undefined && notes.entries.length > 0;
      const written = entryKey(write.model, write.id);
      const keys = [
        consume ? entryKey(consume.model, consume.id) : written,
        written,
        ...indexes.map((index) => sortedIndexKey(write.model, index)),
        ...guards.map((guard) => entryKey(write.model, guard)),
        ...quotas.map((quota) => entryKey(write.model, quota.key)),
        ...(appending ? outboxKeys(prefix) : []),
      ];
      const { consumed: _consumed, ...stored } = write.payload;
      const args = [
        keys.length,
        ...keys,
        indexes.length,
        guards.length,
        JSON.stringify(write.id),
        JSON.stringify(stored),
        ttl,
        write.id,
        expiresAt,
        Date.now(),
        appending ? notes.maxPending : 0,
        quotas.length,
        consume ? 1 : 0,
        commits++ % PRUNE_EVERY === 0 ? 1 : 0,
        ...quotas.flatMap((quota) => [quota.max, Math.ceil(quota.expiresAt)]),
        ...(appending ? outboxAppendArgs(notes.entries, notes.now) : []),
      ];
      const [code, ...rest] = (await sendWrite('impersonationCommit', ...args)) as Array<number | string>;
      if (code === 1) return appending ? { outcome: 'committed', dropped: rest.map(String) } : { outcome: 'committed' };
      if (code === 0) return { outcome: 'consumed' };
      if (code === 3) return { outcome: 'spent', key: quotas[Number(rest[0]) - 1]!.key };
      return { outcome: 'guarded', guard: guards[Number(rest[0]) - 1]! };
    }

    async releaseConsumed({ model, id }: { model: string; id: string }, by: string): Promise<boolean> {
      if (!isReady()) await whenReady();
      return (await sendWrite('impersonationRelease', entryKey(model, id), JSON.stringify(by))) === 1;
    }

    async indexRemove(indexes: readonly string[], member: string): Promise<void> {
      if (!isReady()) await whenReady();
      await Promise.all(indexes.map((index) => redis.zrem(sortedIndexKey(this.#name, index), member)));
    }

    async indexRange(index: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]> {
      if (!isReady()) await whenReady();
      const key = sortedIndexKey(this.#name, index);
      const max = after ? String(after.expiresAt) : '+inf';
      const min = `(${Date.now()}`;
      const found: IndexEntry[] = [];
      // Members that tie with `after` on expiry come first and are skipped; read on until `limit` are found.
      const batch = limit + 16;
      for (let offset = 0; found.length < limit; offset += batch) {
        const reply = await redis.zrevrangebyscore(key, max, min, 'WITHSCORES', 'LIMIT', offset, batch);
        for (let at = 0; at < reply.length && found.length < limit; at += 2) {
          const entry = { member: reply[at]!, expiresAt: Number(reply[at + 1]) };
          if (!after || comesAfter(entry, after)) found.push(entry);
        }
        if (reply.length < batch * 2) break;
      }
      return found;
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      if (!isReady()) await whenReady();
      const index = grantKey(grantId);
      const members = await redis.smembers(index);
      readAheads.forget();
      // One DEL per key: on Cluster the members live in different slots.
      await Promise.all(members.map((key) => redis.del(key)));
      await redis.del(index);
    }
  }

  /** Runs a writing script; with `replicas`, with `WAIT` in one pipeline, re-sent after a redirection (Invariant 9). */
  async function sendWrite(name: keyof Scripted<unknown>, ...args: Array<string | number>): Promise<unknown> {
    if (!replicas) return redis[name](...args);
    for (let attempt = 1; ; attempt += 1) {
      const queued = (client.pipeline() as RedisPipeline & Scripted<RedisPipeline>)[name](...args);
      const results = await queued.wait(replicas, replicaTimeoutMs).exec();
      const [[error, reply] = [], [waitError, confirmed] = []] = results ?? [];
      if (error && REDIRECTION.test(error.message) && attempt < MAX_REDIRECTIONS && cluster) {
        await new Promise<void>((resolve) => {
          cluster.refreshSlotsCache(() => resolve());
        });
        continue;
      }
      if (error ?? waitError) throw error ?? waitError;
      if (typeof confirmed !== 'number' || confirmed < replicas) {
        throw unavailable(
          `Redis: ${String(confirmed)} of ${replicas} replicas confirmed a write within ${replicaTimeoutMs} ms`,
        );
      }
      return reply;
    }
  }

  const setPointer = (key: string, id: string, ttl: number) =>
    ttl > 0 ? redis.set(key, id, 'PX', ttl) : redis.set(key, id);

  return RedisAdapter;
}

function entryOf(payload: string | null | undefined, consumed: string | null | undefined): AdapterPayload | undefined {
  if (!payload) return undefined;
  const found = JSON.parse(payload) as AdapterPayload;
  if (consumed) found.consumed = JSON.parse(consumed);
  return found;
}

/** Resolves once the client (and, once, a Cluster's nodes) is ready, within READY_WAIT_MS (Invariant 9). */
function readiness(client: RedisClient, cluster: ReturnType<typeof clusterOf>) {
  let nodesOpened = !cluster;
  const ready = (): boolean =>
    client.status === 'ready' && (nodesOpened ||= !!cluster?.nodes('all').every((node) => node.status === 'ready'));
  let waiting: Promise<void> | undefined;
  const whenReady = (): Promise<void> => {
    if (ready()) return Promise.resolve();
    if (client.status === 'end') return Promise.reject(unavailable('Redis connection closed'));
    waiting ??= new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + READY_WAIT_MS;
      let timer: NodeJS.Timeout | undefined;
      const settle = (error?: Error): void => {
        clearTimeout(timer);
        client.off('ready', check);
        waiting = undefined;
        if (error) reject(error);
        else resolve();
      };
      function check(): void {
        if (ready()) return settle();
        if (Date.now() < deadline) {
          clearTimeout(timer);
          // Connections of a Cluster's nodes announce nothing on the client: they are looked at again shortly.
          timer = setTimeout(check, client.status === 'ready' ? 10 : deadline - Date.now());
          return;
        }
        if (client.status !== 'ready') return settle(unavailable(`Redis is unreachable (connection ${client.status})`));
        nodesOpened = true;
        settle();
      }
      client.on('ready', check);
      if (client.status === 'wait') client.connect().catch(() => {});
      check();
    });
    return waiting;
  };
  return { ready, whenReady };
}
