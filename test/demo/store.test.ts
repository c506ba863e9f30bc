import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { demoStore, type DemoStore } from '../../demo/store.js';
import { demoSecrets } from '../../demo/seed.js';
import { DATABASE_URL } from '../support/postgres.js';
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
        'Redis at redis://127.0.0.1:6379 (prefix demo:)',
        'PostgreSQL at 127.0.0.1:5432 (table demo_provider_store)',
        'in memory',
      ]);
      expect(stores[2]!.adapter).to.equal(undefined);
    } finally {
      await Promise.all(stores.map((store) => store.adapter?.close()));
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
        userId: 'bob',
        reason: 'Cannot see the invoices',
        ticketId: 'T-1',
      });
      expect(requested.status, JSON.stringify(requested.body)).to.equal(200);
      const subjectToken = requested.body['subjectToken'] as string;

      const redeemed = await exchange(second, subjectToken, alice);
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(decodeJwt(redeemed.body['access_token'] as string)).to.deep.include({ sub: 'bob', act: { sub: 'alice' } });
      expect((await exchange(first, subjectToken, alice)).status, 'a replay on the other instance').to.equal(400);
    });
  });
});
