import { randomUUID } from 'node:crypto';
import pg from 'pg';

export const DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A schema of this run's own; dropTestSchemas() (run-cleanup.ts, after the run) drops every schema the run made. */
const made: string[] = [];

export async function testSchema(): Promise<string> {
  const schema = `test_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at ${DATABASE_URL} (set DATABASE_URL, or start it: ` +
        `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start): ${(error as Error).message}`,
    );
  }
  try {
    await client.query(`CREATE SCHEMA "${schema}"`);
  } finally {
    await client.end();
  }
  made.push(schema);
  return schema;
}

/** Drops every schema testSchema() made in this process. */
export async function dropTestSchemas(): Promise<void> {
  const schemas = made.splice(0);
  if (!schemas.length) return;
  const client = new pg.Client({ connectionString: DATABASE_URL });
  try {
    await client.connect();
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } catch {
    // The test that needed PostgreSQL already reported why it failed.
  } finally {
    await client.end().catch(() => {});
  }
}
