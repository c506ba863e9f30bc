/**
 * The `authzen` option: each decision (impersonate, break-glass, exchange,
 * delegate, approve) goes to an AuthZEN Authorization API 1.0 decision
 * point, here a small one on 127.0.0.1, after the deployment's own hooks. A
 * refusal carries the decision point's words for the user; a decision point
 * that does not answer, fails or answers something else refuses with a 503,
 * burns nothing, and the next request works once it is back. On the suite's
 * store (TEST_ADAPTER).
 */
import { expect } from 'chai';
import { approveRequest } from '../../lib/approvals/actions.js';
import { createMemoryAuditLog } from '../../lib/index.js';
import {
  askForSubjectToken,
  newCustomer,
  readApprovalRequest,
  refusalOf,
  requestIdOf,
  startApprovalProvider,
  type ApprovalProvider,
} from '../support/approvals.js';
import { scaled } from '../support/time.js';
import { startDecisionPoint, type DecisionPoint, type DecisionPointAnswer } from '../support/decision-point.js';
import {
  ACCESS_TOKEN,
  apiRequest,
  exchange,
  expectError,
  m2mToken,
  userAccessToken,
  type ClientCredentials,
  type Reply,
} from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { API, CLIENTS, CUSTOMER_API, CUSTOMER_SCOPE, DOWNSTREAM_API, type TestProvider } from '../support/provider.js';

const PDP_TOKEN = 'pdp-bearer-4f1c9a';
// Time enough for a busy machine's decision point to answer; a hanging one is refused after it.
const TIMEOUT = scaled(1000);
const GRANTS = '/api/support-access/grants';

describe('an AuthZEN decision point (the authzen option)', function () {
  this.timeout(60_000);
  let pdp: DecisionPoint;
  let ap: ApprovalProvider;
  let tp: TestProvider;
  let alice: string;

  before(async () => {
    pdp = await startDecisionPoint();
    ap = await startApprovalProvider({
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
      plugin: {
        actorClients: [CLIENTS.noScopeBackend.client_id, CLIENTS.console.client_id],
        auditLog: createMemoryAuditLog(),
        authzen: { url: pdp.url, timeout: TIMEOUT, token: PDP_TOKEN, headers: { 'x-tenant': 'acme' } },
      },
    });
    tp = ap.tp;
    alice = await userAccessToken(tp, 'alice');
  });
  beforeEach(() => {
    ap.policy.answer = 'none';
    pdp.answer = { allow: true };
    pdp.received.length = 0;
  });
  after(async () => {
    await tp?.close();
    await pdp?.close();
  });

  function ask(customer: string, more: Record<string, unknown> = {}, client?: ClientCredentials): Promise<Reply> {
    return askForSubjectToken(
      tp,
      {
        userId: customer,
        actorId: 'alice',
        clientId: CLIENTS.console.client_id,
        context: { ticketId: 'T-7', reason: 'refund' },
        ...more,
      },
      client,
    );
  }

  async function subjectTokenFor(customer: string): Promise<string> {
    const reply = await ask(customer);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    return reply.body['subjectToken'] as string;
  }

  /** Answers `refusal` to the action named, and allows every other. */
  function refuseOnly(action: string, refusal: DecisionPointAnswer): void {
    pdp.answer = (evaluation) => (evaluation.action.name === action ? refusal : { allow: true });
  }

  it('sends each impersonation and exchange as an Access Evaluation, and lets it on when allowed', async () => {
    const customer = newCustomer();
    const subjectToken = await subjectTokenFor(customer);
    const exchanged = await exchangeAsActor(tp, { subjectToken, actorToken: alice, scope: 'profile:read' });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);

    const [creation, exchangeAsked] = pdp.received;
    expect(pdp.received).to.have.length(2);
    for (const sent of [creation!, exchangeAsked!]) {
      expect(sent.path).to.equal('/pdp/access/v1/evaluation');
      expect(sent.headers['authorization']).to.equal(`Bearer ${PDP_TOKEN}`);
      expect(sent.headers['x-tenant']).to.equal('acme');
      expect(sent.headers['content-type']).to.equal('application/json');
      expect(sent.body.subject).to.deep.equal({ type: 'user', id: 'alice' });
      expect(sent.body.resource).to.deep.equal({ type: 'user', id: customer });
      expect(sent.body.context).to.include({ client: CLIENTS.console.client_id, ticket: 'T-7', reason: 'refund' });
    }
    expect(creation!.body.action).to.deep.equal({ name: 'impersonate' });
    expect(creation!.body.context).to.include({ caller: CLIENTS.backend.client_id });
    expect(exchangeAsked!.body.action).to.deep.equal({ name: 'exchange' });
    expect(exchangeAsked!.body.context).to.include({ resource_server: API });
    expect(exchangeAsked!.body.context['scopes']).to.deep.equal(['profile:read']);
  });

  it("refuses a creation with the decision point's words for the user (403), and no token", async () => {
    pdp.answer = { deny: 'alice does not support this customer' };
    const refused = await ask(newCustomer());
    expect(refused.status).to.equal(403);
    expect(refused.body).to.deep.equal({
      error: 'access_denied',
      error_description: 'alice does not support this customer',
    });
    // The words become one line of an error description and of the trail.
    pdp.answer = { deny: 'first line\r\n[audit] forged line' };
    expect((await ask(newCustomer())).body['error_description']).to.equal('first line [audit] forged line');
    pdp.answer = { body: JSON.stringify({ decision: false, context: { reason_user: 'plain words' } }) };
    expect((await ask(newCustomer())).body['error_description']).to.equal('plain words');
    // Without words for the user, the plugin's own; the operators' reason stays with the decision point.
    pdp.answer = { deny: undefined };
    const plain = await ask(newCustomer());
    expect(plain.body['error_description']).to.equal('the policy decision point refused this impersonation');
  });

  it('refuses an exchange with its words (400) and burns nothing: the same subject token is redeemed once allowed', async () => {
    const subject = await subjectTokenFor(newCustomer());
    refuseOnly('exchange', { deny: 'outside your shift' });
    const refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
    expect(refused.status).to.equal(400);
    expect(refused.body).to.include({ error: 'invalid_request', error_description: 'outside your shift' });
    pdp.answer = { allow: true };
    const exchanged = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
  });

  const cannotAnswer: Array<[string, DecisionPointAnswer, RegExp]> = [
    ['does not answer in time', { hang: true }, new RegExp(`did not answer within ${TIMEOUT} ms`)],
    ['fails (500)', { status: 500 }, /answered 500/],
    ['answers 404', { status: 404 }, /answered 404/],
    ['answers with something other than JSON', { body: '<html>decision: true</html>' }, /other than JSON/],
    ['answers without a boolean decision', { body: '{"decision":"true"}' }, /without a boolean "decision"/],
    ['answers in another shape', { body: '{"allowed":true}' }, /without a boolean "decision"/],
  ];
  for (const [what, answer, description] of cannotAnswer) {
    it(`refuses with a 503 when it ${what}, burns nothing, and works again once it answers`, async () => {
      const customer = newCustomer();
      pdp.answer = answer;
      const creation = await ask(customer);
      expect(creation.status, JSON.stringify(creation.body)).to.equal(503);
      expect(creation.body['error']).to.equal('temporarily_unavailable');
      expect(creation.body['error_description']).to.match(description);
      expect(JSON.stringify(creation.body)).not.to.include(PDP_TOKEN);
      // Answered whole: nothing for the app's `error` event, where Koa's default handler prints a stack.
      expect(tp.appErrors.filter((error) => (error as Error).name === 'DecisionPointUnavailable')).to.deep.equal([]);

      refuseOnly('exchange', answer);
      const subject = await subjectTokenFor(customer);
      const refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
      expect(refused.body['error']).to.equal('temporarily_unavailable');
      expect(refused.body['error_description']).to.match(description);
      expect(JSON.stringify(refused.body)).not.to.include(subject).and.not.to.include(PDP_TOKEN);

      pdp.answer = { allow: true };
      const exchanged = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    });
  }

  it('asks about break-glass as its own action, with the reason for it', async () => {
    const customer = newCustomer();
    refuseOnly('break-glass', { deny: 'break-glass needs an open incident' });
    const bypass = { breakGlass: { reason: 'payments down, customer unreachable' } };
    const refused = await ask(customer, bypass, CLIENTS.oncall);
    expect(refused.status).to.equal(403);
    expect(refused.body['error_description']).to.equal('break-glass needs an open incident');
    const sent = pdp.received.at(-1)!.body;
    expect(sent.action).to.deep.equal({ name: 'break-glass' });
    expect(sent.context).to.include({ reason: 'payments down, customer unreachable', ticket: 'T-7' });
    pdp.answer = { allow: true };
    expect((await ask(customer, bypass, CLIENTS.oncall)).status).to.equal(201);
  });

  it('asks about each delegation: refused with its words, 503 when it cannot answer, allowed otherwise', async () => {
    const own = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
    const request = { subject_token: own, resource: DOWNSTREAM_API };
    refuseOnly('delegate', { deny: 'orders may not act for bob' });
    const refused = await exchange(tp, request, CLIENTS.orders);
    expect(refused.status).to.equal(400);
    expect(refused.body).to.include({ error: 'invalid_request', error_description: 'orders may not act for bob' });
    const sent = pdp.received.at(-1)!.body;
    expect(sent).to.deep.include({
      subject: { type: 'client', id: CLIENTS.orders.client_id },
      action: { name: 'delegate' },
      resource: { type: 'user', id: 'bob' },
    });
    expect(sent.context).to.include({ client: CLIENTS.orders.client_id, resource_server: DOWNSTREAM_API });

    refuseOnly('delegate', { hang: true });
    const slow = await exchange(tp, request, CLIENTS.orders);
    expect(slow.status).to.equal(503);
    expect(slow.body['error']).to.equal('temporarily_unavailable');

    pdp.answer = { allow: true };
    const delegated = await exchange(tp, request, CLIENTS.orders);
    expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
  });

  it("tells it that another client's client-credentials token as actor is a client, not a user of that id", async () => {
    const own = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
    const actor = await m2mToken(tp, CLIENTS.noScopeBackend, 'profile:read', API);
    const delegated = await exchange(
      tp,
      { subject_token: own, resource: DOWNSTREAM_API, actor_token: actor, actor_token_type: ACCESS_TOKEN },
      CLIENTS.orders,
    );
    expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
    expect(pdp.received.at(-1)!.body).to.deep.include({
      subject: { type: 'client', id: CLIENTS.noScopeBackend.client_id },
      action: { name: 'delegate' },
    });
    const alices = { subject_token: own, resource: DOWNSTREAM_API, actor_token: alice, actor_token_type: ACCESS_TOKEN };
    expect((await exchange(tp, alices, CLIENTS.orders)).status).to.equal(200);
    expect(pdp.received.at(-1)!.body.subject).to.deep.equal({ type: 'user', id: 'alice' });
  });

  it('asks about a grant the customer gives ahead of time as approve: refused, nothing is written', async () => {
    const customer = newCustomer();
    const token = await userAccessToken(tp, customer, {
      client: CLIENTS.customer,
      scope: `openid ${CUSTOMER_SCOPE}`,
      resource: CUSTOMER_API,
    });
    const grants = () => apiRequest(tp, 'GET', GRANTS, token);
    const give = { duration: 7 * 24 * 3600, scope: ['profile:write'], actorId: 'alice' };
    refuseOnly('approve', { deny: 'this customer is frozen for review' });
    const refused = await apiRequest(tp, 'POST', GRANTS, token, give);
    expectError(refused, 403, 'access_denied', /^this customer is frozen for review$/);
    expect(pdp.received.at(-1)!.body).to.deep.include({
      subject: { type: 'user', id: customer },
      action: { name: 'approve' },
      resource: { type: 'user', id: customer },
    });
    expect(pdp.received.at(-1)!.body.context).to.deep.equal({ actor: 'alice', scopes: ['profile:write'] });
    expect((await grants()).body['items']).to.deep.equal([]);
    // Nothing written: alice is still asked for the customer's approval.
    ap.policy.answer = 'grant';
    requestIdOf(await ask(customer, { scope: ['profile:write'], resource: API }));

    pdp.answer = { allow: true };
    expect((await apiRequest(tp, 'POST', GRANTS, token, give)).status).to.equal(201);
    expect((await ask(customer, { scope: ['profile:write'], resource: API })).status).to.equal(201);
  });

  it("asks about a customer's approval before it is written: refused (403) or unanswered (503), the request stays pending", async () => {
    ap.policy.answer = 'grant';
    const customer = newCustomer();
    const id = requestIdOf(await ask(customer, { scope: ['profile:read'], resource: API }));

    refuseOnly('approve', { deny: 'this customer is frozen for review' });
    expect(await refusalOf(approveRequest(ap.deps, customer, id, { duration: 600 }))).to.deep.include({
      status: 403,
      error: 'access_denied',
      message: 'this customer is frozen for review',
    });
    const sent = pdp.received.at(-1)!.body;
    expect(sent).to.deep.include({
      subject: { type: 'user', id: customer },
      action: { name: 'approve' },
      resource: { type: 'user', id: customer },
    });
    expect(sent.context).to.include({ actor: 'alice', ticket: 'T-7' });
    expect((await readApprovalRequest(tp, id)).body['status']).to.equal('pending');

    refuseOnly('approve', { status: 502 });
    expect((await refusalOf(approveRequest(ap.deps, customer, id, { duration: 600 }))).status).to.equal(503);
    expect((await readApprovalRequest(tp, id)).body['status']).to.equal('pending');

    pdp.answer = { allow: true };
    const { request } = await approveRequest(ap.deps, customer, id, { duration: 600 });
    expect(request.status).to.equal('approved');
  });
});
