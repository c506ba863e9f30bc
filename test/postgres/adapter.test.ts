import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAdapter, type PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';
import { scaled } from '../support/time.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('PostgreSQL adapter', () => {
  let client: pg.Client;
  let schema: string;
  let table: string;
  let Adapter: PostgresAdapterClass;

  before(async () => {
    schema = await postgresRunSchema();
    client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
  });
  after(() => client?.end());
  beforeEach(async () => {
    table = testTable();
    Adapter = await postgresTestAdapter({ table });
  });

  /** The row of `model`/`id` as stored, or undefined. */
  async function row(model: string, id: string): Promise<Record<string, unknown> | undefined> {
    const { rows } = await client.query(`SELECT * FROM "${schema}"."${table}" WHERE model = $1 AND id = $2`, [
      model,
      id,
    ]);
    return rows[0] as Record<string, unknown> | undefined;
  }

  it('keeps an expired row, unconsumed, until the sweep', async () => {
    const codes = new Adapter('DeviceCode');
    await codes.upsert('code', { accountId: 'bob' }, 0.2);
    await sleep(350);
    expect(await codes.find('code')).to.equal(undefined);
    expect(await row('DeviceCode', 'code'), 'the row is still there until the sweep').to.not.equal(undefined);
    expect(await codes.consumeOnce('code')).to.equal(false);
    expect((await row('DeviceCode', 'code'))!['consumed']).to.equal(null);
  });

  it('clears the grant id of an entry replaced without one', async () => {
    const adapter = new Adapter('RefreshToken');
    await adapter.upsert('rt', { accountId: 'bob', grantId: 'g-old' }, 60);
    await adapter.upsert('rt', { accountId: 'carol' }, 60);
    expect(await row('RefreshToken', 'rt')).to.include({ grant_id: null });
  });

  it('gives back what JSON keeps, and keeps "__proto__" a member', async () => {
    const tokens = new Adapter('AccessToken');
    await tokens.upsert(
      'a',
      { jti: 'a', scope: undefined, at: new Date(0) as never, ...JSON.parse('{"extra":{"__proto__":{"admin":true}}}') },
      60,
    );
    const found = (await tokens.find('a'))! as Record<string, unknown> & { extra: Record<string, unknown> };
    expect(found).to.deep.equal({
      jti: 'a',
      at: '1970-01-01T00:00:00.000Z',
      extra: JSON.parse('{"__proto__":{"admin":true}}'),
    });
    expect(Object.getPrototypeOf(found.extra)).to.equal(Object.prototype);
    expect((found.extra as { admin?: boolean }).admin).to.equal(undefined);
  });

  it('keeps models apart, one row per model and id', async () => {
    await new Adapter('AccessToken').upsert('tok', { grantId: 'g1' }, 60);
    expect(await new Adapter('RefreshToken').find('tok')).to.equal(undefined);
    expect(await row('AccessToken', 'tok')).to.include({
      model: 'AccessToken',
      id: 'tok',
      grant_id: 'g1',
      consumed: null,
    });
  });

  it('takes any id, uid, user code, grant id or index name: NUL, lone surrogates, 100 kB', async () => {
    const odd = ['nul\u0000inside', 'lone \ud800 surrogate', '\u0001reserved', 'x'.repeat(100_000), '界'.repeat(1024)];
    const tokens = new Adapter('AccessToken');
    const sessions = new Adapter('ImpersonationSession');
    for (const [at, value] of odd.entries()) {
      await tokens.upsert(value, { uid: value, userCode: value, grantId: value, n: at }, 60);
      expect(await tokens.find(value)).to.deep.include({ n: at });
      expect(await tokens.findByUid(value)).to.deep.include({ n: at });
      expect(await tokens.findByUserCode(value)).to.deep.include({ n: at });
      await sessions.indexAdd([`subject:${value}`], `member-${at}`, Date.now() + 60_000);
      expect(await sessions.indexRange(`subject:${value}`, undefined, 10)).to.have.length(1);
    }
    // An index named twice in one call is added to once.
    await sessions.indexAdd(['twice', 'twice'], 'member', Date.now() + 60_000);
    expect(await sessions.indexRange('twice', undefined, 10)).to.have.length(1);
    // Each value is a key of its own: none finds another's entry.
    expect(await tokens.find('nul')).to.equal(undefined);
    expect(await tokens.find('lone \udbff surrogate')).to.equal(undefined);
    for (const value of odd) await tokens.revokeByGrantId(value);
    for (const value of odd) expect(await tokens.find(value)).to.equal(undefined);
    // A position no stored member could have (a made-up cursor) is still a position in JavaScript's order.
    const expiresAt = Date.now() + 60_000;
    await sessions.indexAdd(['all'], 'b', expiresAt);
    await sessions.indexAdd(['all'], 'a', expiresAt);
    const after = async (member: string) =>
      (await sessions.indexRange('all', { expiresAt, member }, 10)).map((entry) => entry.member);
    expect(await after('b\u0000')).to.deep.equal(['b', 'a']);
    expect(await after('a\ud800')).to.deep.equal(['a']);
    expect(await after('\u0000')).to.deep.equal([]);
    expect(await after('b'.repeat(300))).to.deep.equal(['b', 'a']);
    await sessions.indexRemove(['all'], 'nul\u0000member');
  });

  it('deletes expired entries and index members in batches, and leaves live ones', async () => {
    const Swept = await postgresTestAdapter({ cleanupInterval: 0, cleanupBatch: 3 });
    const tokens = new Swept('AccessToken');
    const sessions = new Swept('ImpersonationSession');
    for (let i = 0; i < 10; i += 1) await tokens.upsert(`gone-${i}`, { i }, 0.1);
    await tokens.upsert('kept', { i: 'kept' }, 60);
    await tokens.upsert('forever', { i: 'forever' });
    for (let i = 0; i < 7; i += 1) await sessions.indexAdd(['all'], `gone-${i}`, Date.now() + 100);
    await sessions.indexAdd(['all'], 'kept', Date.now() + 60_000);
    await sleep(200);
    expect(await Swept.cleanup()).to.deep.equal({ entries: 10, indexMembers: 7 });
    expect(await Swept.cleanup()).to.deep.equal({ entries: 0, indexMembers: 0 });
    expect(await tokens.find('kept')).to.deep.equal({ i: 'kept' });
    expect(await tokens.find('forever')).to.deep.equal({ i: 'forever' });
    expect((await sessions.indexRange('all', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['kept']);
  });

  it('sweeps on its own timer', async () => {
    const name = testTable();
    const Swept = await postgresTestAdapter({ table: name, cleanupInterval: 100 });
    await new Swept('AccessToken').upsert('gone', { jti: 'gone' }, 0.05);
    const deadline = Date.now() + scaled(3000);
    let left = 1;
    while (left && Date.now() < deadline) {
      await sleep(100);
      left = Number((await client.query(`SELECT count(*) FROM "${schema}"."${name}"`)).rows[0].count);
    }
    expect(left).to.equal(0);
  });

  it("compares keys byte by byte, whatever the database's collation", async () => {
    await new Adapter('ImpersonationSession').indexAdd(['all'], 'm', Date.now() + 60_000);
    const { rows } = await client.query(
      `SELECT table_name, column_name, collation_name FROM information_schema.columns
        WHERE table_schema = $1 AND table_name IN ($2, $3) AND data_type = 'text' ORDER BY table_name, column_name`,
      [schema, table, `${table}_index`],
    );
    expect(rows.map((r: { collation_name: string | null }) => r.collation_name)).to.deep.equal(
      Array(rows.length).fill('C'),
    );
    expect(rows.map((r: { column_name: string }) => r.column_name)).to.include.members(['id', 'uid', 'member', 'name']);
  });

  it('migrates idempotently, from several instances at once', async () => {
    const name = testTable();
    const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: DATABASE_URL, max: 2 }));
    try {
      await Promise.all(
        pools.map((pool) => createPostgresAdapter({ pool, schema, table: name, cleanupInterval: 0 }).migrate()),
      );
      await createPostgresAdapter({ pool: pools[0]!, schema, table: name, cleanupInterval: 0 }).migrate();
      const { rows } = await client.query(
        'SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename LIKE $2 ORDER BY tablename',
        [schema, `${name}%`],
      );
      expect(rows.map((r: { tablename: string }) => r.tablename)).to.deep.equal([name, `${name}_index`]);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  it('starts on tables an owner made, under a role that may not create any', async () => {
    const role = `store_app_${process.pid}_${Date.now()}`;
    await client.query(`CREATE ROLE "${role}" LOGIN`);
    await client.query(`GRANT USAGE ON SCHEMA "${schema}" TO "${role}"`);
    await client.query(
      `GRANT SELECT, INSERT, UPDATE, DELETE ON "${schema}"."${table}", "${schema}"."${table}_index" TO "${role}"`,
    );
    const url = new URL(DATABASE_URL);
    url.username = role;
    const AsApp = createPostgresAdapter({ connectionString: url.href, schema, table, cleanupInterval: 0 });
    const Creating = createPostgresAdapter({
      connectionString: url.href,
      schema,
      table: testTable(),
      cleanupInterval: 0,
    });
    try {
      await new AsApp('SubjectToken').upsert('as-app', { kind: 'SubjectToken' }, 60);
      expect(await new AsApp('SubjectToken').consumeOnce('as-app')).to.equal(true);
      const refused = await expectRejection(Creating.migrate());
      expect(refused.message).to.equal('the PostgreSQL store failed (migration): SQLSTATE 42501');
    } finally {
      await AsApp.disconnect();
      await Creating.disconnect();
      await client.query(`DROP OWNED BY "${role}"`);
      await client.query(`DROP ROLE "${role}"`);
    }
  });

  it('rejects, never resolves false, when PostgreSQL cannot be reached', async () => {
    // Nothing listens on port 1 of the loopback interface.
    const Unreachable = createPostgresAdapter({
      connectionString: 'postgres://postgres@127.0.0.1:1/test',
      schema,
      table,
    });
    try {
      const started = Date.now();
      const adapter = new Unreachable('SubjectToken');
      await expectRejection(adapter.consumeOnce('x'));
      await expectRejection(adapter.find('x'));
      await expectRejection(adapter.upsert('x', {}, 60));
      await expectRejection(adapter.indexRange('all', undefined, 10));
      expect(Date.now() - started).to.be.below(scaled(5000));
    } finally {
      await Unreachable.disconnect();
    }
  });

  it('reports a failure by operation and SQLSTATE, never with a value it was given', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    try {
      const Broken = createPostgresAdapter({ pool, schema, table, cleanupInterval: 0 });
      await Broken.migrate();
      // A column the statements name, gone: every statement fails on the server.
      await client.query(`ALTER TABLE "${schema}"."${table}" RENAME COLUMN payload TO renamed`);
      const secret = 'opaque-token-value-that-must-not-leak';
      const error = await expectRejection(new Broken('AccessToken').upsert(secret, { jti: secret }, 60));
      expect(error.message).to.equal('the PostgreSQL store failed (upsert): SQLSTATE 42703');
      expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).to.not.include(secret);
    } finally {
      await pool.end();
    }
  });

  it('leaves a pool passed in open, and ends its own', async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    try {
      const Passed = createPostgresAdapter({ pool, schema, table });
      await new Passed('SubjectToken').upsert('p', { kind: 'SubjectToken' }, 60);
      await Passed.disconnect();
      expect((await pool.query('SELECT 1 AS one')).rows[0].one).to.equal(1);
      await expectRejection(new Passed('SubjectToken').find('p'));
    } finally {
      await pool.end();
    }
    const Own = createPostgresAdapter({ connectionString: DATABASE_URL, schema, table });
    await new Own('Session').find('x');
    await Own.disconnect();
    await Own.disconnect();
    await expectRejection(new Own('Session').find('x'));
  });

  it('closes with close(), as the audit log does; disconnect() (deprecated) does the same', async () => {
    const Closing = createPostgresAdapter({ connectionString: DATABASE_URL, schema, table });
    await new Closing('Session').find('x');
    await Closing.close();
    await Closing.close();
    await Closing.disconnect();
    await expectRejection(new Closing('Session').find('x'));
    const Old = createPostgresAdapter({ connectionString: DATABASE_URL, schema, table });
    await new Old('Session').find('x');
    await Old.disconnect();
    await expectRejection(new Old('Session').find('x'));
  });

  it('checks its options up front', () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    try {
      expect(() => createPostgresAdapter({})).to.throw(TypeError, /"pool" or "connectionString"/);
      expect(() => createPostgresAdapter({ pool, connectionString: DATABASE_URL })).to.throw(
        TypeError,
        /"pool" or "connectionString"/,
      );
      expect(() => createPostgresAdapter({ pool, table: 'x; DROP TABLE y' })).to.throw(TypeError, /table/);
      expect(() => createPostgresAdapter({ pool, schema: 'a"b' })).to.throw(TypeError, /schema/);
      expect(() => createPostgresAdapter({ pool, cleanupInterval: -1 })).to.throw(TypeError, /cleanupInterval/);
      expect(() => createPostgresAdapter({ pool, cleanupBatch: 0 })).to.throw(TypeError, /cleanupBatch/);
    } finally {
      void pool.end();
    }
  });
});

async function expectRejection(promise: Promise<unknown>): Promise<Error> {
  let outcome: unknown = 'resolved';
  try {
    outcome = await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(Error);
    return error as Error;
  }
  return expect.fail(`expected a rejection, got ${JSON.stringify(outcome)}`);
}
