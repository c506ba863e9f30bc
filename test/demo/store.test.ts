import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { DEMO_STORE_TABLE, demoStore, type DemoStore } from '../../demo/store.js';
import { demoSecrets } from '../../demo/seed.js';
import pg from 'pg';
import { freePort } from '../../demo/http.js';
import { REDIS_URL } from '../support/adapter.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { postgresRunSchema } from '../support/postgres-adapter.js';
import { exchange, quiet, requestImpersonation, signIn } from './helpers.js';

describe("demo: the identity service's store", function () {
  this.timeout(20_000);

  it('is Redis with REDIS_URL, else PostgreSQL with DATABASE_URL, else memory', async () => {
    const stores: DemoStore[] = [
      demoStore({ REDIS_URL: 'redis://127.0.0.1:6379', DATABASE_URL }),
      demoStore({ DATABASE_URL }),
      demoStore({}),
    ];
    try {
      expect(stores.map((store) => store.description)).to.deep.equal([
        'Redis at 127.0.0.1:6379 (prefix demo:)',
        'PostgreSQL at 127.0.0.1:5432 (table demo_provider_store)',
        'in memory',
      ]);
      expect(stores[2]!.adapter).to.equal(undefined);
    } finally {
      await Promise.all(stores.map((store) => store.adapter?.close()));
    }
  });

  it('says where it is, never with the credentials of its URL', async () => {
    const store = demoStore({ REDIS_URL: 'redis://demo:redis-password@127.0.0.1:6379' });
    try {
      expect(store.description).to.equal('Redis at 127.0.0.1:6379 (prefix demo:)');
    } finally {
      await store.adapter?.close();
    }
  });

  it('is ready once it answers, PostgreSQL once its tables are made, and says so when it cannot be reached', async () => {
    const schema = await testSchema();
    const closedPort = await freePort();
    const reachable = [demoStore({ REDIS_URL }), demoStore({ DATABASE_URL }, { schema }), demoStore({})];
    const unreachable = [
      demoStore({ REDIS_URL: `redis://127.0.0.1:${closedPort}` }),
      demoStore({ DATABASE_URL: `postgres://postgres@127.0.0.1:${closedPort}/test` }),
    ];
    const client = new pg.Client({ connectionString: DATABASE_URL });
    try {
      await Promise.all(reachable.map((store) => store.ready()));
      await client.connect();
      const { rows } = await client.query<{ table: string | null }>('SELECT to_regclass($1)::text AS table', [
        `"${schema}".${DEMO_STORE_TABLE}`,
      ]);
      expect(rows[0]?.table).to.equal(`${schema}.${DEMO_STORE_TABLE}`);
      const failures = await Promise.all(
        unreachable.map((store) =>
          store.ready().then(
            () => null,
            (error: Error) => error,
          ),
        ),
      );
      expect(failures[0]?.message).to.match(/^Redis is unreachable \(connection \w+\)$/);
      expect(failures[1]?.message).to.equal(
        `the PostgreSQL store failed (migration): connect ECONNREFUSED 127.0.0.1:${closedPort}`,
      );
    } finally {
      await client.end();
      await Promise.all([...reachable, ...unreachable].map((store) => store.adapter?.close()));
    }
  });

  describe('two demo instances on one PostgreSQL', () => {
    const instances: Array<{ demo: Demo; store: DemoStore }> = [];

    before(async () => {
      const schema = await postgresRunSchema();
      const secrets = demoSecrets();
      for (let i = 0; i < 2; i += 1) {
        const store = demoStore({ DATABASE_URL }, { schema });
        const demo = await startDemo({ identityPort: 0, backendPort: 0, secrets, adapter: store.adapter!, log: quiet });
        instances.push({ demo, store });
      }
    });

    after(async () => {
      for (const { demo, store } of instances) {
        await demo.close();
        await store.adapter?.close();
      }
    });

    it('redeem on one a subject token requested from the other, exactly once across both', async () => {
      const [first, second] = instances.map(({ demo }) => demo) as [Demo, Demo];
      const alice = await signIn(first, { login: 'alice', password: 'alice-password' });
      const requested = await requestImpersonation(first, alice, {
        userId: 'dave',
        reason: 'Cannot see the invoices',
        ticketId: 'T-1',
      });
      expect(requested.status, JSON.stringify(requested.body)).to.equal(200);
      const subjectToken = requested.body['subjectToken'] as string;

      const redeemed = await exchange(second, subjectToken, alice);
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(decodeJwt(redeemed.body['access_token'] as string)).to.deep.include({
        sub: 'dave',
        act: { sub: 'alice' },
      });
      expect((await exchange(first, subjectToken, alice)).status, 'a replay on the other instance').to.equal(400);
    });
  });
});
