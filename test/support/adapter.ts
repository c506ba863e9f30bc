import { randomUUID } from 'node:crypto';
import { Redis, type Cluster } from 'ioredis';
import { COMMITTED_TOGETHER } from '../../lib/adapters/contracts/commit.js';
import { createRedisAdapter, type RedisAdapterClass } from '../../lib/adapters/redis.js';
import type { AdapterUnderTest } from './adapter-contract.js';

export const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

/** Every key this run writes starts with this, so that the run can delete exactly its own keys. */
export const RUN_PREFIX = `test:${randomUUID()}:`;

const opened: RedisAdapterClass[] = [];
let prefixes = 0;

/** A fresh key prefix under the run's; closeTestAdapters() deletes its keys. */
export function testPrefix(): string {
  prefixes += 1;
  return `${RUN_PREFIX}${prefixes}:`;
}

/**
 * assertRedisReachable(), checked once per run: without Redis every suite
 * fails at once in its setup, rather than test by test after a second's wait
 * per call.
 */
export function redisReachable(): Promise<void> {
  reachable ??= assertRedisReachable();
  return reachable;
}

let reachable: Promise<void> | undefined;

/** Where the Redis adapter runs under a test: one Redis server, or a Redis Cluster. */
export interface RedisTarget {
  /** A connected client for looking at keys directly. */
  readonly client: Redis | Cluster;
  /** A new adapter class, with a connection of its own, on `keyPrefix`. */
  adapter(keyPrefix: string): RedisAdapterClass;
  /** Every key that matches `pattern`, on every master. */
  keys(pattern: string): Promise<string[]>;
}

let inspector: Promise<Redis> | undefined;

/** The test Redis server as a RedisTarget; its client is closed by closeTestAdapters(). */
export async function redisServer(): Promise<RedisTarget> {
  await redisReachable();
  inspector ??= (async () => {
    const client = redisClient();
    client.on('error', () => {});
    await client.connect();
    return client;
  })();
  const client = await inspector;
  return {
    client,
    adapter: (keyPrefix) => redisTestAdapter({ keyPrefix }),
    // Every key matching: one SCAN call covers only part of a server that holds many keys.
    async keys(pattern) {
      const found: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 10_000);
        found.push(...keys);
        cursor = next;
      } while (cursor !== '0');
      return found;
    },
  };
}

/** A new deployment (a key prefix) on `target`, for the shared adapter contract. */
export function redisUnderTest(target: RedisTarget): AdapterUnderTest {
  const prefix = testPrefix();
  const Adapter = target.adapter(prefix);
  return {
    Adapter,
    async secondsLeft(model, id) {
      // The models an exchange commits together share one hash tag (see the adapter's key layout).
      const key = COMMITTED_TOGETHER.has(model)
        ? `${prefix}${model}:{${prefix}impersonation}:${id}`
        : `${prefix}${model}:{${id}}`;
      const ms = await target.client.pttl(key);
      return ms === -2 ? undefined : ms === -1 ? null : ms / 1000;
    },
    stored: async () => (await target.keys(`${prefix}*`)).length,
    connections: async (count) => ({
      classes: [Adapter, ...Array.from({ length: count - 1 }, () => target.adapter(prefix))],
      close: async () => {},
    }),
    another: () => target.adapter(testPrefix()),
  };
}

/** A Redis adapter with a key prefix of its own, so that providers and tests never see each other's entries. */
export function redisTestAdapter(options: { url?: string; keyPrefix?: string } = {}): RedisAdapterClass {
  const Adapter = createRedisAdapter({
    url: options.url ?? REDIS_URL,
    keyPrefix: options.keyPrefix ?? testPrefix(),
  });
  opened.push(Adapter);
  return Adapter;
}

/** A plain client for tests that look at keys directly; fails at once when Redis is down. */
export function redisClient(): Redis {
  return new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
}

/** Rejects with a clear message when Redis cannot be reached, so that a Redis suite fails rather than skips. */
export async function assertRedisReachable(): Promise<void> {
  const client = redisClient();
  let cause: Error | undefined;
  client.on('error', (error: Error) => {
    cause ??= error;
  });
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    throw new Error(`Redis is not reachable at ${REDIS_URL} (set REDIS_URL): ${(cause ?? (error as Error)).message}`);
  } finally {
    client.disconnect();
  }
}

/** Closes every connection the test adapters opened and deletes the run's keys. */
export async function closeTestAdapters(): Promise<void> {
  const adapters = opened.splice(0);
  await Promise.all(adapters.map((Adapter) => Adapter.close()));
  const inspecting = inspector;
  inspector = undefined;
  (await inspecting?.catch(() => undefined))?.disconnect();
  if (!prefixes) return;
  const client = redisClient();
  client.on('error', () => {});
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${RUN_PREFIX}*`, 'COUNT', 1000);
      if (keys.length) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } catch {
    // Left-over keys all carry TTLs; a test already reported why Redis failed.
  } finally {
    client.disconnect();
  }
}
