import { expect } from 'chai';
import Provider from 'oidc-provider';
import pg from 'pg';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import {
  createImpersonation,
  createMemoryAdapter,
  type MemoryAdapterClass,
  type MemoryAdapterOptions,
  type QuotaOutcome,
} from '../../lib/index.js';
import { SESSION_MODEL } from '../../lib/sessions/store.js';
import { SUBJECT_TOKEN_MODEL } from '../../lib/subject-tokens/store.js';
import {
  actorParams,
  apiRequest,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  logout,
  m2mToken,
  managementRequest,
  subjectToken,
  userSignIn,
  type Reply,
} from '../support/http.js';
import { assertRedisReachable, REDIS_URL, redisReachable, redisTestAdapter, testPrefix } from '../support/adapter.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { MINIMAL_CONFIGURATION } from '../support/keys.js';
import { ADAPTERS } from '../support/adapters.js';
import { API, MANAGEMENT, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';
import { createTypicalAdapter, type TypicalAdapterClass } from '../support/typical-adapter.js';
import { adminToken, impersonate, revokeSession, SESSIONS } from '../support/impersonations.js';

/**
 * A deployment that keeps its own adapter (no consumeOnce, no sorted
 * indexes) for everything oidc-provider stores, and gives the plugin a store
 * of its own for subject tokens and impersonation sessions.
 */
describe('the store option: the provider keeps its own adapter', () => {
  describe('validation', () => {
    it('refuses a store that is not an adapter class or factory', () => {
      expect(() => createImpersonation({ managementResource: MANAGEMENT, store: {} as never })).to.throw(
        TypeError,
        /createImpersonation: option "store" must be an adapter class or factory/,
      );
    });

    it('refuses, at creation, a store without consumeOnce: a typical adapter cannot hold subject tokens', () => {
      expect(() => createImpersonation({ managementResource: MANAGEMENT, store: createTypicalAdapter() })).to.throw(
        TypeError,
        /createImpersonation: option "store" has no consumeOnce\(id\).*\(see node_modules\/oidc-provider-impersonation\/docs\/adding-to-your-deployment\.md\)/,
      );
    });

    it('refuses, at creation, a store with consumeOnce but without sorted indexes', () => {
      const Typical = createTypicalAdapter();
      class AtomicOnly extends Typical {
        async consumeOnce(): Promise<boolean> {
          return true;
        }
        async saveWithinQuotas(): Promise<QuotaOutcome> {
          return { outcome: 'saved' };
        }
      }
      expect(() => createImpersonation({ managementResource: MANAGEMENT, store: AtomicOnly })).to.throw(
        TypeError,
        /createImpersonation: option "store" has no sorted indexes.*\(see node_modules\/oidc-provider-impersonation\/docs\/adding-to-your-deployment\.md\)/,
      );
    });

    it("refuses, with the approvals option, a store without indexAddWithin: a customer's bounds need one count-and-add", () => {
      // Every operation the sessions need, none of the bounded one.
      const Memory = createMemoryAdapter();
      class Unbounded extends Memory {
        constructor(name: string) {
          super(name);
          Object.defineProperty(this, 'indexAddWithin', { value: undefined });
        }
      }
      const approvals = { customerResource: 'https://id.example.com/support-access' };
      expect(() => createImpersonation({ managementResource: MANAGEMENT, store: Unbounded, approvals })).to.throw(
        TypeError,
        /createImpersonation: option "store" has no indexAddWithin\(adds, member\).*\(see node_modules\/oidc-provider-impersonation\/docs\/adding-to-your-deployment\.md\)/,
      );
      // Without the option nothing counts a customer's grants: the store is fit.
      createImpersonation({ managementResource: MANAGEMENT, store: Unbounded });
    });

    it('without the option, still refuses a provider adapter without consumeOnce, and names the option as a way out', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider(
        'http://127.0.0.1:1',
        impersonation.configure({ ...MINIMAL_CONFIGURATION, adapter: createTypicalAdapter() }),
      );
      expect(() => impersonation.install(provider)).to.throw(
        TypeError,
        /provider's adapter has no consumeOnce.*\(see node_modules\/oidc-provider-impersonation\/docs\/adding-to-your-deployment\.md\).*store option/,
      );
    });

    it('with the option, accepts a provider adapter that has neither consumeOnce nor sorted indexes', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT, store: createMemoryAdapter() });
      const provider = new Provider(
        'http://127.0.0.1:1',
        impersonation.configure({ ...MINIMAL_CONFIGURATION, adapter: createTypicalAdapter() }),
      );
      expect(() => impersonation.install(provider)).to.not.throw();
    });
  });

  describe('an adapter option given as undefined is the option not given (`url: process.env[...]`)', () => {
    it('the memory adapter: its bounds and protected models as by default', async () => {
      const options: Record<keyof MemoryAdapterOptions, undefined> = {
        max: undefined,
        limits: undefined,
        protectedModels: undefined,
        onEvict: undefined,
        clockTolerance: undefined,
      };
      const modelsOf = async (Memory: MemoryAdapterClass) => {
        for (const model of ['Session', SUBJECT_TOKEN_MODEL]) await new Memory(model).upsert('id-1', {} as never, 60);
        return Memory.stats().models;
      };
      expect(await modelsOf(createMemoryAdapter(options))).to.deep.equal(await modelsOf(createMemoryAdapter()));
    });

    it('the Redis adapter: a client of its own from url, no replicas to wait for', async () => {
      await redisReachable();
      const Redis = createRedisAdapter({
        url: REDIS_URL,
        client: undefined,
        keyPrefix: testPrefix(),
        replicas: undefined,
        replicaTimeoutMs: undefined,
      });
      try {
        const sessions = new Redis('Session');
        await sessions.upsert('id-1', { accountId: 'bob' } as never, 60);
        expect(await sessions.find('id-1')).to.deep.include({ accountId: 'bob' });
      } finally {
        await Redis.close();
      }
    });

    it('the PostgreSQL adapter: its pool from connectionString, its table named by default', async () => {
      const schema = await testSchema();
      const Postgres = createPostgresAdapter({
        connectionString: DATABASE_URL,
        pool: undefined,
        schema,
        table: undefined,
        cleanupInterval: undefined,
        cleanupBatch: undefined,
      });
      try {
        const sessions = new Postgres('Session');
        await sessions.upsert('id-1', { accountId: 'bob' } as never, 60);
        expect(await sessions.find('id-1')).to.deep.include({ accountId: 'bob' });
        expect(await Postgres.cleanup()).to.deep.equal({ entries: 0, indexMembers: 0 });
      } finally {
        await Postgres.close();
      }
      const inspector = new pg.Client({ connectionString: DATABASE_URL });
      await inspector.connect();
      try {
        const { rows } = await inspector.query<{ name: string }>(
          'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1',
          [schema],
        );
        expect(rows.map(({ name }) => name)).to.deep.equal(['oidc_provider_store', 'oidc_provider_store_index']);
      } finally {
        await inspector.end();
      }
    });
  });

  it('the typical adapter is not single-use on its own: find-then-consume lets several of 20 racing callers win', async () => {
    // Why the plugin never keeps subject tokens in such an adapter.
    const Typical = createTypicalAdapter();
    const codes = new Typical('AuthorizationCode');
    await codes.upsert('code-1', { jti: 'code-1' } as never, 60);
    const winners = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const found = await codes.find('code-1');
        if (!found || found.consumed) return false;
        await codes.consume('code-1');
        return true;
      }),
    );
    expect(winners.filter(Boolean).length).to.be.greaterThan(1);
  });

  for (const { name, open } of ADAPTERS) {
    describe(`the plugin's store on ${name}, the provider on a typical adapter`, function () {
      this.timeout(30_000);
      let tp: TestProvider;
      let Typical: TypicalAdapterClass;
      let alice: { accessToken: string; cookies: string };
      let admin: string;

      before(async () => {
        Typical = createTypicalAdapter();
        tp = await startProvider({ adapter: Typical, plugin: { store: await open() } });
        alice = await userSignIn(tp, 'alice');
        admin = await adminToken(tp);
      });
      after(() => tp?.close());

      it('runs the whole flow: sign-in with PKCE, a subject token from the Management API, the exchange with an actor', async () => {
        const created = await managementRequest(
          tp,
          { userId: 'bob', context: { ticketId: 'T-7' } },
          await m2mToken(tp),
        );
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
        const reply = await exchange(tp, {
          subject_token: created.body['subjectToken'] as string,
          resource: API,
          scope: 'profile:read',
          ...actorParams(alice.accessToken),
        });
        expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
        const claims = decodeJwt(reply.body['access_token'] as string);
        expect(claims).to.include({ sub: 'bob', aud: API, scope: 'profile:read' });
        expect(claims['act']).to.deep.equal({ sub: 'alice' });
        expectError(
          await exchange(tp, {
            subject_token: created.body['subjectToken'] as string,
            resource: API,
            scope: 'profile:read',
            ...actorParams(alice.accessToken),
          }),
          400,
          'invalid_request',
          /already used/,
        );
      });

      it("keeps subject tokens and sessions in the store, and only oidc-provider's models in the provider's adapter", async () => {
        await impersonateOn(OPAQUE_API);
        expect(Typical.count(SUBJECT_TOKEN_MODEL)).to.equal(0);
        expect(Typical.count(SESSION_MODEL)).to.equal(0);
        expect(Typical.count('AccessToken'), 'opaque tokens live with the provider').to.be.greaterThan(0);
        expect(Typical.count('Grant')).to.be.greaterThan(0);
      });

      it('redeems a subject token once when 20 exchanges race', async () => {
        const token = await subjectToken(tp);
        const replies = await Promise.all(
          Array.from({ length: 20 }, () =>
            exchange(tp, {
              subject_token: token,
              resource: API,
              scope: 'profile:read',
              ...actorParams(alice.accessToken),
            }),
          ),
        );
        expect(tally(replies)).to.deep.equal({ 200: 1, invalid_request: 19 });
      });

      it('burns nothing on a failed exchange', async () => {
        const token = await subjectToken(tp);
        expectError(
          await exchange(tp, {
            subject_token: token,
            resource: 'https://unknown.example.com',
            ...actorParams(alice.accessToken),
          }),
          400,
          'invalid_target',
        );
        expect(
          (await exchange(tp, { subject_token: token, resource: API, ...actorParams(alice.accessToken) })).status,
        ).to.equal(200);
      });

      it("lists and revokes sessions from the store; the revoked opaque token goes inactive in the provider's adapter", async () => {
        const { token, session } = await impersonateOn(OPAQUE_API);
        const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, admin);
        expect(listed.status).to.equal(200);
        expect((listed.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.include(session);
        expect((await revokeSession(tp, admin, session, { reason: 'ticket closed' })).status).to.equal(204);
        expect((await apiRequest(tp, 'GET', `${SESSIONS}/${session}`, admin)).body).to.include({ state: 'revoked' });
        expect(await introspect(tp, token)).to.deep.equal({ active: false });
      });

      it('withdraws an unredeemed subject token kept in the store', async () => {
        const created = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
        expect(
          (await apiRequest(tp, 'DELETE', `/api/subject-tokens/${created.body['id'] as string}`, admin)).status,
        ).to.equal(204);
        expectError(
          await exchange(tp, {
            subject_token: created.body['subjectToken'] as string,
            resource: API,
            ...actorParams(alice.accessToken),
          }),
          400,
          'invalid_request',
        );
      });

      it('ends the sessions an actor started when the actor signs out', async () => {
        const actor = await userSignIn(tp, 'carol');
        const { session } = await impersonateOn(API, actor.accessToken);
        await logout(tp, actor.cookies);
        const read = await waitFor(async () => {
          const current = await apiRequest(tp, 'GET', `${SESSIONS}/${session}`, admin);
          return current.body['state'] === 'ended' ? current : undefined;
        });
        expect(read.body).to.include({ state: 'ended' });
      });

      /** alice (unless another actor is named) impersonates bob on `resource`, with the scope it grants to read. */
      function impersonateOn(resource: string, actorToken = alice.accessToken) {
        return impersonate(tp, { actorToken, resource, scope: resource === API ? 'profile:read' : 'read' });
      }
    });
  }
});

describe("the store option: the plugin's store unreachable, the provider's adapter up", function () {
  this.timeout(30_000);
  const relay = new TcpRelay(REDIS_URL, 6379);
  let tp: TestProvider;
  let alice: string;

  before(async () => {
    await assertRedisReachable();
    await relay.start();
    tp = await startProvider({
      adapter: createTypicalAdapter(),
      plugin: { store: redisTestAdapter({ url: relay.url }) },
    });
    alice = (await userSignIn(tp, 'alice')).accessToken;
  });
  after(async () => {
    await tp?.close();
    await relay.stop();
  });

  it('fails closed: 503 at creation, 5xx at the exchange, nothing issued or burned; back without a restart', async () => {
    const m2m = await m2mToken(tp);
    const created = await managementRequest(tp, { userId: 'bob' }, m2m);
    expect(created.status).to.equal(201);
    await relay.stop();
    try {
      expectError(await managementRequest(tp, { userId: 'bob' }, m2m), 503, 'temporarily_unavailable');
      const cut = await exchange(tp, {
        subject_token: created.body['subjectToken'] as string,
        resource: API,
        ...actorParams(alice),
      });
      expect(cut.status, JSON.stringify(cut.body)).to.be.within(500, 599);
      expect(cut.body).to.not.have.property('access_token');
    } finally {
      await relay.start();
    }
    const back = await exchange(tp, {
      subject_token: created.body['subjectToken'] as string,
      resource: API,
      ...actorParams(alice),
    });
    expect(back.status, JSON.stringify(back.body)).to.equal(200);
    expect((await managementRequest(tp, { userId: 'bob' }, m2m)).status).to.equal(201);
  });
});

function tally(replies: Reply[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const reply of replies) {
    const key = reply.status === 200 ? '200' : String(reply.body['error']);
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
