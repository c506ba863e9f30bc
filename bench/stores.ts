/**
 * The stores a provider runs on, one description each: what it needs before
 * the provider starts (a reachable service, a key prefix, a schema), what it
 * reports once the run is done, and what it deletes afterwards.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import type { AdapterKind } from './protocol.js';
import type { ServerProcessOptions } from './server-process.js';

/** What the provider process is told about its store. */
export type StoreServerOptions = Pick<ServerProcessOptions, 'redisPrefix' | 'storeSchema' | 'auditSchema'>;

export interface ServiceUrls {
  redisUrl: string;
  databaseUrl: string;
}

/** Where Redis and PostgreSQL are: REDIS_URL and DATABASE_URL, or the services on 127.0.0.1. */
export function serviceUrls(env: NodeJS.ProcessEnv = process.env): ServiceUrls {
  return {
    redisUrl: env['REDIS_URL'] ?? 'redis://127.0.0.1:6379',
    databaseUrl: env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test',
  };
}

/** A store made ready for one provider. */
interface PreparedStore {
  server: StoreServerOptions;
  /** After a run that completed: what the store holds, as a log line. */
  describe?(): Promise<string>;
  /** After every run, completed or not: deletes what the run left; a log line, if any. */
  cleanUp?(): Promise<string | undefined>;
}

interface StoreDescription {
  /** Rejects, saying how to start it, when its service is not reachable. */
  prepare(urls: ServiceUrls): Promise<PreparedStore>;
}

const memory: StoreDescription = {
  prepare: async () => ({ server: { redisPrefix: '' } }),
};

const redis: StoreDescription = {
  async prepare({ redisUrl }) {
    await redisReachable(redisUrl);
    const prefix = `bench:${randomUUID()}:`;
    return {
      server: { redisPrefix: prefix },
      cleanUp: async () => `deleted ${await deleteKeys(redisUrl, prefix)} keys under ${prefix}`,
    };
  },
};

/**
 * A schema of its own in DATABASE_URL, dropped afterwards, holding `table`:
 * the PostgreSQL adapter's (option `storeSchema`) or the audit log's (`auditSchema`).
 */
function postgresSchema(
  options: ReadonlyArray<'storeSchema' | 'auditSchema'>,
  table: string,
  describe: (rows: number, schema: string) => string,
): StoreDescription {
  return {
    async prepare({ databaseUrl }) {
      const schema = `bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const database = await postgres(databaseUrl);
      const dropped = async (): Promise<undefined> => {
        await database.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
        await database.end();
        return undefined;
      };
      try {
        await database.query(`CREATE SCHEMA "${schema}"`);
      } catch (error) {
        await dropped();
        throw error;
      }
      return {
        server: { redisPrefix: '', ...Object.fromEntries(options.map((option) => [option, schema])) },
        async describe() {
          const { rows } = await database.query<{ rows: number }>(
            `SELECT count(*)::int AS rows FROM "${schema}"."${table}"`,
          );
          return describe(rows[0]!.rows, schema);
        },
        cleanUp: dropped,
      };
    },
  };
}

export const STORES: Record<AdapterKind, StoreDescription> = {
  memory,
  redis,
  postgres: postgresSchema(
    ['storeSchema'],
    'oidc_provider_store',
    (rows, schema) => `${rows} rows in the store's table in schema ${schema} (dropped)`,
  ),
  'memory+pg-audit': postgresSchema(
    ['auditSchema'],
    'impersonation_audit',
    (rows, schema) => `${rows} rows appended to one chain in schema ${schema} (dropped)`,
  ),
  'postgres+pg-audit': postgresSchema(
    ['storeSchema', 'auditSchema'],
    'impersonation_audit',
    (rows, schema) => `${rows} rows appended to one chain, beside the store, in schema ${schema} (dropped)`,
  ),
};

/**
 * Runs `run` on a store prepared for it, logs what the store holds afterwards
 * under `name`, and deletes what the run left, whatever happened.
 */
export async function onStore<T>(
  kind: AdapterKind,
  name: string,
  urls: ServiceUrls,
  run: (server: StoreServerOptions) => Promise<T>,
): Promise<T> {
  const store = await STORES[kind].prepare(urls);
  try {
    const result = await run(store.server);
    if (store.describe) console.log(`  ${name}: ${await store.describe()}`);
    return result;
  } finally {
    const line = await store.cleanUp?.();
    if (line) console.log(`  ${name}: ${line}`);
  }
}

/**
 * A connected client that fails a command at once rather than queueing or
 * retrying it, or an error saying how to reach Redis (or pass --memory-only).
 */
export async function connectRedis(url: string): Promise<Redis> {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    client.disconnect();
    throw new Error(
      `Redis is not reachable at ${url} (set REDIS_URL, or pass --memory-only): ${(error as Error).message}`,
    );
  }
  return client;
}

async function redisReachable(url: string): Promise<void> {
  (await connectRedis(url)).disconnect();
}

/** Deletes every key under the run's prefix; returns how many there were. */
async function deleteKeys(url: string, prefix: string): Promise<number> {
  const client = await connectRedis(url);
  let deleted = 0;
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) deleted += await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
  return deleted;
}

/** A connection to DATABASE_URL, or an error saying how to start PostgreSQL (or pass --memory-only / --redis-only). */
async function postgres(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at ${url} (set DATABASE_URL, start it, or pass --memory-only): ${(error as Error).message}`,
    );
  }
  return client;
}
