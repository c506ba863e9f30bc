import pg from 'pg';
import { invalidCall } from '../errors/standalone.js';

/** Pool options that fail fast: a connection attempt gives up after 2 s, a query after 5 s. */
export const POSTGRES_POOL_OPTIONS = {
  max: 10,
  connectionTimeoutMillis: 2000,
  query_timeout: 5000,
  keepAlive: true,
} satisfies pg.PoolConfig;

/** Where the adapter or the audit log sends its statements: exactly one of the two. */
export interface PoolSource {
  /** A pool you own, never ended by `close()`; give it `POSTGRES_POOL_OPTIONS` so an outage fails fast. */
  pool?: pg.Pool | undefined;
  /** Where to connect when no pool is given: a pool of its own with `POSTGRES_POOL_OPTIONS`, ended by `close()`. */
  connectionString?: string | undefined;
}

const POOL_SOURCE: Record<keyof PoolSource, true> = { pool: true, connectionString: true };
export const POOL_SOURCE_NAMES = Object.keys(POOL_SOURCE);

/** The pool, from exactly one of `pool` and `connectionString`; its `end()` ends only a pool opened here, once. */
export function openPool(caller: string, source: PoolSource): { pool: pg.Pool; end(): Promise<void> } {
  if (!source.pool === !source.connectionString)
    throw invalidCall(caller, 'pass "pool" or "connectionString", exactly one of them');
  if (source.pool) return { pool: source.pool, end: async () => {} };
  const pool = new pg.Pool({ connectionString: source.connectionString, ...POSTGRES_POOL_OPTIONS });
  // An idle client that loses its connection must not crash the process; the next query reports the outage.
  pool.on('error', () => {});
  let ended: Promise<void> | undefined;
  return { pool, end: () => (ended ??= pool.end()) };
}
