/**
 * The customer's own sessions through the customer's API: impersonations of
 * them and ID-JAGs issued for them, listed for that customer only and stopped
 * through the path the Management API stops them on (its record, the event,
 * the revocation feed, an opaque token inactive at once).
 */
import { expect } from 'chai';
import { EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { askForSubjectToken, startApprovalProvider } from '../support/approvals.js';
import { agentAtIdp, exchangeForIdJag } from '../support/id-jag.js';
import { adminToken, exchangeAsActor, impersonate, SESSIONS, type Impersonation } from '../support/impersonations.js';
import {
  apiRequest,
  decodeJwt,
  expectError,
  introspect,
  userAccessToken,
  userSignIn,
  type Reply,
} from '../support/http.js';
import {
  API,
  CLIENTS,
  CUSTOMER_API,
  CUSTOMER_SCOPE,
  FIXTURE_CLIENTS,
  OPAQUE_API,
  type TestProvider,
} from '../support/provider.js';

const CUSTOMER_SESSIONS = '/api/support-access/sessions';
/** The other application's authorization server, which the agent's ID-JAGs are for. */
const ORDERS = 'https://orders.example.com';
const AGENT = { client_id: 'orders-assistant', client_secret: 'orders-assistant-secret' };
const AGENT_AT_IDP = agentAtIdp(AGENT, ORDERS);

type Item = Record<string, unknown>;
const idsOf = (reply: Reply) => (reply.body['items'] as Item[]).map((item) => item['id']);

describe("customer API: the customer's sessions", function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let bob: string;
  let carol: string;
  let alice: string;
  let admin: string;
  const revoked: Array<ImpersonationEvent<typeof EVENTS.sessionRevoked>> = [];

  before(async () => {
    const ap = await startApprovalProvider({
      approvals: { maxGrantDuration: 3600, breakGlassClients: [CLIENTS.oncall.client_id] },
      plugin: { idJagIssuance: {} },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    ap.policy.answer = 'none';
    tp = ap.tp;
    onImpersonationEvent(tp.provider, EVENTS.sessionRevoked, (event) => revoked.push(event));
    const customerToken = (user: string) =>
      userAccessToken(tp, user, {
        client: CLIENTS.customer,
        scope: `openid ${CUSTOMER_SCOPE}`,
        resource: CUSTOMER_API,
      });
    [bob, carol, alice, admin] = await Promise.all([
      customerToken('bob'),
      customerToken('carol'),
      userAccessToken(tp, 'alice'),
      adminToken(tp),
    ]);
  });
  after(() => tp?.close());

  const impersonateAsAlice = (subject: string, resource = API): Promise<Impersonation> =>
    impersonate(tp, { actorToken: alice, subject: { userId: subject }, resource });
  const list = (token: string, query = '') => apiRequest(tp, 'GET', `${CUSTOMER_SESSIONS}${query}`, token);
  const end = (token: string, id: string) => apiRequest(tp, 'DELETE', `${CUSTOMER_SESSIONS}/${id}`, token);
  const managementView = async (id: string) => (await apiRequest(tp, 'GET', `${SESSIONS}/${id}`, admin)).body;
  const onFeed = async (id: string) => {
    const feed = await apiRequest(tp, 'GET', `${SESSIONS}/revocations`);
    return (feed.body['revoked'] as Item[]).some((entry) => entry['id'] === id);
  };

  it("lists the customer's live sessions and no one else's, as the Management API shows them, in pages", async () => {
    const first = await impersonateAsAlice('bob');
    const second = await impersonateAsAlice('bob');
    const theirs = await impersonateAsAlice('carol');

    const listed = await list(bob, '?limit=100');
    expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
    expect(idsOf(listed)).to.include.members([first.session, second.session]);
    expect(idsOf(listed)).to.not.include(theirs.session);
    const item = (listed.body['items'] as Item[]).find((each) => each['id'] === first.session)!;
    expect(item).to.deep.equal(await managementView(first.session));
    expect(item).to.include({ type: 'impersonation', subject: 'bob', actor: 'alice', resource: API, state: 'active' });
    expect(item['clientId']).to.equal(decodeJwt(first.token)['client_id']);
    expect(Date.parse(item['expiresAt'] as string)).to.equal((decodeJwt(first.token)['exp'] as number) * 1000);
    expect(idsOf(await list(carol)))
      .to.include(theirs.session)
      .and.not.include(first.session);

    // Pages of one: every session of bob's once, and no one else's.
    const paged: unknown[] = [];
    let cursor: unknown = undefined;
    do {
      const page = await list(bob, `?limit=1${cursor ? `&cursor=${String(cursor)}` : ''}`);
      expect(page.status, JSON.stringify(page.body)).to.equal(200);
      paged.push(...idsOf(page));
      cursor = page.body['nextCursor'];
    } while (cursor);
    expect(paged).to.have.members(idsOf(listed));
  });

  it("404 for another customer's session, as for an id nobody has: that session untouched", async () => {
    const { token, session } = await impersonateAsAlice('bob', OPAQUE_API);
    const unknown = await end(carol, 'imp_AAAAAAAAAAAAAAAAAAAAAA');
    expectError(unknown, 404, 'not_found');
    const refused = await end(carol, session);
    expect(refused.status).to.equal(404);
    expect(refused.body).to.deep.equal(unknown.body);
    expect((await introspect(tp, token))['active']).to.equal(true);
    expect(await managementView(session)).to.include({ state: 'active' });
    expect(idsOf(await list(bob, '?limit=100'))).to.include(session);
  });

  it('ends a session of the customer: its opaque token inactive at once, recorded and announced once; again 204', async () => {
    const { token, session } = await impersonateAsAlice('bob', OPAQUE_API);
    revoked.length = 0;
    expect((await end(bob, session)).status).to.equal(204);
    expect(await introspect(tp, token)).to.deep.equal({ active: false });
    expect(await managementView(session)).to.include({ state: 'revoked', revokedBy: 'customer' });
    expect(await onFeed(session)).to.equal(true);
    expect(idsOf(await list(bob, '?limit=100'))).to.not.include(session);
    expect((await end(bob, session)).status).to.equal(204);
    expect(revoked.map((event) => [event.sessionId, event.subject, event.revokedBy])).to.deep.equal([
      [session, 'bob', 'customer'],
    ]);
  });

  it('lists a break-glass session of the customer, which only the administrators stop: 403, untouched', async () => {
    const breakGlass = { reason: 'payment outage, customer unreachable' };
    const created = await askForSubjectToken(
      tp,
      { userId: 'bob', actorId: 'alice', clientId: CLIENTS.console.client_id, breakGlass },
      CLIENTS.oncall,
    );
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const exchanged = await exchangeAsActor(tp, {
      subjectToken: created.body['subjectToken'] as string,
      actorToken: alice,
      resource: OPAQUE_API,
    });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const token = exchanged.body['access_token'] as string;
    const session = (await introspect(tp, token))['impersonation_session'] as string;
    const listed = (await list(bob, '?limit=100')).body['items'] as Item[];
    expect(listed.find((item) => item['id'] === session)).to.include({
      emergency: true,
      emergencyReason: breakGlass.reason,
    });
    expectError(await end(bob, session), 403, 'access_denied', /administrators only/);
    expect((await introspect(tp, token))['active']).to.equal(true);
    expect(await managementView(session)).to.include({ state: 'active' });
  });

  it('ends a JWT session: on the revocation feed the resource servers read', async () => {
    const { session } = await impersonateAsAlice('bob');
    expect(await onFeed(session)).to.equal(false);
    expect((await end(bob, session)).status).to.equal(204);
    expect(await onFeed(session)).to.equal(true);
  });

  it('lists and ends an ID-JAG issued for the customer: an agent of a client acting at an application', async () => {
    const { idToken } = await userSignIn(tp, 'bob', { client: AGENT, scope: 'openid' });
    const issued = await exchangeForIdJag(tp, AGENT, { subject_token: idToken!, audience: ORDERS });
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const assertion = decodeJwt(issued.body['access_token'] as string);
    const session = assertion['impersonation_session'] as string;

    const item = (((await list(bob, '?limit=100')).body['items'] as Item[]) ?? []).find(
      (each) => each['id'] === session,
    );
    expect(item).to.include({ type: 'id-jag', subject: 'bob', clientId: AGENT.client_id, resource: ORDERS });
    expect(Date.parse(item!['expiresAt'] as string)).to.equal((assertion['exp'] as number) * 1000);
    expect(idsOf(await list(carol, '?limit=100'))).to.not.include(session);
    expect((await end(carol, session)).status).to.equal(404);

    expect((await end(bob, session)).status).to.equal(204);
    expect(await managementView(session)).to.include({ state: 'revoked', revokedBy: 'customer' });
    expect(await onFeed(session)).to.equal(true);
  });

  it('bad input: an OAuth-style 400, 401 or 404, never a 500', async () => {
    for (const query of [
      '?limit=0',
      '?limit=101',
      '?limit=x',
      '?cursor=nope',
      '?cursor=',
      '?subject=carol',
      '?a=1&a=2',
    ]) {
      expectError(await list(bob, query), 400, 'invalid_request');
    }
    for (const id of ['nope', 'imp_', 'imp_AAAAAAAAAAAAAAAAAAAAAA', `imp_${'A'.repeat(300)}`, '%E2%80%AE']) {
      expectError(await end(bob, id), 404, 'not_found');
    }
    expectError(
      await apiRequest(tp, 'DELETE', `${CUSTOMER_SESSIONS}/imp_AAAAAAAAAAAAAAAAAAAAAA?x=1`, bob),
      400,
      'invalid_request',
    );
    expectError(await list(''), 401, 'invalid_token');
    expectError(await end(admin, 'imp_AAAAAAAAAAAAAAAAAAAAAA'), 401, 'invalid_token');
    // An impersonation of the customer never stops (or reads) the customer's sessions.
    const { token, session } = await impersonateAsAlice('bob');
    expectError(await end(token, session), 401, 'invalid_token', /impersonation token/);
    expectError(await list(token), 401, 'invalid_token', /impersonation token/);
  });
});
