/**
 * The review's attack on delegation: an ordinary customer, signed in to a
 * first-party app whose API delegates once per call, calls it as fast as
 * they can, with every variation they can think of, signing in again and
 * again. The trail impersonation depends on takes no row of it, the store a
 * bounded number of sessions, each bound answers 429, and impersonation (and
 * its own delegations) still works afterwards. Over HTTP against a real
 * provider, on TEST_ADAPTER's store (memory, Redis, PostgreSQL), with a
 * memory trail small enough that one row per call would fill it.
 */
import { expect } from 'chai';
import { createMemoryAuditLog, EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import { API, CLIENTS, DOWNSTREAM_API, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, decodeJwt, exchange, expectError, userAccessToken, type Reply } from '../support/http.js';
import { adminToken, impersonate, SESSIONS } from '../support/impersonations.js';

/** Small, so that the bounds are reached in a few requests. */
const LIMITS = { perSubjectToken: 3, perUser: 4, perClient: 6, perImpersonationSession: 3 };
/** Fewer rows than the calls below: a row per delegation would fill the trail, and refuse every impersonation. */
const MAX_ROWS = 60;
const CALLS = 200;
const PARTNER = 'urn:example:partner-token';

describe('delegation under a flood of its own: bounded per principal, off the trail impersonation needs', function () {
  this.timeout(120_000);
  let tp: TestProvider;
  let trail: MemoryAuditLog;
  let admin: string;

  beforeEach(async () => {
    trail = createMemoryAuditLog({ maxRows: MAX_ROWS });
    tp = await startProvider({
      plugin: {
        auditLog: trail,
        delegation: {
          limits: LIMITS,
          // Tokens as many as asked for, as a user who signs in again and again has: `partner:<user>:<n>`.
          subjectTokenTypes: {
            [PARTNER]: ({ token, clientId }) => {
              const [, user, n] = token.split(':');
              return user && n
                ? { id: token, sub: user, scope: ['profile:read'], exp: Math.floor(Date.now() / 1000) + 300, clientId }
                : undefined;
            },
          },
        },
      },
    });
    admin = await adminToken(tp);
  });
  afterEach(() => tp.close());

  function delegate(subjectToken: string, params: Record<string, string> = {}): Promise<Reply> {
    return exchange(tp, { subject_token: subjectToken, resource: DOWNSTREAM_API, ...params }, CLIENTS.orders);
  }

  /** The delegation sessions the store lists (active), for all users. */
  async function delegationSessions(): Promise<Array<Record<string, unknown>>> {
    const listed = await apiRequest(tp, 'GET', `${SESSIONS}?limit=100`, admin);
    expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
    return (listed.body['items'] as Array<Record<string, unknown>>).filter((item) => item['type'] === 'delegation');
  }

  async function inBatches(count: number, send: () => Promise<Reply>): Promise<Reply[]> {
    const replies: Reply[] = [];
    for (let sent = 0; sent < count; sent += 25) replies.push(...(await Promise.all(Array.from({ length: 25 }, send))));
    return replies;
  }

  /** alice impersonates bob: the exchange works, and a delegation under it is recorded. */
  async function impersonationStillWorks(): Promise<void> {
    const { token } = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), scope: 'profile:read' });
    const rows = trail.rows.length;
    const delegated = await delegate(token);
    expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
    const session = decodeJwt(delegated.body['access_token'] as string)['impersonation_session'];
    expect(trail.rows.slice(rows).map((row) => [row.event, row.subject, row.sessionId])).to.deep.equal([
      [EVENTS.delegationSucceeded, 'bob', session],
    ]);
  }

  it(`one token delegated on every call (${CALLS}, 25 at a time): the first batch's sessions only, no trail row, and impersonation still works`, async () => {
    const token = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
    const rows = trail.rows.length;
    const replies = await inBatches(CALLS, () => delegate(token));
    expect(new Set(replies.map((reply) => reply.status))).to.deep.equal(new Set([200]));
    const named = replies.map((reply) => decodeJwt(reply.body['access_token'] as string)['impersonation_session']);
    // Before any is live, concurrent first requests may each list one, within the token's share; the
    // rest, and every later request, are issued tokens under those.
    const first = new Set(named.slice(0, 25));
    expect(first.size).to.be.within(1, LIMITS.perSubjectToken);
    expect(new Set(named)).to.deep.equal(first);
    expect((await delegationSessions()).length).to.equal(first.size);
    expect(trail.rows.length).to.equal(rows);
    await impersonationStillWorks();
  });

  it('a user who varies the request, signs in again, and brings friends meets each bound with 429; the store holds no more', async () => {
    const rows = trail.rows.length;
    // One token, asked for every resource and scope it allows.
    const token = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read profile:write' });
    for (const variant of <Array<Record<string, string>>>[
      { scope: 'profile:read' },
      { resource: API, scope: 'profile:read' },
      { resource: API, scope: 'profile:write' },
    ]) {
      const reply = await delegate(token, variant);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    }
    const fourth = await delegate(token, { resource: API, scope: 'profile:read profile:write' });
    expectError(
      fourth,
      429,
      'invalid_request',
      /this subject_token has started as many delegations this hour as allowed \(3\)/,
    );
    expect(Number(fourth.headers.get('retry-after'))).to.be.within(1, 3600);
    // The same again, when one of them is live, is no new delegation: it is not refused.
    expect((await delegate(token, { scope: 'profile:read' })).status).to.equal(200);

    // The user signs in again: one more delegation fits the user's share, the next does not.
    expect(
      (await delegate(await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' }))).status,
    ).to.equal(200);
    expectError(
      await delegate(await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' })),
      429,
      'invalid_request',
      /this user's tokens have started as many delegations this hour as allowed \(4\)/,
    );

    // Other users of the same client: two more fit the client's share, the next does not.
    for (const user of ['alice', 'carol']) {
      const reply = await delegate(await userAccessToken(tp, user, { resource: API, scope: 'openid profile:read' }));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    }
    const full = await delegate(await userAccessToken(tp, 'admin', { resource: API, scope: 'openid profile:read' }));
    expectError(full, 429, 'invalid_request', /this client has started as many delegations this hour as allowed \(6\)/);
    expect(JSON.stringify(full.body)).not.to.match(/admin|bob|carol/);

    expect(await delegationSessions()).to.have.length(LIMITS.perClient);
    expect(trail.rows.length).to.equal(rows);
    // The customer's own share spent, support can still act as them, and delegate under that impersonation.
    await impersonationStillWorks();
  });

  it(`a concurrent burst of new delegations (${CALLS / 5} at once, each a new token of one user) takes exactly the user's share`, async () => {
    const tokens = Array.from({ length: CALLS / 5 }, (_, n) => `partner:bob:${n}`);
    const replies = await Promise.all(tokens.map((token) => delegate(token, { subject_token_type: PARTNER })));
    const statuses = replies.map((reply) => reply.status);
    expect(statuses.filter((status) => status === 200)).to.have.length(LIMITS.perUser);
    expect(statuses.filter((status) => status !== 200)).to.deep.equal(Array(tokens.length - LIMITS.perUser).fill(429));
    expect(await delegationSessions()).to.have.length(LIMITS.perUser);
  });

  it('records delegations under an impersonation, the same one once, and bounds them per impersonation session', async () => {
    const alice = await userAccessToken(tp, 'alice');
    const { token, session } = await impersonate(tp, { actorToken: alice, scope: 'profile:read profile:write' });
    const rows = trail.rows.length;
    const first = await delegate(token, { resource: DOWNSTREAM_API });
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    // Asked again, it is the same delegation: a token under its session, no second row.
    const again = await delegate(token, { resource: DOWNSTREAM_API });
    expect(decodeJwt(again.body['access_token'] as string)['impersonation_session']).to.equal(
      decodeJwt(first.body['access_token'] as string)['impersonation_session'],
    );
    // A delegation of the delegated token counts against the same impersonation.
    const chained = await delegate(first.body['access_token'] as string, { resource: API });
    expect(chained.status, JSON.stringify(chained.body)).to.equal(200);
    expect((await delegate(token, { resource: API, scope: 'profile:read' })).status).to.equal(200);
    expectError(
      await delegate(token, { resource: API, scope: 'profile:write' }),
      429,
      'invalid_request',
      /this impersonation session has started as many delegations this hour as allowed \(3\)/,
    );
    // Three rows of delegations, what the customer and auditors see; a request past the share writes nothing.
    const recorded = trail.rows.slice(rows);
    expect(recorded.map((row) => row.event)).to.deep.equal(Array(3).fill(EVENTS.delegationSucceeded));
    expect(new Set(recorded.map((row) => row.subject))).to.deep.equal(new Set(['bob']));
    expect(recorded.map((row) => row.sessionId)).not.to.include(session);
    // Another impersonation has a share of its own.
    await impersonationStillWorks();
  });
});
