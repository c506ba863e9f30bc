import pg from 'pg';
import {
  createPostgresAdapter,
  POSTGRES_POOL_OPTIONS,
  type PostgresAdapterClass,
} from '../../lib/adapters/postgres.js';
import type { CommitWrite } from '../../lib/adapters/contracts/commit.js';
import type { AdapterUnderTest } from './adapter-contract.js';
import { DATABASE_URL, testSchema } from './postgres.js';

/** One schema for every PostgreSQL adapter of this run (dropped after the run by run-cleanup.ts), a table per adapter. */
let runSchema: Promise<string> | undefined;
/** The run's pool: providers on PostgreSQL share it, so that a long run holds ten connections, not ten per provider. */
let sharedPool: pg.Pool | undefined;
const opened: PostgresAdapterClass[] = [];
let tables = 0;

export function postgresRunSchema(): Promise<string> {
  runSchema ??= testSchema().catch((error: unknown) => {
    runSchema = undefined;
    throw error;
  });
  return runSchema;
}

/** An impersonation's commit: subject token `st-${id}` redeemed, session `imp-${id}` written and listed in `active`. */
export function sessionCommit(id: string, guards: readonly string[]): CommitWrite {
  return {
    consume: { model: 'SubjectToken', id: `st-${id}` },
    write: {
      model: 'ImpersonationSession',
      id: `imp-${id}`,
      payload: { kind: 'ImpersonationSession' },
      expiresIn: 600,
    },
    indexes: ['active'],
    expiresAt: Date.now() + 600_000,
    guards,
  };
}

/** A fresh table name in the run's schema. */
export function testTable(): string {
  tables += 1;
  return `store_${tables}`;
}

export interface PostgresTestAdapterOptions {
  /** Connect here (a relay, say) with a pool of the adapter's own, instead of the run's pool. */
  connectionString?: string;
  table?: string;
  cleanupInterval?: number;
  cleanupBatch?: number;
}

/**
 * A PostgreSQL adapter on a table of its own in the run's schema, migrated
 * before it is returned: without PostgreSQL a suite fails in its setup, with
 * a message saying how to start it.
 */
export async function postgresTestAdapter(options: PostgresTestAdapterOptions = {}): Promise<PostgresAdapterClass> {
  const schema = await postgresRunSchema();
  const common = {
    schema,
    table: options.table ?? testTable(),
    ...(options.cleanupInterval === undefined ? {} : { cleanupInterval: options.cleanupInterval }),
    ...(options.cleanupBatch === undefined ? {} : { cleanupBatch: options.cleanupBatch }),
  };
  let Adapter: PostgresAdapterClass;
  if (options.connectionString) {
    Adapter = createPostgresAdapter({ connectionString: options.connectionString, ...common });
  } else {
    if (!sharedPool) {
      sharedPool = new pg.Pool({ connectionString: DATABASE_URL, ...POSTGRES_POOL_OPTIONS });
      sharedPool.on('error', () => {});
    }
    Adapter = createPostgresAdapter({ pool: sharedPool, ...common });
  }
  opened.push(Adapter);
  await Adapter.migrate();
  return Adapter;
}

/** A new deployment (a table) for the shared adapter contract, looked into through the run's pool. */
export async function postgresUnderTest(): Promise<AdapterUnderTest> {
  const schema = await postgresRunSchema();
  const table = testTable();
  const Adapter = await postgresTestAdapter({ table });
  const query = (text: string, values: unknown[] = []) => sharedPool!.query(text, values);
  return {
    Adapter,
    async secondsLeft(model, id) {
      const { rows } = await query(
        `SELECT extract(epoch FROM expires_at - now())::float8 AS left FROM "${schema}"."${table}" WHERE model = $1 AND id = $2`,
        [model, id],
      );
      return (rows[0] as { left: number | null } | undefined)?.left;
    },
    async stored() {
      const { rows } = await query(
        `SELECT (SELECT count(*) FROM "${schema}"."${table}") + (SELECT count(*) FROM "${schema}"."${table}_index") AS n`,
      );
      return Number((rows[0] as { n: string }).n);
    },
    async connections(count) {
      const pools = Array.from(
        { length: count },
        () => new pg.Pool({ connectionString: DATABASE_URL, ...POSTGRES_POOL_OPTIONS, max: 5 }),
      );
      return {
        classes: pools.map((pool) => createPostgresAdapter({ pool, schema, table })),
        close: async () => {
          await Promise.all(pools.map((pool) => pool.end()));
        },
      };
    },
    another: () => postgresTestAdapter(),
  };
}

/** Stops every test adapter's sweep and closes the run's connections; the schema goes with dropTestSchemas(). */
export async function closePostgresTestAdapters(): Promise<void> {
  const adapters = opened.splice(0);
  await Promise.all(adapters.map((Adapter) => Adapter.close().catch(() => {})));
  const pool = sharedPool;
  sharedPool = undefined;
  // dropTestSchemas() drops the schema next: a later file of this process (mocha --parallel runs
  // several in one worker, with the root hooks after each) makes a schema of its own.
  runSchema = undefined;
  await pool?.end().catch(() => {});
}
