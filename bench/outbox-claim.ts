/**
 * What one claim of the PostgreSQL outbox costs over a backlog
 * (docs/benchmarks.md, "Webhooks"): `node build/bench/outbox-claim.js
 * [--entries N]` (default 100,000), after a build; needs PostgreSQL
 * (DATABASE_URL).
 *
 * For each shape of backlog, a table of its own in a schema of its own
 * (dropped afterwards) is filled with N waiting entries as appends one after
 * the other would leave them, then the statement a claim runs is explained
 * (EXPLAIN ANALYZE, rolled back) and timed through the store, 20 claims of 32
 * entries. The shapes: one entry for each of N customers, or N / 1,000 for
 * each of 1,000 customers; every first entry due, or every first entry
 * waiting for its next attempt (a receiver that is down), when a claim finds
 * nothing.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createPostgresAdapter } from '../lib/adapters/postgres.js';
import { hasOutbox } from '../lib/outbox/contract.js';
import { claimStatement } from '../lib/outbox/postgres.js';
import { runCommand } from './command.js';
import { positiveInteger } from './flags.js';
import { serviceUrls } from './stores.js';

const CLAIMS = 20;
const BATCH = 32;
const LEASE_MS = 15_000;
/** When every entry was appended, and when the claims run. */
const APPENDED_AT = 1_000;
const NOW = 2_000;

interface Shape {
  customers: number;
  /** Every first entry waits for a retry far off. */
  retrying: boolean;
}

async function measure(database: pg.Client, url: string, entries: number, shape: Shape): Promise<string> {
  const schema = `bench_outbox_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await database.query(`CREATE SCHEMA "${schema}"`);
  const Adapter = createPostgresAdapter({ connectionString: url, schema });
  try {
    const adapter = new Adapter('ImpersonationOutbox');
    if (!hasOutbox(adapter)) throw new Error('the PostgreSQL adapter has no outbox');
    const outbox = adapter.outbox();
    await outbox.stats(); // creates the tables
    const table = `"${schema}"."oidc_provider_store_outbox"`;
    // Appended one after the other, customer after customer: the first N-customers rows are the heads.
    await database.query(
      `INSERT INTO ${table} (id, subscription, subject, stream, body, created_at, next_at, ready)
       SELECT 'msg_' || i, 'crm', 'customer-' || (i % $2), 'crm' || chr(10) || 'customer-' || (i % $2),
              repeat('x', 400), $3, $3, i < $2
       FROM generate_series(0, $1 - 1) AS i`,
      [entries, shape.customers, APPENDED_AT],
    );
    if (shape.retrying) {
      await database.query(`UPDATE ${table} SET attempts = 3, next_at = $1 WHERE ready`, [NOW + 3_600_000]);
    }
    await database.query(`VACUUM ANALYZE ${table}`);

    await database.query('BEGIN');
    const { rows } = await database.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN (ANALYZE, BUFFERS) ${claimStatement(table)}`,
      [NOW, BATCH, 'explain', LEASE_MS, BATCH, [], [], 0],
    );
    await database.query('ROLLBACK');
    const plan = rows.map((row) => row['QUERY PLAN']);
    const executed = plan.find((line) => line.startsWith('Execution Time'))?.replace('Execution Time: ', '') ?? '?';

    const times: number[] = [];
    let claimed = 0;
    for (let i = 0; i < CLAIMS; i++) {
      const started = performance.now();
      claimed += (await outbox.claim(BATCH, LEASE_MS, NOW, 0)).length;
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)]!;
    return (
      `${entries.toLocaleString('en')} entries, ${shape.customers.toLocaleString('en')} customers, ` +
      `first entries ${shape.retrying ? 'waiting for a retry' : 'due'}: EXPLAIN ANALYZE ${executed}; ` +
      `claim through the store: median ${median.toFixed(1)} ms, max ${times.at(-1)!.toFixed(1)} ms ` +
      `(${claimed} entries in ${CLAIMS} claims)`
    );
  } finally {
    await Adapter.close();
    await database.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

async function main(argv: readonly string[]): Promise<string[]> {
  const entries = positiveInteger(argv, '--entries', 100_000);
  const { databaseUrl } = serviceUrls();
  const database = new pg.Client({ connectionString: databaseUrl });
  await database.connect();
  try {
    console.log(`PostgreSQL outbox: one claim of ${BATCH} over ${entries.toLocaleString('en')} waiting entries`);
    for (const customers of [entries, 1000]) {
      for (const retrying of [false, true])
        console.log(`  ${await measure(database, databaseUrl, entries, { customers, retrying })}`);
    }
  } finally {
    await database.end();
  }
  return [];
}

await runCommand('outbox-claim', main);
