import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createMemoryAuditLog, EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import { REFUSALS_RECORDED_PER_SUBJECT_TOKEN } from '../../lib/exchange/refusals.js';
import { API, CLIENTS, startProvider, type TestProvider } from '../support/provider.js';
import { ACCESS_TOKEN, apiRequest, exchange, expectError, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, exchangeAsActor, impersonate, revokeSession } from '../support/impersonations.js';

/** Small, so that the flood below would fill it many times over if refusals were all written. */
const MAX_ROWS = 60;
const FLOOD = 300;

describe('the audit trail under a flood of refused exchanges', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let trail: MemoryAuditLog;
  let alice: string;

  beforeEach(async () => {
    trail = createMemoryAuditLog({ maxRows: MAX_ROWS });
    tp = await startProvider({ plugin: { auditLog: trail } });
    alice = await userAccessToken(tp, 'alice');
  });
  afterEach(() => tp.close());

  /** alice redeems `token` on API. */
  function redeemAsAlice(token: string) {
    return exchangeAsActor(tp, { subjectToken: token, actorToken: alice });
  }

  /** What an anonymous caller sends: a public client's id, no actor token, no credential of any kind. */
  function anonymous(subjectTokenValue: string) {
    return exchange(tp, { subject_token: subjectTokenValue, resource: API });
  }

  async function inBatches(count: number, send: () => Promise<{ status: number }>): Promise<number[]> {
    const statuses: number[] = [];
    for (let sent = 0; sent < count; sent += 25) {
      statuses.push(...(await Promise.all(Array.from({ length: 25 }, send))).map((reply) => reply.status));
    }
    return statuses;
  }

  it(`writes no row for an unknown or malformed subject token, whatever their number (${FLOOD / 2} of each)`, async () => {
    const before = trail.rows.length;
    const unknown = await inBatches(FLOOD / 2, () => anonymous(`ist_${randomBytes(32).toString('base64url')}`));
    const malformed = await inBatches(FLOOD / 2, () =>
      anonymous(`not-a-subject-token-${randomBytes(4).toString('hex')}`),
    );
    expect(new Set([...unknown, ...malformed])).to.deep.equal(new Set([400]));
    expect(trail.rows.length).to.equal(before);
  });

  it(`writes ${REFUSALS_RECORDED_PER_SUBJECT_TOKEN} refusals of a used subject token, however often it is replayed, and the next impersonation succeeds`, async () => {
    const used = await subjectToken(tp);
    expect((await redeemAsAlice(used)).status).to.equal(200);
    const before = trail.rows.length;

    const replays = await inBatches(FLOOD, () => anonymous(used));
    expect(new Set(replays)).to.deep.equal(new Set([400]));
    const refusals = trail.rows.slice(before);
    expect(refusals).to.have.length(REFUSALS_RECORDED_PER_SUBJECT_TOKEN);
    expect(new Set(refusals.map((row) => row.event))).to.deep.equal(new Set([EVENTS.exchangeRefused]));

    // A live token refused again and again (a wrong resource burns nothing) is bounded the same way.
    const live = await subjectToken(tp);
    await inBatches(50, () => exchange(tp, { subject_token: live, resource: 'https://unknown.example.com' }));
    expect(trail.rows.length).to.be.at.most(before + 1 + 2 * REFUSALS_RECORDED_PER_SUBJECT_TOKEN);

    const next = await redeemAsAlice(await subjectToken(tp));
    expect(next.status, JSON.stringify(next.body)).to.equal(200);
    expect((await trail.verify()).ok).to.equal(true);
  });

  it("checks a subject token's client binding before its state: another client learns nothing of it", async () => {
    const bound = await subjectToken(tp, { userId: 'bob', clientId: CLIENTS.web.client_id });
    const used = await exchange(
      tp,
      {
        subject_token: bound,
        resource: API,
        actor_token: await userAccessToken(tp, 'alice', { client: CLIENTS.web }),
        actor_token_type: ACCESS_TOKEN,
      },
      CLIENTS.web,
    );
    expect(used.status, JSON.stringify(used.body)).to.equal(200);
    expectError(await anonymous(bound), 400, 'invalid_request', /issued for another client/);
  });

  it("the customer's view lists every access and every stop, whatever follows them", async () => {
    const admin = await adminToken(tp);
    const { session } = await impersonate(tp, {
      actorToken: alice,
      subject: { userId: 'bob', context: { ticketId: 'T-1' } },
    });
    expect((await revokeSession(tp, admin, session)).status).to.equal(204);
    // More rows about bob than a page holds: creations by the backend, which is authenticated.
    for (let created = 0; created < 25; created += 1) await subjectToken(tp, { userId: 'bob' });

    const events = [EVENTS.exchangeSucceeded, EVENTS.sessionRevoked, EVENTS.sessionEnded];
    const query = new URLSearchParams([['subject', 'bob'], ...events.map((name) => ['event', name]), ['limit', '10']]);
    const page = await apiRequest(tp, 'GET', `/api/impersonations/events?${query}`, admin);
    expect(page.status, JSON.stringify(page.body)).to.equal(200);
    const rows = page.body['items'] as Array<{ event: string; sessionId: string }>;
    expect(rows.map((row) => [row.event, row.sessionId])).to.deep.equal([
      [EVENTS.sessionRevoked, session],
      [EVENTS.exchangeSucceeded, session],
    ]);
    const all = await apiRequest(tp, 'GET', '/api/impersonations/events?subject=bob&limit=10', admin);
    expect((all.body['items'] as Array<{ event: string }>).map((row) => row.event)).to.not.include(
      EVENTS.exchangeSucceeded,
    );

    for (const bad of ['event=impersonation.nothing', 'event=', 'event=impersonation.exchange.succeeded&event=x']) {
      expectError(await apiRequest(tp, 'GET', `/api/impersonations/events?${bad}`, admin), 400, 'invalid_request');
    }
  });
});
