import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createMemoryAdapter } from '../../lib/index.js';
import { createRedisAdapter, type RedisAdapterClass } from '../../lib/adapters/redis.js';
import type { AdapterSource } from '../../lib/adapters/contract.js';
import { postgresTestAdapter } from './postgres-adapter.js';

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
 * The adapter every test provider runs on: the plugin's memory adapter by
 * default; the suite's other runs set TEST_ADAPTER=redis or TEST_ADAPTER=postgres.
 */
export async function testAdapter(): Promise<AdapterSource> {
  const kind = process.env['TEST_ADAPTER'] ?? 'memory';
  if (kind === 'postgres') return postgresTestAdapter();
  if (kind !== 'redis') {
    if (kind !== 'memory') throw new Error(`TEST_ADAPTER must be memory, redis or postgres, not ${kind}`);
    return createMemoryAdapter();
  }
  // Checked once per run: without Redis every suite fails at once in its
  // setup, rather than test by test after a second's wait per call.
  reachable ??= assertRedisReachable();
  await reachable;
  return redisTestAdapter();
}

let reachable: Promise<void> | undefined;

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
  await Promise.all(adapters.map((Adapter) => Adapter.disconnect()));
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

// A root-level hook (mocha is loading a spec file when this module first runs):
// open connections would otherwise outlive the run. Not under mocha (the
// multi-process children), `after` is not defined.
if (typeof after === 'function') after(closeTestAdapters);
