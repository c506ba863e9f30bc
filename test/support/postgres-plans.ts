import pg from 'pg';
import { createPostgresAdapter, type PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { DATABASE_URL } from './postgres.js';
import { postgresRunSchema, testTable } from './postgres-adapter.js';

/** An adapter on one connection that logs every plan it runs, generic from the first call. */
export interface ExplainingAdapter {
  Adapter: PostgresAdapterClass;
  /** Its connection, for statements of the test's own (the one the adapter's statements run on). */
  pool: pg.Pool;
  /** The plans PostgreSQL ran, as auto_explain logged them, in order. */
  plans: string[];
  /** Where the adapter keeps its entries: `"<schema>"."<table>"`. */
  entries: string;
  close(): Promise<void>;
}

/**
 * A connection keeps a generic plan of a prepared statement after five
 * calls, chosen without the values: the plans are read as PostgreSQL runs
 * them (auto_explain, sent to this client), generic from the first call.
 */
export async function explainingAdapter(plans: string[] = []): Promise<ExplainingAdapter> {
  const schema = await postgresRunSchema();
  const table = testTable();
  const pool = new pg.Pool({
    connectionString: DATABASE_URL,
    max: 1,
    options:
      '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 ' +
      '-c auto_explain.log_analyze=on -c client_min_messages=log -c plan_cache_mode=force_generic_plan',
  });
  pool.on('connect', (client) => {
    client.on('notice', (notice) => {
      if (notice.message?.includes('Query Text')) plans.push(notice.message);
    });
  });
  const Adapter = createPostgresAdapter({ pool, schema, table, cleanupInterval: 0 });
  await Adapter.migrate();
  return {
    Adapter,
    pool,
    plans,
    entries: `"${schema}"."${table}"`,
    async close() {
      await Adapter.close();
      await pool.end();
    },
  };
}

/** The largest count of rows a plan read and then dropped by a filter. */
export function mostFiltered(plan: string): number {
  return Math.max(0, ...[...plan.matchAll(/Rows Removed by Filter: (\d+)/g)].map((match) => Number(match[1])));
}
