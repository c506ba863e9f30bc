import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { portOf, stopChildren } from '../support/children.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, type TestProvider } from '../support/provider.js';
import { exchange, subjectToken } from '../support/http.js';

const SCRIPT = fileURLToPath(new URL('./audit-process.js', import.meta.url));
const PROCESSES = 4;
const EXCHANGES = 200;

describe('PostgreSQL audit log: four processes appending at once keep one chain', function () {
  this.timeout(60_000);
  const children: ChildProcess[] = [];

  after(() => stopChildren(children));

  it(`${EXCHANGES} exchanges over ${PROCESSES} processes: every row chained, numbered without gaps`, async () => {
    const schema = await testSchema();
    // The tables exist before the processes race to their first append (each would also create them, under a lock).
    const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema });
    await log.migrate();
    const instances = await Promise.all(
      Array.from({ length: PROCESSES }, async () => {
        const child = spawn(process.execPath, [SCRIPT], {
          env: { ...process.env, AUDIT_SCHEMA: schema },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        children.push(child);
        return { base: `http://127.0.0.1:${await portOf(child)}` } as TestProvider;
      }),
    );
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: EXCHANGES }, async (_, i) => {
        const instance = instances[i % PROCESSES]!;
        return (await exchange(instance, { subject_token: await subjectToken(instance), resource: API })).status;
      }),
    );
    const elapsed = Date.now() - started;
    expect(results.every((status) => status === 200)).to.equal(true);
    const verified = await log.verify();
    console.log(
      `      ${EXCHANGES} exchanges (and their creations) over ${PROCESSES} processes in ${elapsed} ms: ${JSON.stringify(verified)}`,
    );
    // Each exchange writes its creation and its success: 2 rows.
    expect(verified).to.deep.equal({ ok: true, count: EXCHANGES * 2, checkpoints: 0 });
    await log.close();
  });
});
