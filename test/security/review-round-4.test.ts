import { createHash, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { generateKeyPair, SignJWT, type JSONWebKeySet } from 'jose';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import type { AuditSink } from '../../lib/core-options.js';
import { createImpersonationVerifier, type ImpersonationVerifier } from '../../lib/resource-server/index.js';
import {
  createMemoryAdapter,
  createMemoryAuditLog,
  EVENTS,
  type ImpersonationEvent,
  type MemoryAuditLog,
} from '../../lib/index.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { askForSubjectToken, newCustomer, startApprovalProvider } from '../support/approvals.js';
import { startDecisionPoint, type DecisionPoint } from '../support/decision-point.js';
import { DpopKey } from '../support/dpop.js';
import {
  apiRequest,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  logout,
  m2mToken,
  managementRequest,
  subjectToken,
  userAccessToken,
  userSignIn,
} from '../support/http.js';
import { adminToken, impersonate, SESSIONS, trailEvents } from '../support/impersonations.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { pushEndpoint } from '../support/push-endpoint.js';
import { POLL, RECEIVERS, receiverToken, ssfRequest, startSsfProvider, STREAMS, VERIFICATION } from '../support/ssf.js';
import {
  ACCESS_TOKEN,
  API,
  CLIENTS,
  CUSTOMER_API,
  CUSTOMER_SCOPE,
  DOWNSTREAM_API,
  OPAQUE_API,
  startProvider,
  type TestProvider,
} from '../support/provider.js';

const GRANTS = '/api/support-access/grants';
const ILLEGIBLE = 'must hold a visible character and no bidirectional control';

/** Tickets that show nothing a person can read, or reorder what follows them. */
const INVISIBLE_TICKETS: ReadonlyArray<[string, string]> = [
  ['U+200B', '\u200B'],
  ['U+2060', '\u2060'],
  ['U+3164', '\u3164'],
  ['U+115F', '\u115F'],
  ['U+FFA0', '\uFFA0'],
  ['U+00AD', '\u00AD'],
  ['U+034F', '\u034F'],
  ['U+180E', '\u180E'],
  ['U+200C U+200D', '\u200C\u200D'],
  ['U+2800', '\u2800'],
  ['U+1160', '\u1160'],
  ['U+FEFF', '\uFEFF'],
  ['U+061C', '\u061C'],
  ['U+2061-U+2064', '\u2061\u2062\u2063\u2064'],
  ['U+E0001 and tag characters', '\u{E0001}\u{E0054}\u{E002D}\u{E0031}'],
  ['U+FE0F alone', '\uFE0F'],
  ['U+16FE4 (a filler that is not default-ignorable)', '\u{16FE4}'],
  ['combining marks alone', '\u0300\u0301\u20DD'],
  ['private-use characters', '\uE000\u{F0000}'],
  ['unassigned code points', '\u0378\u{E0080}'],
  ['noncharacters', '\uFDD0\uFFFF'],
  ['U+202E in a ticket', 'T-1\u202E4321'],
];

describe('attacks replayed over HTTP', function () {
  this.timeout(120_000);

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

  /** A deployment's own sink: rows in an array. */
  function plainSink(): AuditSink & { rows: ImpersonationEvent[] } {
    const rows: ImpersonationEvent[] = [];
    return {
      rows,
      append: async (_name, event) => void rows.push(event),
      query: async ({ subject }) => ({
        items: rows.filter((row) => row.subject === subject).map((row) => ({ ...row, event: row.name })),
        nextCursor: null,
      }),
    };
  }

  describe('the trail records only what happened', () => {
    const sinks: ReadonlyArray<[string, () => Promise<{ sink: AuditSink; close(): Promise<void> }>]> = [
      ['the memory trail', async () => ({ sink: createMemoryAuditLog(), close: async () => {} })],
      ["a deployment's sink", async () => ({ sink: plainSink(), close: async () => {} })],
      [
        'the PostgreSQL trail beside the store',
        async () => {
          const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema: await testSchema() });
          return { sink: log, close: () => log.close() };
        },
      ],
    ];
    for (const [name, open] of sinks) {
      it(`${name}: 20 redemptions of one subject token at once, one success row`, async () => {
        const { sink, close } = await open();
        const tp = await startProvider({ plugin: { auditLog: sink } });
        try {
          const customer = 'carol';
          const token = await subjectToken(tp, { userId: customer });
          const replies = await Promise.all(
            Array.from({ length: 20 }, () => exchange(tp, { subject_token: token, resource: API })),
          );
          expect(replies.filter((reply) => reply.status === 200)).to.have.length(1);
          const page = await trailEvents(tp, await adminToken(tp), `?subject=${customer}`);
          const rows = (page.body['items'] as Array<{ event: string }>).filter(
            (row) => row.event === EVENTS.exchangeSucceeded,
          );
          expect(rows).to.have.length(1);
        } finally {
          await tp.close();
          await close();
        }
      });
    }
  });

  describe('a delegation refused 429 writes nothing and spends no proof', () => {
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
    const stored = (proofs: string[]) =>
      Promise.all(
        proofs.map(async (proof) => {
          const { jti } = decodeJwt(proof) as { jti: string };
          const id = createHash('sha256').update(`${CLIENTS.orders.client_id}${jti}`).digest('base64url');
          return (await tp.provider.ReplayDetection.find(id)) !== undefined;
        }),
      );

    it('12 refused one after another: no row, no replay entry', async () => {
      const token = await impersonation();
      const key = await DpopKey.generate();
      const proofs = await Promise.all(Array.from({ length: 13 }, () => key.proof(`${tp.base}/token`)));
      const delegate = (at: number) =>
        exchange(tp, { subject_token: token, ...VARIANTS[at === 0 ? 0 : 1 + (at % 3)] }, CLIENTS.orders, {
          dpop: proofs[at]!,
        });
      expect((await delegate(0)).status).to.equal(200);
      const before = trail.rows.length;
      for (let at = 1; at < proofs.length; at += 1) expect((await delegate(at)).status).to.equal(429);
      expect(trail.rows.length).to.equal(before);
      expect(await stored(proofs)).to.deep.equal([true, ...Array(12).fill(false)]);
    });

    it('refused 429 in a race for the last of the share: no row, no replay entry for the losers', async () => {
      const token = await impersonation();
      const key = await DpopKey.generate();
      const proofs = await Promise.all(VARIANTS.map(() => key.proof(`${tp.base}/token`)));
      const before = trail.rows.length;
      hold = gate(VARIANTS.length);
      const replies = await Promise.all(
        VARIANTS.map((variant, at) =>
          exchange(tp, { subject_token: token, ...variant }, CLIENTS.orders, { dpop: proofs[at]! }),
        ),
      );
      expect(replies.map((reply) => reply.status).sort()).to.deep.equal([200, 429, 429, 429]);
      expect(trail.rows.slice(before).map((row) => row.event)).to.deep.equal([EVENTS.delegationSucceeded]);
      expect((await stored(proofs)).filter(Boolean)).to.have.length(1);
    });
  });

  describe('no end user stops impersonation by filling the session model', () => {
    it('120 places: 130 public revocations and sign-outs, then alice still impersonates', async () => {
      const tp = await startProvider({
        adapter: createMemoryAdapter({ limits: { ImpersonationSession: 120 } }),
        plugin: { delegation: {} },
      });
      try {
        for (let round = 0; round < 130; round += 1) {
          const token = await userAccessToken(tp, 'carol');
          const revoked = await fetch(`${tp.base}/token/revocation`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ token, client_id: CLIENTS.console.client_id }),
          });
          expect(revoked.status).to.equal(200);
          if (round % 4 === 0) await logout(tp, (await userSignIn(tp, 'carol')).cookies);
        }
        await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice') });
      } finally {
        await tp.close();
      }
    });
  });

  describe('a Management API client creating subject tokens fast', () => {
    it('gets a 429 of its own, never a 503, no row for it, and another client still creates', async () => {
      const trail = createMemoryAuditLog();
      const tp = await startProvider({
        adapter: createMemoryAdapter({ limits: { SubjectToken: 80 } }),
        plugin: { maxSubjectTokensPerClient: 30, auditLog: trail },
      });
      try {
        const backend = await m2mToken(tp);
        const replies = await Promise.all(
          Array.from({ length: 45 }, () => managementRequest(tp, { userId: 'bob' }, backend)),
        );
        const statuses = replies.map((reply) => reply.status).sort();
        expect(statuses).to.deep.equal([...Array(30).fill(201), ...Array(15).fill(429)]);
        expect(trail.rows.filter((row) => row.event !== EVENTS.subjectTokenCreated)).to.deep.equal([]);
        expect(trail.rows).to.have.length(30);
        const other = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp, CLIENTS.oncall));
        expect(other.status, JSON.stringify(other.body)).to.equal(201);
      } finally {
        await tp.close();
      }
    });
  });

  describe('a re-exchange never outlives its source, and introspection names who acts', () => {
    it('an opaque impersonation token delegated twice: act at each introspection, no exp later than its source', async () => {
      const tp = await startProvider({ plugin: { delegation: {}, accessTokenTTL: 120 } });
      try {
        const { token } = await impersonate(tp, {
          actorToken: await userAccessToken(tp, 'alice'),
          resource: OPAQUE_API,
          scope: 'read',
        });
        let source = await introspect(tp, token);
        expect(source).to.deep.include({ active: true, sub: 'bob', act: { sub: 'alice' } });
        let value = token;
        for (let hop = 0; hop < 2; hop += 1) {
          await new Promise((resolve) => setTimeout(resolve, 1100));
          const delegated = await exchange(tp, { subject_token: value, resource: OPAQUE_API }, CLIENTS.orders);
          expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
          value = delegated.body['access_token'] as string;
          const seen = await introspect(tp, value);
          expect(seen['exp']).to.be.at.most(source['exp'] as number);
          expect(JSON.stringify(seen['act'])).to.contain('"sub":"alice"');
          source = seen;
        }
      } finally {
        await tp.close();
      }
    });
  });

  describe('one Management API client asking for approvals', () => {
    it('asks within its own share: past maxSubjectTokensPerClient, 429 and no request written', async () => {
      const trail = createMemoryAuditLog();
      const { tp } = await startApprovalProvider({ plugin: { maxSubjectTokensPerClient: 3, auditLog: trail } });
      try {
        const backend = await m2mToken(tp);
        const statuses: number[] = [];
        for (let asked = 0; asked < 6; asked += 1) {
          const reply = await managementRequest(
            tp,
            {
              userId: newCustomer(),
              actorId: 'alice',
              clientId: CLIENTS.console.client_id,
              context: { ticketId: 'T-9' },
            },
            backend,
          );
          statuses.push(reply.status);
        }
        expect(statuses).to.deep.equal([202, 202, 202, 429, 429, 429]);
        expect(trail.rows.map((row) => row.event)).to.deep.equal(Array(3).fill(EVENTS.approvalRequested));
        const other = await managementRequest(
          tp,
          { userId: newCustomer(), actorId: 'alice', clientId: CLIENTS.console.client_id },
          await m2mToken(tp, CLIENTS.oncall),
        );
        expect(other.status, JSON.stringify(other.body)).to.equal(202);
      } finally {
        await tp.close();
      }
    });
  });

  describe("a stranger's posts to the push receiver", () => {
    it('stall nothing: an unknown kid, ES256 and PS256 under the issuer kid, a made-up jti, with no or a wrong credential', async () => {
      const tp = await startSsfProvider(suiteAdapterKind(), { minVerificationInterval: 1 });
      let verifier: ImpersonationVerifier | undefined;
      const endpoint = await pushEndpoint(() => verifier);
      try {
        verifier = createImpersonationVerifier({
          issuer: tp.issuer,
          audience: API,
          ssf: {
            delivery: 'push',
            endpointUrl: endpoint.url,
            configurationEndpoint: `${tp.base}${STREAMS}`,
            verificationEndpoint: `${tp.base}/ssf/verify`,
            accessToken: () => receiverToken(tp),
            audience: RECEIVERS.first.client_id,
            authorization: 'Bearer push-credential',
          },
          refreshInterval: 1100,
          maxStaleness: 3000,
        });
        await verifier.ready();
        const jwks = (await (await fetch(`${tp.base}/jwks`)).json()) as JSONWebKeySet;
        const claims = { iss: tp.issuer, aud: RECEIVERS.first.client_id, iat: Math.floor(Date.now() / 1000) };
        for (const [alg, kid] of [
          ['ES256', 'unknown'],
          ['ES256', jwks.keys[0]!.kid!],
          ['PS256', jwks.keys[0]!.kid!],
        ] as const) {
          const { privateKey } = await generateKeyPair(alg);
          const body = await new SignJWT({ ...claims, jti: randomUUID(), events: { [VERIFICATION]: {} } })
            .setProtectedHeader({ alg, kid, typ: 'secevent+jwt' })
            .sign(privateKey);
          for (const authorization of [
            undefined,
            'Bearer guessed',
            'bearer push-credential',
            'Bearer push-credentia',
          ]) {
            const answer = await fetch(endpoint.url, {
              method: 'POST',
              headers: authorization ? { authorization } : {},
              body,
            });
            expect(answer.status, `${alg} ${kid} ${authorization}`).to.equal(401);
          }
        }
        expect(verifier.state).to.include({ stale: false, failures: 0 });
        const { token } = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice') });
        expect((await verifier.verify(token)).subject).to.equal('bob');
      } finally {
        verifier?.close();
        endpoint.server.closeAllConnections();
        await new Promise((resolve) => endpoint.server.close(resolve));
        await tp.close();
      }
    });
  });

  describe('the decision point is told who acts and what the customer gives', () => {
    let pdp: DecisionPoint;
    let tp: TestProvider;
    before(async () => {
      pdp = await startDecisionPoint();
      ({ tp } = await startApprovalProvider({
        plugin: {
          actorClients: [CLIENTS.noScopeBackend.client_id],
          delegation: {},
          authzen: { url: pdp.url, timeout: 2000 },
        },
      }));
    });
    after(async () => {
      await tp?.close();
      await pdp?.close();
    });

    it("another client's client-credentials token as actor, opaque or JWT, reaches it as a client", async () => {
      const own = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
      for (const actor of [
        await m2mToken(tp, CLIENTS.noScopeBackend, 'profile:read', API),
        await m2mToken(tp, CLIENTS.noScopeBackend, 'profile:read', OPAQUE_API),
      ]) {
        pdp.received.length = 0;
        const delegated = await exchange(
          tp,
          { subject_token: own, resource: DOWNSTREAM_API, actor_token: actor, actor_token_type: ACCESS_TOKEN },
          CLIENTS.orders,
        );
        expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
        expect(pdp.received.map((sent) => sent.body.subject)).to.deep.equal([
          { type: 'client', id: CLIENTS.noScopeBackend.client_id },
        ]);
      }
    });

    it('a grant given ahead of time, refused by a decision point refusing every approve, writes nothing', async () => {
      const customer = newCustomer();
      const token = await userAccessToken(tp, customer, {
        client: CLIENTS.customer,
        scope: `openid ${CUSTOMER_SCOPE}`,
        resource: CUSTOMER_API,
      });
      pdp.answer = (evaluation) => (evaluation.action.name === 'approve' ? { deny: 'no' } : { allow: true });
      try {
        const give = { duration: 3600, actorId: 'alice' };
        expectError(await apiRequest(tp, 'POST', GRANTS, token, give), 403, 'access_denied');
        expect((await apiRequest(tp, 'GET', GRANTS, token)).body['items']).to.deep.equal([]);
      } finally {
        pdp.answer = { allow: true };
      }
    });
  });

  describe('one SSF receiver asking for verifications at once', () => {
    it('gets at most one verification per interval, however many it sends together', async () => {
      const tp = await startSsfProvider(suiteAdapterKind(), { minVerificationInterval: 30 });
      try {
        const token = await receiverToken(tp);
        const created = await ssfRequest(tp, 'POST', STREAMS, token, { delivery: { method: POLL } });
        const id = created.body['stream_id'] as string;
        expect(
          (await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: id, status: 'paused' })).status,
        ).to.equal(200);
        const replies = await Promise.all(
          Array.from({ length: 20 }, () => ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id })),
        );
        // Racing claims may all be refused (StreamStore.claimVerification); never two SETs in one interval.
        const statuses = replies.map((reply) => reply.status);
        const verified = statuses.filter((status) => status === 204).length;
        expect(verified).to.be.at.most(1);
        expect(statuses.filter((status) => status !== 204 && status !== 429)).to.deep.equal([]);
        expect((await tp.impersonation.ssf().stats()).subscriptions[`ssf:${id}`]?.pending ?? 0).to.equal(verified);
      } finally {
        await tp.close();
      }
    });
  });

  describe('options spelt wrong throw', () => {
    const MISSPELT: ReadonlyArray<[string, () => unknown]> = [
      [
        'createRedisAdapter keyprefix',
        () => createRedisAdapter({ url: 'redis://127.0.0.1:6379', keyprefix: 'x' } as never),
      ],
      [
        'createPostgresAuditLog tabel',
        () => createPostgresAuditLog({ connectionString: DATABASE_URL, tabel: 'x' } as never),
      ],
      [
        'createImpersonationVerifier refreshIntervall',
        () =>
          createImpersonationVerifier({
            issuer: 'http://127.0.0.1:9',
            revocationsUri: 'http://127.0.0.1:9/feed',
            refreshIntervall: 100,
          } as never),
      ],
      [
        'createMemoryAdapter a limit of a misspelt model',
        () => createMemoryAdapter({ limits: { ImpersonationSesion: 120 } }),
      ],
      [
        'createMemoryAdapter a misspelt protected model',
        () => createMemoryAdapter({ protectedModels: ['AccesToken'] }),
      ],
    ];
    for (const [name, create] of MISSPELT) {
      it(name, () => expect(create).to.throw(TypeError, /did you mean/));
    }
  });

  describe('a ticket or a reason that shows nothing is refused wherever it comes in', () => {
    let tp: TestProvider;
    let log: MemoryAuditLog;
    let creator: string;
    let admin: string;
    before(async () => {
      log = createMemoryAuditLog();
      tp = await startProvider({ plugin: { auditLog: log } });
      creator = await m2mToken(tp);
      admin = await adminToken(tp);
    });
    after(() => tp?.close());

    for (const [name, text] of INVISIBLE_TICKETS) {
      it(`${name}: as the ticket, the reason and a revocation's reason, 400 and nothing written`, async () => {
        const rows = log.rows.length;
        for (const context of [{ ticketId: text }, { ticket: text }, { ticketId: 'T-1', reason: text }]) {
          const result = await managementRequest(tp, { userId: 'bob', context }, creator);
          expectError(result, 400, 'invalid_request', new RegExp(`^context\\.\\w+ ${ILLEGIBLE}$`));
        }
        expect(log.rows.length).to.equal(rows);
        const { session } = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice') });
        const revoked = await apiRequest(tp, 'DELETE', `${SESSIONS}/${session}`, admin, { reason: text });
        expectError(revoked, 400, 'invalid_request', new RegExp(`^reason (${ILLEGIBLE}|must be a non-empty string)`));
        expect((await apiRequest(tp, 'GET', `${SESSIONS}/${session}`, admin)).body['state']).to.equal('active');
      });
    }

    it('still takes a ticket of letters in any script, an emoji, and a mark on a letter', async () => {
      for (const ticketId of ['T-1', 'שלום', '工单-7', '😀', 'e\u0301', 'Ⅻ']) {
        const result = await managementRequest(tp, { userId: 'bob', context: { ticketId } }, creator);
        expect(result.status, `${ticketId} ${JSON.stringify(result.body)}`).to.equal(201);
      }
    });
  });

  describe("break-glass and the customer's words", () => {
    it('refuses a break-glass reason of invisible characters, creating and recording nothing', async () => {
      const { tp } = await startApprovalProvider({
        approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
      });
      try {
        for (const [, text] of INVISIBLE_TICKETS) {
          const reply = await askForSubjectToken(
            tp,
            {
              userId: newCustomer(),
              actorId: 'alice',
              clientId: CLIENTS.console.client_id,
              context: { ticketId: 'INC-7' },
              breakGlass: { reason: text },
            },
            CLIENTS.oncall,
          );
          expectError(
            reply,
            400,
            'invalid_request',
            new RegExp(`^breakGlass\\.reason (${ILLEGIBLE}|must be a non-empty string)`),
          );
        }
      } finally {
        await tp.close();
      }
    });
  });
});
