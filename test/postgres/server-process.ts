/**
 * One of several provider processes acting as one deployment behind a load
 * balancer: same issuer, same signing keys, one PostgreSQL table. Started by
 * support/multi-process.ts; prints `PORT <n>` once it listens, and exits when its
 * parent closes stdin (so it never outlives the test run).
 */
import type { JWK } from 'jose';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { serveUntilParentLeaves } from '../support/children.js';
import { DATABASE_URL } from '../support/postgres.js';
import { startProvider } from '../support/provider.js';

const issuer = required('ISSUER');
const schema = required('STORE_SCHEMA');
const table = required('STORE_TABLE');
const jwks = JSON.parse(required('JWKS')) as { keys: JWK[] };

const Adapter = createPostgresAdapter({ connectionString: DATABASE_URL, schema, table });
const tp = await startProvider({ adapter: Adapter, issuer, configuration: { jwks } });
process.stdout.write(`PORT ${new URL(tp.base).port}\n`);

serveUntilParentLeaves(async () => {
  await tp.close();
  await Adapter.close();
});

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`server-process: ${name} is required`);
  return value;
}
