import { expect } from 'chai';
import pg from 'pg';
import type { ReadAheadAdapter } from '../../lib/adapters/contracts/read-ahead.js';
import { createPostgresAdapter, type PostgresAdapterClass } from '../../lib/adapters/postgres.js';
import { logout, subjectToken, userAccessToken, userSignIn } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresRunSchema, testTable } from '../support/postgres-adapter.js';
import { findEachTwice, readAheadAndFind, signedIn } from '../support/read-ahead.js';
import { startProvider, type TestProvider } from '../support/provider.js';

/** The finds among the statements `texts` holds (a lookup by id or `by_uid`): findMany, or findManyAhead (which names `via`). */
function finds(texts: readonly string[]): { plain: number; ahead: number } {
  const found = texts.filter((text) => text.includes('by_uid'));
  const ahead = found.filter((text) => text.includes('AS via')).length;
  return { plain: found.length - ahead, ahead };
}

/**
 * Honouring an opaque actor token reads the token, then its session and its
 * Grant. On PostgreSQL the three are rows of one table: the adapter reads the
 * two with the token, in one statement (the plugin calls its adapter's
 * readAhead first), and hands each to the next find of it in that turn of the
 * event loop. The statements are read as PostgreSQL runs them (auto_explain,
 * sent to this client).
 */
describe('PostgreSQL adapter: an opaque actor token, its session and its Grant in one statement', function () {
  this.timeout(60_000);
  let pool: pg.Pool | undefined;
  let Adapter: PostgresAdapterClass | undefined;
  let tp: TestProvider | undefined;
  let entriesTable = '';
  const texts: string[] = [];

  beforeEach(async () => {
    texts.length = 0;
    pool = new pg.Pool({
      connectionString: DATABASE_URL,
      max: 2,
      options:
        '-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 -c client_min_messages=log',
    });
    pool.on('connect', (client) => {
      client.on('notice', (notice) => {
        if (notice.message?.includes('Query Text')) texts.push(notice.message);
      });
    });
    const schema = await postgresRunSchema();
    const table = testTable();
    entriesTable = `"${schema}"."${table}"`;
    Adapter = createPostgresAdapter({ pool, schema, table, cleanupInterval: 0 });
  });
  afterEach(async () => {
    await tp?.close();
    await Adapter?.close();
    await pool?.end();
    tp = undefined;
    Adapter = undefined;
    pool = undefined;
  });

  it('reads them in the statement that finds the token, and reads the Grant and sign-in again once, after its announcement', async () => {
    tp = await startProvider({ adapter: Adapter! });
    const alice = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp);
    texts.length = 0;
    const result = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    // The actor token with its session and Grant; then those two again, after the announcement (Invariant 23).
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 1 });
  });

  it('refuses the token once its session has ended, read in the same statement', async () => {
    tp = await startProvider({ adapter: Adapter! });
    const { accessToken: alice, cookies } = await userSignIn(tp, 'alice');
    await logout(tp, cookies);
    const result = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: alice });
    expect(result.status, JSON.stringify(result.body)).to.equal(400);
  });

  /** Access token `at1`, its sign-in `u1` and its Grant `g1`, stored. */
  const seeded = () => signedIn(Adapter!, { kind: 'AccessToken', sessionUid: 'u1', grantId: 'g1' });

  it('answers the next find of each from what it read ahead, once and within the turn; any other find reads afresh', async () => {
    const adapters = await seeded();
    const { tokens, sessions, grants } = adapters;
    await readAheadAndFind(adapters);
    expect(finds(texts)).to.deep.equal({ plain: 0, ahead: 1 });
    // Taken once: a second find reads afresh.
    expect(await grants.find('g1')).to.include({ accountId: 'alice' });
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 1 });

    // Changed since: what was read ahead and not taken within its turn is dropped, and a find reads the change.
    await tokens.readAhead!('at1');
    await new Promise((resolve) => setImmediate(resolve));
    await sessions.destroy('s1');
    await grants.destroy('g1');
    expect(await sessions.findByUid('u1')).to.equal(undefined);
    expect(await grants.find('g1')).to.equal(undefined);
    expect(await tokens.find('at1')).to.include({ sessionUid: 'u1' });
    expect(finds(texts)).to.deep.equal({ plain: 4, ahead: 2 });
  });

  it('answers the finds of each readAhead: two exchanges reading one token in one statement read nothing again', async () => {
    const { tokens, sessions, grants } = await seeded();
    await Promise.all([tokens.readAhead!('at1'), tokens.readAhead!('at1')]);
    await findEachTwice({ tokens, sessions, grants });
    expect(finds(texts)).to.deep.equal({ plain: 0, ahead: 1 });
    // Two answers each, no more: a third find reads afresh.
    await grants.find('g1');
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 1 });
  });

  /** Reads `at1` ahead while the entries' table is locked, runs `meanwhile`, then finds all three in the read's turn. */
  async function readAheadAround(meanwhile: () => Promise<void>): Promise<void> {
    const { tokens, grants } = await seeded();
    const holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE ${entriesTable} IN ACCESS EXCLUSIVE MODE`);
      const reading = tokens.readAhead!('at1');
      await meanwhile();
      await holder.query('COMMIT');
      await reading;
      texts.length = 0;
      // Found in the turn the read was answered in: had it left them, these would take them.
      const [token, grant] = await Promise.all([tokens.find('at1'), grants.find('g1')]);
      expect(token).to.include({ sessionUid: 'u1' });
      expect(grant).to.include({ accountId: 'alice' });
    } finally {
      await holder.end();
    }
  }

  it('leaves nothing of a read that a write of the store was answered during: the next finds read afresh', async () => {
    await readAheadAround(async () => {
      await new Adapter!('ImpersonationSession').indexAdd!(['probe'], 'm1', Date.now() + 60_000);
    });
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 0 });
  });

  it('leaves one sign-in per readAhead when two live sessions share its uid (a rotation in progress)', async () => {
    const { tokens, sessions } = await seeded();
    await sessions.upsert('s2', { kind: 'Session', uid: 'u1', accountId: 'alice' } as never, 600);
    await tokens.readAhead!('at1');
    await Promise.all([sessions.findByUid('u1'), sessions.findByUid('u1')]);
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 1 });
  });

  it("keeps a read across a commit of the plugin's own records answered meanwhile: it changes no token, sign-in or Grant", async () => {
    const { tokens, sessions, grants } = await seeded();
    const subjectTokens = new Adapter!('SubjectToken');
    await subjectTokens.upsert('st1', { kind: 'SubjectToken' } as never, 600);
    const holder = new pg.Client({ connectionString: DATABASE_URL });
    await holder.connect();
    try {
      // The commit waits for the subject token's row; a sleep takes the pool's other connection.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${entriesTable} WHERE model = 'SubjectToken' FOR UPDATE`);
      const committing = new Adapter!('ImpersonationSession').commitOnce({
        consume: { model: 'SubjectToken', id: 'st1' },
        write: { model: 'ImpersonationSession', id: 'imp_1', payload: { kind: 'probe' } as never, expiresIn: 600 },
        indexes: ['probe'],
        expiresAt: Date.now() + 600_000,
        guards: [],
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const sleeping = pool!.query('SELECT pg_sleep(1.5)');
      // Sent now, read once the commit's connection is free: after the commit is answered.
      const reading = tokens.readAhead!('at1');
      await holder.query('COMMIT');
      expect(await committing).to.deep.include({ outcome: 'committed' });
      await reading;
      texts.length = 0;
      const [token, signIn, grant] = await Promise.all([
        tokens.find('at1'),
        sessions.findByUid('u1'),
        grants.find('g1'),
      ]);
      expect([token, signIn, grant].every((payload) => payload !== undefined)).to.equal(true);
      expect(finds(texts)).to.deep.equal({ plain: 0, ahead: 0 });
      await sleeping;
    } finally {
      await holder.end();
    }
  });

  it('leaves nothing of a read once told that another store wrote (an announcement elsewhere, Invariant 23)', async () => {
    await readAheadAround(async () => {
      // The read goes out at the end of its turn, and waits behind the lock.
      await new Promise((resolve) => setTimeout(resolve, 100));
      (new Adapter!('Grant') as ReadAheadAdapter).forgetReadAheads!();
    });
    expect(finds(texts)).to.deep.equal({ plain: 1, ahead: 0 });
  });
});
