import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import type { AuditSink } from '../../lib/core-options.js';
import { createMemoryAuditLog, EVENTS, type ImpersonationEvent, type ImpersonationEventName } from '../../lib/index.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { DpopKey } from '../support/dpop.js';
import { apiRequest, decodeJwt, exchange, m2mToken, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, SESSIONS, trailEvents } from '../support/impersonations.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, CLIENTS, DOWNSTREAM_API, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';

const RACERS = 20;

/**
 * A deployment's own sink, as plain as one can be: rows in an array, read back newest first. `failOnce`: the event
 * its append refuses once, by a rejection or, `throwsAtOnce`, by a throw before it returns any promise.
 */
function plainSink(
  failOnce?: ImpersonationEventName,
  throwsAtOnce = false,
): AuditSink & { rows: ImpersonationEvent[] } {
  const rows: ImpersonationEvent[] = [];
  let failing = failOnce;
  return {
    rows,
    append: (name, event) => {
      if (name === failing) {
        failing = undefined;
        if (throwsAtOnce) throw new Error('trail down');
        return Promise.reject(new Error('trail down'));
      }
      rows.push(event);
      return Promise.resolve();
    },
    query: async ({ subject, events }) => ({
      items: rows
        .filter((row) => row.subject === subject && (!events || events.includes(row.name)))
        .map((row) => ({ ...row, event: row.name }))
        .reverse(),
      nextCursor: null,
    }),
  };
}

/** Every documented sink outside the store's commit: the PostgreSQL trail on a pool of its own. */
const SINKS: ReadonlyArray<{ name: string; open(): Promise<{ sink: AuditSink; close(): Promise<void> }> }> = [
  { name: 'the memory trail', open: async () => ({ sink: createMemoryAuditLog(), close: async () => {} }) },
  { name: "a deployment's own sink", open: async () => ({ sink: plainSink(), close: async () => {} }) },
  {
    name: 'the PostgreSQL trail beside the store',
    open: async () => {
      const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema: await testSchema() });
      return { sink: log, close: () => log.close() };
    },
  },
];

/** Holds every caller until `count` have arrived, so that all of them reach the commit together. */
function gate(count: number): () => Promise<true> {
  let arrived = 0;
  let release!: () => void;
  const open = new Promise<void>((resolve) => (release = resolve));
  return async () => {
    arrived += 1;
    if (arrived === count) release();
    await open;
    return true;
  };
}

/**
 * The trail says only what happened: a success row is written with its
 * commit or after it, never for an exchange that lost its race, whatever
 * the sink; a request past a share writes nothing, not even its proof's
 * replay entry. Over HTTP, on TEST_ADAPTER's store.
 */
describe(`the trail records only what was committed (${suiteAdapterKind().name})`, function () {
  this.timeout(60_000);

  for (const kind of SINKS) {
    it(`${kind.name}: ${RACERS} redemptions of one subject token at once, one token, one success row, one access on the customer's page`, async () => {
      const { sink, close } = await kind.open();
      const tp = await startProvider({ plugin: { auditLog: sink, canExchange: gate(RACERS) } });
      try {
        const token = await subjectToken(tp, { userId: 'carol' });
        const replies = await Promise.all(
          Array.from({ length: RACERS }, () => exchange(tp, { subject_token: token, resource: API })),
        );
        expect(replies.map((reply) => reply.status).sort()).to.deep.equal([200, ...Array(RACERS - 1).fill(400)]);
        const issued = replies.find((reply) => reply.status === 200)!.body['access_token'] as string;
        const reader = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
        const page = await trailEvents(tp, reader, `?subject=carol&event=${EVENTS.exchangeSucceeded}`);
        expect(page.status, JSON.stringify(page.body)).to.equal(200);
        expect((page.body['items'] as Array<{ sessionId: string }>).map((row) => row.sessionId)).to.deep.equal([
          decodeJwt(issued)['impersonation_session'],
        ]);
      } finally {
        await tp.close();
        await close();
      }
    });
  }

  for (const [refusal, throwsAtOnce] of [
    ['rejects', false],
    ['throws at once', true],
  ] as const)
    it(`a trail that cannot take the success row after the commit (its append ${refusal}): 500, no token, the session ended, nothing burned`, async () => {
      const sink = plainSink(EVENTS.exchangeSucceeded, throwsAtOnce);
      // Without telemetry, whose timing wrapper would make the throw a rejection before the trail sees it.
      const tp = await startProvider({ plugin: { auditLog: sink, ...(throwsAtOnce ? { telemetry: false } : {}) } });
      try {
        const token = await subjectToken(tp, { userId: 'bob' });
        const refused = await exchange(tp, { subject_token: token, resource: API });
        expect(refused.status, JSON.stringify(refused.body)).to.equal(500);
        expect(refused.body).to.not.have.property('access_token');
        const admin = await adminToken(tp);
        expect((await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, admin)).body['items']).to.deep.equal([]);
        // Listed on the revocation feed, which stops its JWT (never delivered) at resource servers.
        const [stopped] = (await apiRequest(tp, 'GET', `${SESSIONS}/revocations`, admin)).body['revoked'] as Array<{
          id: string;
        }>;
        const session = await apiRequest(tp, 'GET', `${SESSIONS}/${stopped!.id}`, admin);
        expect(session.body).to.include({ subject: 'bob', state: 'ended', endReason: 'not_recorded' });
        // The same subject token redeems once the trail takes rows again: one success row, for that session.
        const redeemed = await exchange(tp, { subject_token: token, resource: API });
        expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
        expect(sink.rows.filter((row) => row.subject === 'bob').map((row) => row.name)).to.deep.equal([
          EVENTS.subjectTokenCreated,
          EVENTS.exchangeRefused,
          EVENTS.exchangeSucceeded,
        ]);
        expect(sink.rows.find((row) => row.name === EVENTS.exchangeSucceeded)!.sessionId).to.equal(
          decodeJwt(redeemed.body['access_token'] as string)['impersonation_session'],
        );
      } finally {
        await tp.close();
      }
    });

  describe('delegations past perImpersonationSession', () => {
    const VARIANTS: ReadonlyArray<Record<string, string>> = [
      { resource: DOWNSTREAM_API },
      { resource: API, scope: 'profile:read' },
      { resource: API, scope: 'profile:write' },
      { resource: API, scope: 'profile:read profile:write' },
    ];
    let tp: TestProvider;
    const trail = createMemoryAuditLog();
    let hold: (() => Promise<true>) | undefined;

    before(async () => {
      tp = await startProvider({
        plugin: {
          auditLog: trail,
          delegation: { limits: { perImpersonationSession: 1 }, canDelegate: () => hold?.() ?? true },
        },
      });
    });
    after(() => tp.close());
    beforeEach(() => (hold = undefined));

    const impersonation = async () =>
      (await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), scope: 'profile:read profile:write' }))
        .token;

    it('racing for the last of the share: one success row, none for those refused 429', async () => {
      const token = await impersonation();
      const before = trail.rows.length;
      hold = gate(VARIANTS.length);
      const replies = await Promise.all(
        VARIANTS.map((variant) => exchange(tp, { subject_token: token, ...variant }, CLIENTS.orders)),
      );
      expect(replies.map((reply) => reply.status).sort()).to.deep.equal([200, 429, 429, 429]);
      expect(trail.rows.slice(before).map((row) => row.event)).to.deep.equal([EVENTS.delegationSucceeded]);
    });

    it('refused 429, one after another: no audit row, no DPoP replay entry in the store', async () => {
      const token = await impersonation();
      const key = await DpopKey.generate();
      const proofs = await Promise.all(VARIANTS.map(() => key.proof(`${tp.base}/token`)));
      const delegate = (at: number) =>
        exchange(tp, { subject_token: token, ...VARIANTS[at] }, CLIENTS.orders, { dpop: proofs[at]! });
      const first = await delegate(0);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      const before = trail.rows.length;
      for (let at = 1; at < VARIANTS.length; at += 1) expect((await delegate(at)).status).to.equal(429);
      expect(trail.rows.length).to.equal(before);
      const stored = await Promise.all(
        proofs.map((proof) => {
          const { jti } = decodeJwt(proof) as { jti: string };
          const id = createHash('sha256').update(`${CLIENTS.orders.client_id}${jti}`).digest('base64url');
          return tp.provider.ReplayDetection.find(id);
        }),
      );
      expect(stored.map((entry) => entry !== undefined)).to.deep.equal([true, false, false, false]);
    });
  });
});
