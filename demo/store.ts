import { createPostgresAdapter } from '../lib/adapters/postgres.js';
import { createRedisAdapter } from '../lib/adapters/redis.js';
import type { AdapterSource } from '../lib/adapters/contracts/entries.js';

export interface DemoStore {
  /** The identity service's adapter; absent for the plugin's memory adapter. */
  adapter?: AdapterSource & { close(): Promise<void> };
  /** What the start-up banner says about it: where it is, never its credentials. */
  description: string;
  /**
   * Resolves once the store answers (on PostgreSQL, once its tables are
   * made), so that the demo listens only then; rejects when it cannot be reached.
   */
  ready(): Promise<void>;
}

/** The table the demo keeps its provider state in, beside the audit trail's. */
export const DEMO_STORE_TABLE = 'demo_provider_store';

/**
 * Where the identity service keeps its state: Redis with REDIS_URL, else
 * PostgreSQL with DATABASE_URL, else memory. On Redis or PostgreSQL, every
 * demo instance started with the same URL shares subject tokens, sessions and
 * grants, as instances behind one load balancer would.
 */
export function demoStore(env: NodeJS.ProcessEnv, options: { schema?: string } = {}): DemoStore {
  const redisUrl = env['REDIS_URL'];
  if (redisUrl) {
    const adapter = createRedisAdapter({ url: redisUrl, keyPrefix: 'demo:' });
    return {
      adapter,
      description: `Redis at ${new URL(redisUrl).host} (prefix demo:)`,
      // A read waits for the connection (a second at most) and fails when there is none.
      ready: async () => {
        await new adapter('Session').find('demo-start-up');
      },
    };
  }
  const databaseUrl = env['DATABASE_URL'];
  if (databaseUrl) {
    const adapter = createPostgresAdapter({
      connectionString: databaseUrl,
      table: DEMO_STORE_TABLE,
      ...(options.schema ? { schema: options.schema } : {}),
    });
    return {
      adapter,
      description: `PostgreSQL at ${new URL(databaseUrl).host} (table ${DEMO_STORE_TABLE})`,
      ready: () => adapter.migrate(),
    };
  }
  return { description: 'in memory', ready: () => Promise.resolve() };
}
