import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { API_RESOURCE } from '../../demo/seed.js';
import { createMemoryAuditLog, EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import { accountSignIn, exchange, quiet, REQUEST_TIMEOUT, requestImpersonation, signIn } from './helpers.js';

/** dave needs no approval: a customer's access grant would keep the delegation to the grant's own resource. */
const DAVE = { userId: 'dave', reason: 'Cannot see the invoices', ticketId: 'T-1234' };
/** A trail the review's flood would fill: one row per call to the orders service. */
const MAX_ROWS = 300;
const CALLS = 400;

describe('demo: a customer whose every call delegates neither fills the trail nor stops support', function () {
  this.timeout(120_000);
  let demo: Demo;
  let trail: MemoryAuditLog;

  before(async () => {
    trail = createMemoryAuditLog({ maxRows: MAX_ROWS });
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, auditLog: trail });
  });
  after(() => demo?.close());

  async function callOrders(token: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${demo.backend.url}/api/me/orders-service`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT * 4),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it(`bob, signed in to the console for its API, calls the orders service ${CALLS} times: no trail row, and alice can still act for a customer`, async () => {
    // An ordinary customer of a first-party app: bob's own token for the resource API.
    const bob = await signIn(demo, {
      login: 'bob',
      password: 'bob-password',
      scope: 'openid profile:read',
      resource: API_RESOURCE,
    });
    const rows = trail.rows.length;
    for (let sent = 0; sent < CALLS; sent += 25) {
      const replies = await Promise.all(Array.from({ length: 25 }, () => callOrders(bob)));
      // A machine too busy to refresh the revocations in time fails closed (503); no call is refused for delegating.
      const refused = replies.filter(
        (reply) => reply.status !== 200 && !(reply.status === 503 && reply.body['error'] === 'temporarily_unavailable'),
      );
      expect(refused, JSON.stringify(refused[0]?.body)).to.deep.equal([]);
    }
    expect(trail.rows.length).to.equal(rows);

    // Support acts as dave, and the resource API's delegation under that impersonation is on the trail.
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const subject = await requestImpersonation(demo, alice, DAVE);
    const exchanged = await exchange(demo, subject.body['subjectToken'] as string, alice);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const impersonating = await callOrders(exchanged.body['access_token'] as string);
    expect(impersonating.status, JSON.stringify(impersonating.body)).to.equal(200);
    expect((impersonating.body['ordersService'] as Record<string, unknown>)['actors']).to.deep.equal([
      'resource-api',
      'alice',
    ]);
    const session = decodeJwt(exchanged.body['access_token'] as string)['impersonation_session'];
    const recorded = trail.rows.slice(rows);
    expect(recorded.filter((row) => row.event === EVENTS.exchangeSucceeded).map((row) => row.sessionId)).to.deep.equal([
      session,
    ]);
    expect(recorded.filter((row) => row.event === EVENTS.delegationSucceeded)).to.have.length(1);

    const { html } = await accountSignIn(demo.backend.url, 'dave');
    expect(html.match(/Alice Adams \(support\) accessed your account on /g)).to.have.length(1);
  });
});
