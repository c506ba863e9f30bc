/**
 * A provider process with the PostgreSQL audit log, one of several appending to
 * one chain (test/audit/audit-postgres-processes.test.ts). Prints `PORT <n>` once it
 * listens; exits when its parent closes stdin.
 */
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { DATABASE_URL } from '../support/postgres.js';
import { serveUntilParentLeaves } from '../support/children.js';
import { startProvider } from '../support/provider.js';

const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema: process.env['AUDIT_SCHEMA']! });
const tp = await startProvider({ plugin: { auditLog: log } });
process.stdout.write(`PORT ${new URL(tp.base).port}\n`);

serveUntilParentLeaves(async () => {
  await tp.close();
  await log.close();
});
