import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import {
  createPostgresAuditLog,
  POSTGRES_POOL_OPTIONS,
  type PostgresAuditLog,
  type SignedHead,
} from '../../lib/audit-postgres/index.js';
import { canonicalContent, rowFromContent, rowHash } from '../../lib/audit/chain.js';
import { EVENTS, type AuditQueryFilter } from '../../lib/index.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, CLIENTS, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { exchange, managementRequest, m2mToken, subjectToken } from '../support/http.js';
import { expectFullFlowTrail, runFullFlow, trailEvents } from '../support/impersonations.js';
import { TcpRelay } from '../support/relay.js';
import { runCli } from '../support/cli.js';
import { eventFields } from '../support/trail-rows.js';
import { scaled } from '../support/time.js';

const TABLE = 'impersonation_audit';

describe('PostgreSQL audit log: a hash chain that tells what was changed', function () {
  this.timeout(30_000);
  let schema: string;
  let pool: pg.Pool;
  let log: PostgresAuditLog;
  let tp: TestProvider;
  const hmac = { hmac: 'checkpoint-secret-0f4e9b27a1c86d53' };

  before(async () => {
    schema = await testSchema();
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 5 });
    log = createPostgresAuditLog({ pool, schema, signingKey: hmac, checkpointEvery: 5 });
    tp = await startProvider({
      plugin: { auditLog: log, canImpersonate: ({ subject }) => subject !== 'admin' },
    });
    await runFullFlow(tp);
  });
  after(async () => {
    await tp?.close();
    await pool?.end();
  });

  const table = () => `"${schema}"."${TABLE}"`;

  it('records the whole flow, and the chain verifies', async () => {
    const { rows } = await pool.query(`SELECT event, subject, actor, outcome FROM ${table()} ORDER BY seq`);
    const events = rows.map((row: { event: string }) => row.event);
    expect(events.filter((name) => name === EVENTS.subjectTokenCreated)).to.have.length(4);
    expect(events.filter((name) => name === EVENTS.exchangeSucceeded)).to.have.length(3);
    expect(events).to.include.members([EVENTS.exchangeRefused, EVENTS.sessionRevoked]);
    expect(rows.find((row: { event: string }) => row.event === EVENTS.exchangeSucceeded)).to.include({
      subject: 'bob',
      actor: 'alice',
      outcome: 'success',
    });
    const verified = await log.verify({ key: hmac, requireCheckpoints: true });
    expect(verified).to.deep.equal({ ok: true, count: rows.length, checkpoints: Math.floor(rows.length / 5) });
  });

  const columns = [
    'at',
    'event',
    'subject',
    'actor',
    'client_id',
    'resource',
    'scope',
    'context',
    'subject_token_id',
    'session_id',
    'access_token_id',
    'outcome',
    'reason',
    'content',
    'prev_hash',
    'hash',
  ];
  for (const column of columns) {
    it(`detects an UPDATE of ${column} at the row it changed`, async () => {
      const seq = 4;
      const {
        rows: [before],
      } = await pool.query(`SELECT ${column} AS value FROM ${table()} WHERE seq = $1`, [seq]);
      const forged =
        column === 'at'
          ? new Date(0)
          : column === 'context'
            ? JSON.stringify({ ticketId: 'T-FORGED' })
            : column === 'content'
              ? '["forged"]'
              : 'forged';
      await pool.query(`UPDATE ${table()} SET ${column} = $1 WHERE seq = $2`, [forged, seq]);
      try {
        const result = await log.verify();
        expect(result, JSON.stringify(result)).to.include({ ok: false, seq });
      } finally {
        await pool.query(`UPDATE ${table()} SET ${column} = $1 WHERE seq = $2`, [
          column === 'context' && before.value !== null ? JSON.stringify(before.value) : before.value,
          seq,
        ]);
      }
      expect((await log.verify()).ok).to.equal(true);
    });
  }

  it('detects a deleted row, a swapped pair and an inserted row, each at the right row', async () => {
    const snapshot = (await pool.query(`SELECT * FROM ${table()} ORDER BY seq`)).rows as Array<Record<string, unknown>>;
    const restore = async () => {
      await pool.query(`DELETE FROM ${table()}`);
      for (const row of snapshot) {
        const names = Object.keys(row);
        await pool.query(
          `INSERT INTO ${table()} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`,
          names.map((name) => (name === 'context' && row[name] !== null ? JSON.stringify(row[name]) : row[name])),
        );
      }
      expect((await log.verify()).ok).to.equal(true);
    };

    await pool.query(`DELETE FROM ${table()} WHERE seq = 3`);
    expect(await log.verify()).to.include({ ok: false, seq: 3 });
    await restore();

    // Rows 3 and 4 trade places, numbers kept.
    await pool.query(`UPDATE ${table()} SET seq = -1 WHERE seq = 3`);
    await pool.query(`UPDATE ${table()} SET seq = 3 WHERE seq = 4`);
    await pool.query(`UPDATE ${table()} SET seq = 4 WHERE seq = -1`);
    expect(await log.verify()).to.include({ ok: false, seq: 3 });
    await restore();

    // A row slipped in at 3 with a correct link and hash of its own; the rows after it renumbered.
    await pool.query(`UPDATE ${table()} SET seq = seq + 1000000 WHERE seq >= 3`);
    await pool.query(`UPDATE ${table()} SET seq = seq - 999999 WHERE seq >= 1000000`);
    const previous = snapshot[1]!;
    const content = canonicalContent({ ...rowFromContent(previous['content'] as string), subject: 'carol' });
    await pool.query(
      `INSERT INTO ${table()} SELECT 3, at, event, 'carol', actor, client_id, resource, scope, context, subject_token_id, session_id,
      access_token_id, outcome, reason, $1, $2, $3 FROM ${table()} WHERE seq = 2`,
      [content, previous['hash'], rowHash(previous['hash'] as string, 3, content)],
    );
    expect(await log.verify()).to.include({ ok: false, seq: 4 });
    await restore();
  });

  it('with a key, detects a rewrite of the whole chain from some row on, hashes and head included', async () => {
    const snapshot = (await pool.query(`SELECT seq, content, prev_hash, hash FROM ${table()} ORDER BY seq`))
      .rows as Array<{ seq: string; content: string; prev_hash: string; hash: string }>;
    const {
      rows: [head],
    } = await pool.query(`SELECT seq, hash FROM "${schema}"."${TABLE}_head"`);
    let previous = snapshot[1]!.hash;
    for (const row of snapshot.slice(2)) {
      const content = canonicalContent({ ...rowFromContent(row.content), reason: 'rewritten' });
      const hash = rowHash(previous, row.seq, content);
      await pool.query(
        `UPDATE ${table()} SET content = $1, reason = 'rewritten', prev_hash = $2, hash = $3 WHERE seq = $4`,
        [content, previous, hash, row.seq],
      );
      previous = hash;
    }
    await pool.query(`UPDATE "${schema}"."${TABLE}_head" SET hash = $1`, [previous]);
    try {
      expect((await log.verify()).ok, 'without a key the rewrite is consistent').to.equal(true);
      expect(await log.verify({ key: hmac })).to.include({ ok: false, seq: 5 });
      expect(await log.verify({ key: { hmac: 'another-secret' } })).to.include({ ok: false });
    } finally {
      for (const row of snapshot) {
        const original = rowFromContent(row.content);
        await pool.query(`UPDATE ${table()} SET content = $1, reason = $2, prev_hash = $3, hash = $4 WHERE seq = $5`, [
          row.content,
          original.reason,
          row.prev_hash,
          row.hash,
          row.seq,
        ]);
      }
      await pool.query(`UPDATE "${schema}"."${TABLE}_head" SET hash = $1`, [head.hash]);
    }
    expect((await log.verify({ key: hmac })).ok).to.equal(true);
  });

  it('signs checkpoints and published heads with Ed25519 too, verified with the public key', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const heads: SignedHead[] = [];
    const ed = createPostgresAuditLog({
      pool,
      schema,
      table: 'ed_audit',
      signingKey: { ed25519: privateKey },
      checkpointEvery: 2,
      publishHead: async (head) => {
        heads.push(head);
      },
    });
    for (let i = 0; i < 5; i += 1)
      await ed.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${i}`, subjectTokenId: `stid_${i}` }));
    expect(heads.map(({ seq, alg }) => ({ seq, alg }))).to.deep.equal([
      { seq: 2, alg: 'ed25519' },
      { seq: 4, alg: 'ed25519' },
    ]);
    expect(await ed.verify({ key: { ed25519: publicKey }, requireCheckpoints: true, head: heads })).to.deep.equal({
      ok: true,
      count: 5,
      checkpoints: 2,
    });
    const other = generateKeyPairSync('ed25519').publicKey;
    expect(await ed.verify({ key: { ed25519: other }, head: heads.at(-1)! })).to.include({ ok: false, seq: 4 });
    await pool.query(`DELETE FROM "${schema}"."ed_audit_checkpoints" WHERE seq = 2`);
    expect(await ed.verify({ key: { ed25519: publicKey }, requireCheckpoints: true })).to.include({
      ok: false,
      seq: 2,
    });
  });

  it("serves the trail at GET /api/impersonations/events for a customer's activity view", async () => {
    const admin = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
    const get = (query: string, token = admin) => trailEvents(tp, token, query);
    await expectFullFlowTrail(tp, admin);

    expect((await get('?since=yesterday')).status).to.equal(400);
    expect((await get('?cursor=!!')).status).to.equal(400);
    expect((await get('?limit=0')).status).to.equal(400);
    expect((await get('?what=ever')).status).to.equal(400);
    expect((await get('?subject=bob', await m2mToken(tp))).status).to.equal(403);
  });
});

describe('PostgreSQL audit log: an option given as undefined is the option not given', function () {
  it('appends, verifies and queries with every optional option, and every verify and query option, undefined', async () => {
    const schema = await testSchema();
    const log = createPostgresAuditLog({
      connectionString: DATABASE_URL,
      pool: undefined,
      schema,
      table: undefined,
      failClosed: undefined,
      onFailure: undefined,
      signingKey: undefined,
      checkpointEvery: undefined,
      publishHead: undefined,
    });
    try {
      await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
      expect(await log.verify({ key: undefined, requireCheckpoints: undefined, head: undefined })).to.deep.equal({
        ok: true,
        count: 1,
        checkpoints: 0,
      });
      const everyFilterUndefined: Record<keyof AuditQueryFilter, undefined> = {
        subject: undefined,
        actor: undefined,
        events: undefined,
        since: undefined,
        until: undefined,
        limit: undefined,
        cursor: undefined,
      };
      const { items, nextCursor } = await log.query(everyFilterUndefined);
      expect([items.map((item) => [item.seq, item.subject]), nextCursor]).to.deep.equal([[[1, 'bob']], null]);
    } finally {
      await log.close();
    }
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    const { rows } = await pool.query<{ name: string }>(
      'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1',
      [schema],
    );
    await pool.end();
    expect(rows.map(({ name }) => name)).to.deep.equal([TABLE, `${TABLE}_checkpoints`, `${TABLE}_head`]);
  });
});

describe('PostgreSQL audit log: a "schema" that does not exist', function () {
  this.timeout(30_000);

  it('is refused with a message naming it and what to do, is never created, and works once created', async () => {
    const schema = `test_absent_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const log = createPostgresAuditLog({ pool, schema });
    const expected =
      `createPostgresAuditLog: option "schema" names "${schema}", a schema this database does not have; ` +
      `create it first (CREATE SCHEMA "${schema}"), or correct the option: the tables are created in it, the schema never is`;
    const schemaExists = async () =>
      (await pool.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rowCount === 1;
    try {
      expect(await log.migrate().catch((error: unknown) => (error as Error).message)).to.equal(expected);
      // The first append migrates: it fails the same way, and so writes nothing.
      const appended = await log
        .append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }))
        .catch((error: unknown) => (error as Error).message);
      expect(appended).to.equal(expected);
      expect(await schemaExists()).to.equal(false);

      await pool.query(`CREATE SCHEMA "${schema}"`);
      await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
      expect(await log.verify()).to.deep.equal({ ok: true, count: 1, checkpoints: 0 });
    } finally {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    }
  });
});

describe('PostgreSQL audit log: PostgreSQL unreachable', function () {
  this.timeout(30_000);
  const relay = new TcpRelay(DATABASE_URL, 5432);
  let schema: string;
  before(async () => {
    schema = await testSchema();
    await relay.start();
  });
  afterEach(() => relay.start());
  after(() => relay.stop());

  it('fails closed: no subject token and no impersonation token without its record, nothing burned, back without a restart', async () => {
    const log = createPostgresAuditLog({ connectionString: relay.url, schema });
    const tp = await startProvider({ plugin: { auditLog: log } });
    try {
      const subject = await subjectToken(tp);
      await relay.stop();
      const created = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
      expect(created.status, JSON.stringify(created.body)).to.equal(503);
      expect(created.body).to.include({ error: 'temporarily_unavailable' });
      expect(created.body).to.not.have.property('subjectToken');
      const refused = await exchange(tp, { subject_token: subject, resource: API });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(500);
      expect(refused.body).to.not.have.property('access_token');

      await relay.start();
      const redeemed = await exchange(tp, { subject_token: subject, resource: API });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect((await log.verify()).ok).to.equal(true);
    } finally {
      await tp.close();
      await log.close();
    }
  });

  it('fails closed within the query timeout when PostgreSQL accepts the connection but never answers, and recovers', async () => {
    const log = createPostgresAuditLog({ connectionString: relay.url, schema, table: 'hung' });
    const tp = await startProvider({ plugin: { auditLog: log } });
    const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
      Promise.race([
        promise,
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)),
      ]);
    try {
      const subject = await subjectToken(tp);
      relay.frozen = true;
      const started = Date.now();
      const refused = await within(exchange(tp, { subject_token: subject, resource: API }), 12_000);
      expect(refused.status, JSON.stringify(refused.body)).to.be.within(500, 599);
      expect(refused.body).to.not.have.property('access_token');
      expect(Date.now() - started).to.be.below(scaled(POSTGRES_POOL_OPTIONS.query_timeout + 3000));
      const created = await within(managementRequest(tp, { userId: 'bob' }, await m2mToken(tp)), 12_000);
      expect(created.status, JSON.stringify(created.body)).to.equal(503);

      relay.frozen = false;
      const redeemed = await exchange(tp, { subject_token: subject, resource: API });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect((await log.verify()).ok).to.equal(true);
    } finally {
      relay.frozen = false;
      await tp.close();
      await log.close();
    }
  });

  it("serves the deployment's own trail before its first row: empty, not unavailable", async () => {
    const fresh = createPostgresAuditLog({ connectionString: DATABASE_URL, schema: await testSchema() });
    const empty = await startProvider({ plugin: { auditLog: fresh } });
    try {
      const reader = await m2mToken(empty, CLIENTS.admin, READ_SCOPE);
      const page = await trailEvents(empty, reader, '?subject=bob');
      expect(page.status, JSON.stringify(page.body)).to.equal(200);
      expect(page.body['items']).to.deep.equal([]);
    } finally {
      await empty.close();
      await fresh.close();
    }
  });

  it('closes with close(), twice harmlessly, as the adapters do', async () => {
    const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema, table: 'closing' });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    await log.close();
    await log.close();
    let caught: unknown;
    try {
      await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    } catch (error) {
      caught = error;
    }
    expect(caught).to.be.instanceOf(Error);
  });

  it('in best effort (failClosed: false), goes on and counts what it could not write', async () => {
    const failures: unknown[] = [];
    const log = createPostgresAuditLog({
      connectionString: relay.url,
      schema,
      table: 'best_effort',
      failClosed: false,
      onFailure: (error) => failures.push(error),
    });
    const tp = await startProvider({ plugin: { auditLog: log } });
    try {
      await log.migrate();
      await relay.stop();
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
      expect(result.status).to.equal(200);
      expect(log.failures).to.equal(2);
      expect(failures).to.have.length(2);
    } finally {
      await tp.close();
      await log.close();
    }
  });
});

const COMMAND_KEY = 'command-key-c93e0a5d17b46f28e1a7';

describe('the command: audit verify and audit export', function () {
  this.timeout(30_000);

  const run = (args: string[]) => runCli(args, { AUDIT_KEY: COMMAND_KEY });

  it('prints ok with the count and exits 0, names the first bad row and exits 1; exports JSON lines and CSV', async () => {
    const schema = await testSchema();
    const log = createPostgresAuditLog({
      connectionString: DATABASE_URL,
      schema,
      signingKey: { hmac: COMMAND_KEY },
      checkpointEvery: 2,
    });
    for (let i = 0; i < 4; i += 1)
      await log.append(
        EVENTS.subjectTokenCreated,
        eventFields({
          subject: `user-${i}`,
          context: { ticketId: `T-${i}`, reason: 'a, "quoted" reason' },
        }),
      );
    const base = ['audit', 'verify', '--database-url', DATABASE_URL, '--schema', schema];
    expect(await run(base)).to.include({ code: 0, stdout: 'ok: 4 rows verified\n' });
    expect(await run([...base, '--key', 'hmac-env:AUDIT_KEY', '--require-checkpoints', '2'])).to.include({
      code: 0,
      stdout: 'ok: 4 rows verified, 2 signed checkpoints\n',
    });

    const exported = await run([
      'audit',
      'export',
      '--database-url',
      DATABASE_URL,
      '--schema',
      schema,
      '--format',
      'jsonl',
    ]);
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { seq: number; subject: string; hash: string });
    expect(lines.map((line) => line.seq)).to.deep.equal([1, 2, 3, 4]);
    const csv = await run([
      'audit',
      'export',
      '--database-url',
      DATABASE_URL,
      '--schema',
      schema,
      '--format',
      'csv',
      '--since',
      '2000-01-01T00:00:00Z',
    ]);
    expect(csv.stdout.split('\n')[0]).to.match(/^seq,at,event,subject/);
    expect(csv.stdout).to.include('"{""reason"":""a, \\""quoted\\"" reason""');

    await log.close();
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    await pool.query(`UPDATE "${schema}"."impersonation_audit" SET subject = 'mallory' WHERE seq = 3`);
    await pool.end();
    const bad = await run(base);
    expect(bad.code).to.equal(1);
    expect(bad.stdout).to.match(/^bad row 3: /);
    expect((await run(['audit', 'nonsense'])).code).to.equal(2);
  });
});
