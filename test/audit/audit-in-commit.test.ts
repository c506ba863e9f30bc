import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAdapter, type PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { createPostgresAuditLog, type PostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { EVENTS } from '../../lib/index.js';
import { expectError, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, exchangeAsActor, SESSIONS } from '../support/impersonations.js';
import { apiRequest } from '../support/http.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';

const TABLE = 'impersonation_audit';

/**
 * With the PostgreSQL store and the PostgreSQL audit log on one pool, the
 * exchange's success row is written by the statement that commits the
 * exchange: it is durable exactly when the exchange is, a lost race leaves
 * none, and a trail that cannot be written refuses the exchange with nothing
 * burned and nothing listed.
 */
describe('PostgreSQL audit log in the store: the success row in the commit', function () {
  this.timeout(30_000);
  let schema: string;
  let pool: pg.Pool;
  let log: PostgresAuditLog;
  let Store: PostgresAdapterClass;
  let tp: TestProvider;
  const hmac = { hmac: 'checkpoint-secret-5b0c1f7e93a2d468' };
  const statements: string[] = [];

  before(async () => {
    schema = await testSchema();
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 5 });
    // Every statement the pool sends, to tell where the success row was written.
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const [first] = args;
      statements.push(typeof first === 'string' ? first : String((first as { text?: string }).text ?? ''));
      return query(...args);
    };
    Store = createPostgresAdapter({ pool, schema, table: 'store', cleanupInterval: 0 });
    log = createPostgresAuditLog({ pool, schema, signingKey: hmac, checkpointEvery: 3 });
    tp = await startProvider({ adapter: Store, plugin: { auditLog: log } });
  });
  after(async () => {
    await tp?.close();
    await pool?.end();
  });

  const successRows = async () =>
    (
      await pool.query<{ session_id: string }>(
        `SELECT session_id FROM "${schema}"."${TABLE}" WHERE event = $1 ORDER BY seq`,
        [EVENTS.exchangeSucceeded],
      )
    ).rows.map((row) => row.session_id);
  const listed = async (subject: string) =>
    (await apiRequest(tp, 'GET', `${SESSIONS}?subject=${subject}`, await adminToken(tp))).body['items'] as Array<{
      id: string;
    }>;

  it('writes the success row in the statement that redeems the subject token and lists the session', async () => {
    const actorToken = await userAccessToken(tp, 'alice');
    for (const resource of [API, OPAQUE_API, API, OPAQUE_API]) {
      const subject = await subjectToken(tp, { userId: 'bob' });
      statements.length = 0;
      const reply = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      // No group commit of its own: the trail's function runs inside the commit.
      const appendsAlone = statements.filter((text) => /^SELECT seq, hash FROM/.test(text));
      expect(appendsAlone, 'no append of its own').to.deep.equal([]);
      expect(statements.filter((text) => text.includes('journaled AS ('))).to.have.length(1);
    }
    const sessions = (await listed('bob')).map((session) => session.id);
    expect(sessions).to.have.length(4);
    expect((await successRows()).slice(-4).sort()).to.deep.equal([...sessions].sort());
    // The chain and its checkpoints, signed once their rows committed, verify.
    const verified = await log.verify({ key: hmac, requireCheckpoints: true });
    expect(verified.ok, JSON.stringify(verified)).to.equal(true);
  });

  it('writes one row for each of the exchanges committed together, the chain intact', async () => {
    const actorToken = await userAccessToken(tp, 'alice');
    const subjects = await Promise.all(Array.from({ length: 8 }, () => subjectToken(tp, { userId: 'carol' })));
    const before = (await successRows()).length;
    const listedBefore = new Set((await listed('carol')).map((session) => session.id));
    statements.length = 0;
    const replies = await Promise.all(
      subjects.map((subject) => exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: API })),
    );
    expect(replies.map((reply) => reply.status)).to.deep.equal(Array.from({ length: 8 }, () => 200));
    // However many went out together, each exchange's row once, in one call of the trail per statement.
    const commits = statements.filter((text) => text.includes('journaled AS ('));
    expect(commits.length).to.be.within(1, 8);
    const rows = (await successRows()).slice(before);
    expect(rows).to.have.length(8);
    const listedNow = (await listed('carol')).map((session) => session.id);
    expect([...rows].sort()).to.deep.equal(listedNow.filter((id) => !listedBefore.has(id)).sort());
    const verified = await log.verify({ key: hmac });
    expect(verified.ok, JSON.stringify(verified)).to.equal(true);
  });

  it('leaves no success row for the exchanges that lose the race', async () => {
    const actorToken = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp, { userId: 'carol' });
    const before = (await successRows()).length;
    const replies = await Promise.all(
      Array.from({ length: 10 }, () => exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: API })),
    );
    expect(replies.filter((reply) => reply.status === 200)).to.have.length(1);
    expect((await successRows()).length - before).to.equal(1);
    expect((await log.verify({ key: hmac })).ok).to.equal(true);
  });

  it('refuses the exchange when the trail cannot be written: 500, nothing listed, nothing burned, back without a restart', async () => {
    const actorToken = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp, { userId: 'admin' });
    const before = (await successRows()).length;
    await pool.query(`ALTER TABLE "${schema}"."${TABLE}" RENAME TO ${TABLE}_away`);
    let refused;
    try {
      refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: OPAQUE_API });
    } finally {
      await pool.query(`ALTER TABLE "${schema}"."${TABLE}_away" RENAME TO ${TABLE}`);
    }
    expectError(refused, 500, 'server_error');
    expect(await listed('admin')).to.deep.equal([]);
    expect((await successRows()).length).to.equal(before);
    const issued = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: OPAQUE_API });
    expect(issued.status, 'nothing burned').to.equal(200);
    expect((await successRows()).length).to.equal(before + 1);
  });

  /** One exchange on a provider of its own, on the store's pool, with `auditLog`: the statements the pool was sent. */
  async function exchangeOnce(plugin: { auditLog: PostgresAuditLog; telemetry?: false }): Promise<string[]> {
    const other = await startProvider({ adapter: Store, plugin });
    try {
      const actorToken = await userAccessToken(other, 'alice');
      const subject = await subjectToken(other, { userId: 'bob' });
      const before = (await successRows()).length;
      statements.length = 0;
      const reply = await exchangeAsActor(other, { subjectToken: subject, actorToken, resource: API });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const sent = [...statements];
      expect((await successRows()).length).to.equal(before + 1);
      return sent;
    } finally {
      await other.close();
    }
  }

  it('writes the success row in the commit with telemetry off as with it on (Invariant 44)', async () => {
    const auditLog = createPostgresAuditLog({ pool, schema, signingKey: hmac, checkpointEvery: 3 });
    const sent = await exchangeOnce({ auditLog, telemetry: false });
    expect(sent.filter((text) => text.includes('journaled AS ('))).to.have.length(1);
    expect(sent.filter((text) => /^SELECT seq, hash FROM/.test(text))).to.deep.equal([]);
  });

  it('leaves a best-effort log on the same pool out of the commit: its row is appended apart', async () => {
    const auditLog = createPostgresAuditLog({ pool, schema, signingKey: hmac, checkpointEvery: 3, failClosed: false });
    const sent = await exchangeOnce({ auditLog });
    expect(sent.filter((text) => text.includes('journaled AS ('))).to.deep.equal([]);
    expect(sent.filter((text) => /^SELECT seq, hash FROM/.test(text))).to.have.length(1);
    const verified = await log.verify({ key: hmac, requireCheckpoints: true });
    expect(verified.ok, JSON.stringify(verified)).to.equal(true);
  });

  it("records through a deployment's own append when it copies or wraps the log: nothing is journaled past it", async () => {
    const auditLog = createPostgresAuditLog({ pool, schema, signingKey: hmac, checkpointEvery: 3 });
    for (const wrapped of [
      (recorded: string[]) => ({ ...auditLog, append: appendAs(recorded) }),
      (recorded: string[]) =>
        new Proxy(auditLog, {
          get: (target, key, receiver) => (key === 'append' ? appendAs(recorded) : Reflect.get(target, key, receiver)),
        }),
    ]) {
      const recorded: string[] = [];
      const sent = await exchangeOnce({ auditLog: wrapped(recorded) });
      expect(sent.filter((text) => text.includes('journaled AS ('))).to.deep.equal([]);
      expect(recorded).to.include(EVENTS.exchangeSucceeded);
    }

    /** The deployment's append: notes the event's name, then appends it to the log as it is. */
    function appendAs(recorded: string[]): PostgresAuditLog['append'] {
      return async (name, event) => {
        recorded.push(name);
        await auditLog.append(name, event);
      };
    }
  });
});
