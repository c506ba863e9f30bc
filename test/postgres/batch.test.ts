import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAdapter, type PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, sessionCommit, testTable } from '../support/postgres-adapter.js';
import { TcpRelay } from '../support/relay.js';

/**
 * Operations of one kind asked for in the same turn of the event loop share
 * one statement. The pool is a real one; only its calls are counted.
 */
describe('PostgreSQL adapter: operations of one turn share a statement', () => {
  let pool: pg.Pool;
  let sent: string[];
  let Adapter: PostgresAdapterClass;
  let schema: string;
  let table: string;

  beforeEach(async () => {
    schema = await postgresRunSchema();
    table = testTable();
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
    sent = [];
    const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult>;
    (pool as unknown as { query: typeof query }).query = (...args: unknown[]) => {
      const { name } = args[0] as { name?: string };
      if (name) sent.push(name.replace(/^oidc_imp_[0-9a-f]+_/, ''));
      return query(...args);
    };
    Adapter = createPostgresAdapter({ pool, schema, table, cleanupInterval: 0 });
    await Adapter.migrate();
  });
  afterEach(async () => {
    await Adapter.close();
    await pool.end();
  });

  it('finds by id and by uid, of several models, in one statement, each caller getting its own entry', async () => {
    const sessions = new Adapter('Session');
    const grants = new Adapter('Grant');
    await Promise.all([
      sessions.upsert('s1', { uid: 'u1', accountId: 'alice' }, 60),
      grants.upsert('g1', { accountId: 'alice', clientId: 'c' }, 60),
      grants.upsert('g2', { accountId: 'bob', clientId: 'c' }, 60),
    ]);
    sent = [];
    const found = await Promise.all([
      sessions.findByUid('u1'),
      grants.find('g1'),
      grants.find('missing'),
      sessions.find('s1'),
      grants.find('g2'),
      sessions.findByUid('nobody'),
      grants.find('g1'),
    ]);
    expect(sent).to.deep.equal(['findMany']);
    expect(found.map((entry) => entry?.['accountId'])).to.deep.equal([
      'alice',
      'alice',
      undefined,
      'alice',
      'bob',
      undefined,
      'alice',
    ]);
  });

  it('writes entries and index members of one turn in one statement each; the last write of a key wins', async () => {
    const tokens = new Adapter('AccessToken');
    const sessions = new Adapter('ImpersonationSession');
    await Promise.all([
      tokens.upsert('t1', { jti: 't1', version: 1 }, 60),
      tokens.upsert('t2', { jti: 't2' }, 60),
      tokens.upsert('t1', { jti: 't1', version: 2 }, 60),
      sessions.indexAdd(['active', 'subject:bob', 'active'], 'imp_1', Date.now() + 60_000),
      sessions.indexAdd(['active'], 'imp_2', Date.now() + 30_000),
      sessions.indexAdd(['active'], 'imp_1', Date.now() + 90_000),
    ]);
    expect([...sent].sort()).to.deep.equal(['indexAddMany', 'upsertMany']);
    expect(await tokens.find('t1')).to.deep.include({ version: 2 });
    expect(await tokens.find('t2')).to.deep.include({ jti: 't2' });
    const active = await sessions.indexRange('active', undefined, 10);
    expect(active.map((entry) => entry.member)).to.deep.equal(['imp_1', 'imp_2']);
    expect(active[0]!.expiresAt).to.be.above(Date.now() + 80_000);
    expect((await sessions.indexRange('subject:bob', undefined, 10)).map((entry) => entry.member)).to.deep.equal([
      'imp_1',
    ]);
  });

  it('consumes in one statement: of several callers for one entry the first wins, each entry once', async () => {
    const store = new Adapter('SubjectToken');
    await Promise.all(['a', 'b', 'c'].map((id) => store.upsert(id, { kind: 'SubjectToken' }, 60)));
    await store.consumeOnce('c');
    sent = [];
    const outcomes = await Promise.all([
      store.consumeOnce('a'),
      store.consumeOnce('b'),
      store.consumeOnce('a'),
      store.consumeOnce('c'),
      store.consumeOnce('missing'),
      store.consumeOnce('b'),
    ]);
    expect(sent).to.deep.equal(['consumeMany']);
    expect(outcomes).to.deep.equal([true, true, false, false, false, false]);
  });

  it('fails every caller of a statement that fails, naming the operation and never a value', async () => {
    const store = new Adapter('AccessToken');
    await store.upsert('kept', { jti: 'kept' }, 60);
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(`ALTER TABLE "${schema}"."${table}" RENAME COLUMN payload TO renamed`);
      const secret = 'opaque-token-value-that-must-not-leak';
      const outcomes = await Promise.allSettled([store.find(secret), store.find('kept'), store.findByUid(secret)]);
      for (const outcome of outcomes) {
        expect(outcome.status).to.equal('rejected');
        const error = (outcome as PromiseRejectedResult).reason as Error;
        expect(error.message).to.equal('the PostgreSQL store failed (find): SQLSTATE 42703');
        expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).to.not.include(secret);
      }
    } finally {
      await client.query(`ALTER TABLE "${schema}"."${table}" RENAME COLUMN renamed TO payload`).catch(() => {});
      await client.end();
    }
  });

  it('stores a lifetime beyond what PostgreSQL can add to a date without failing the writes beside it', async () => {
    const store = new Adapter('Client');
    await Promise.all([store.upsert('forever-ish', { id: 1 }, 1e300), store.upsert('next', { id: 2 }, 60)]);
    expect(await store.find('forever-ish')).to.deep.include({ id: 1 });
    expect(await store.find('next')).to.deep.include({ id: 2 });
  });

  it('refuses an index expiry that is not a finite number, or beyond bigint, on its own, without failing the additions beside it', async () => {
    const sessions = new Adapter('ImpersonationSession');
    const [refused, beyond, added] = await Promise.allSettled([
      sessions.indexAdd(['active'], 'imp_bad', Number.NaN),
      sessions.indexAdd(['active'], 'imp_far', 1e300),
      sessions.indexAdd(['active'], 'imp_good', Date.now() + 60_000),
    ]);
    for (const outcome of [refused, beyond]) {
      expect(outcome.status).to.equal('rejected');
      expect(((outcome as PromiseRejectedResult).reason as Error).name).to.equal('TypeError');
    }
    expect(added.status).to.equal('fulfilled');
    expect((await sessions.indexRange('active', undefined, 10)).map((entry) => entry.member)).to.deep.equal([
      'imp_good',
    ]);
  });

  it('fails only the caller whose value PostgreSQL refuses; the others of its statement are served, in order', async () => {
    // Every value the adapter is given is made storable before it joins a batch; a column an
    // operator changed to jsonb refuses what json takes (\u0000), standing in for any value
    // that slips past: the statement is sent again in halves down to the caller that brought it.
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query(`ALTER TABLE "${schema}"."${table}" ALTER COLUMN payload TYPE jsonb`);
    } finally {
      await client.end();
    }
    const store = new Adapter('Interaction');
    await store.upsert('first', { version: 0 }, 60);
    sent = [];
    const outcomes = await Promise.allSettled([
      store.upsert('first', { version: 1 }, 60),
      store.upsert('a', { n: 1 }, 60),
      store.upsert('b', { n: 2 }, 60),
      store.upsert('bad', { note: 'x\u0000' }, 60),
      store.upsert('c', { n: 3 }, 60),
      store.upsert('first', { version: 2 }, 60),
      store.upsert('d', { n: 4 }, 60),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).to.deep.equal([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
      'fulfilled',
    ]);
    expect(((outcomes[3] as PromiseRejectedResult).reason as Error).message).to.equal(
      'the PostgreSQL store failed (upsert): SQLSTATE 22P05',
    );
    expect(sent.every((name) => name === 'upsertMany')).to.equal(true);
    expect(sent.length, 'one statement, then halves down to the bad caller').to.be.within(2, 7);
    expect(await store.find('bad')).to.equal(undefined);
    expect(await store.find('first')).to.deep.include({ version: 2 });
    for (const [id, n] of [
      ['a', 1],
      ['b', 2],
      ['c', 3],
      ['d', 4],
    ] as const)
      expect(await store.find(id)).to.deep.include({ n });
  });

  it('still fails every caller of the statement when PostgreSQL is unreachable, and serves them once it is back', async () => {
    const relay = new TcpRelay(DATABASE_URL, 5432);
    await relay.start();
    const relayed = new pg.Pool({ connectionString: relay.url, connectionTimeoutMillis: 2000 });
    relayed.on('error', () => {});
    let statements = 0;
    const query = relayed.query.bind(relayed) as (...args: unknown[]) => Promise<pg.QueryResult>;
    (relayed as unknown as { query: typeof query }).query = (...args: unknown[]) => {
      if ((args[0] as { name?: string }).name) statements += 1;
      return query(...args);
    };
    const Relayed = createPostgresAdapter({ pool: relayed, schema, table, cleanupInterval: 0 });
    try {
      await Relayed.migrate();
      await relay.stop();
      const store = new Relayed('Interaction');
      const outcomes = await Promise.allSettled(['a', 'b', 'c', 'd'].map((id) => store.upsert(id, { id }, 60)));
      expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(Array(4).fill('rejected'));
      expect(statements, 'an outage is not retried in halves').to.equal(1);
      await relay.start();
      await Promise.all(['a', 'b'].map((id) => store.upsert(id, { id }, 60)));
      expect(await store.find('b')).to.deep.include({ id: 'b' });
    } finally {
      await Relayed.disconnect();
      await relayed.end();
      await relay.stop();
    }
  });

  it('commits as a group commit: those asked for while one is in flight, in turns of their own, go out together next', async () => {
    const tokens = new Adapter('SubjectToken');
    const records = new Adapter('ImpersonationSession');
    const ids = ['a', 'b', 'c', 'd'];
    for (const id of ids) await tokens.upsert(`st-${id}`, { kind: 'SubjectToken' }, 600);
    const commit = (id: string) => records.commitOnce(sessionCommit(id, ['mark:session:u-alice']));
    // Another client holds the first commit's subject token, so that its statement stays in flight.
    const holder = await pool.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${schema}"."${table}" WHERE model = 'SubjectToken' AND id = 'st-a' FOR UPDATE`);
    const commits: Array<Promise<unknown>> = [];
    for (const id of ids) {
      commits.push(commit(id));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const whileInFlight = sent.filter((name) => name.startsWith('commit_')).length;
    await holder.query('COMMIT');
    holder.release();
    const outcomes = await Promise.all(commits);
    expect(whileInFlight, 'the first alone in flight').to.equal(1);
    expect(outcomes.map((outcome) => (outcome as { outcome: string }).outcome)).to.deep.equal(
      Array(ids.length).fill('committed'),
    );
    const statements = sent.filter((name) => name.startsWith('commit_')).length;
    expect(statements, 'the three later ones in one statement').to.equal(2);
  });

  it('sends a full batch at once rather than waiting for the turn to end', async () => {
    const store = new Adapter('Interaction');
    const finds = Array.from({ length: 600 }, (_, at) => store.find(`i${at}`));
    expect(sent.filter((name) => name === 'findMany').length, 'two full batches of 256 before the turn ends').to.equal(
      2,
    );
    await Promise.all(finds);
    expect(sent.filter((name) => name === 'findMany').length).to.equal(3);
  });
});
