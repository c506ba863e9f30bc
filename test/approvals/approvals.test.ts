import { expect } from 'chai';
import {
  approveRequest,
  denyRequest,
  endAccessGrant,
  giveGrant,
  listGrants,
  listPendingRequests,
} from '../../lib/approvals/actions.js';
import type { AccessGrantView, ApprovalRequestView } from '../../lib/approvals/view.js';
import { requestStateOf } from '../../lib/approvals/record.js';
import { settleExpiry } from '../../lib/approvals/requests.js';
import { answerTo } from '../../lib/http/answer.js';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { createMemoryAuditLog, EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import {
  askForSubjectToken,
  newCustomer,
  readApprovalRequest,
  refusalOf,
  requestIdOf,
  REQUESTS,
  startApprovalProvider,
  type ApprovalProvider,
} from '../support/approvals.js';
import {
  ACCESS_TOKEN,
  apiRequest,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  managementRequest,
  m2mToken,
  userAccessToken,
  type ClientCredentials,
  type Reply,
} from '../support/http.js';
import { adminToken, exchangeAsActor, SESSIONS, trailEvents } from '../support/impersonations.js';
import { API, CLIENTS, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';

const APPROVAL_EVENTS = [
  EVENTS.accessGrantCreated,
  EVENTS.accessGrantEnded,
  EVENTS.approvalRequested,
  EVENTS.approvalApproved,
  EVENTS.approvalDenied,
  EVENTS.approvalExpired,
  EVENTS.breakGlassUsed,
  EVENTS.subjectTokenCreated,
  EVENTS.subjectTokenRefused,
  EVENTS.sessionEnded,
] as const;

describe('customer approval', function () {
  this.timeout(30_000);
  let ap: ApprovalProvider;
  let tp: TestProvider;
  let alice: string;
  let admin: string;
  const events: Array<[string, ImpersonationEvent]> = [];
  /** Runs as the exchange policy, i.e. after the grant was checked and before anything is written. */
  let duringExchange: ((subject: string) => Promise<void>) | undefined;
  const seen = (name: string, customer: string) =>
    events.filter(([event, payload]) => event === name && payload.subject === customer).map(([, payload]) => payload);

  before(async () => {
    ap = await startApprovalProvider({
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id], maxPendingPerCustomer: 3, maxGrantsPerCustomer: 3 },
      plugin: {
        auditLog: createMemoryAuditLog(),
        canExchange: async ({ subject }) => {
          const work = duringExchange;
          duringExchange = undefined;
          await work?.(subject);
          return true;
        },
      },
    });
    tp = ap.tp;
    for (const name of APPROVAL_EVENTS) onImpersonationEvent(tp.provider, name, (event) => events.push([name, event]));
    alice = await userAccessToken(tp, 'alice');
    admin = await adminToken(tp);
  });
  beforeEach(() => {
    ap.policy.answer = 'grant';
  });
  after(() => tp?.close());

  function ask(
    customer: string,
    more: Record<string, unknown> = {},
    client: ClientCredentials = CLIENTS.backend,
  ): Promise<Reply> {
    return askForSubjectToken(
      tp,
      {
        userId: customer,
        actorId: 'alice',
        clientId: CLIENTS.console.client_id,
        context: { ticketId: 'T-7' },
        ...more,
      },
      client,
    );
  }

  async function subjectTokenFor(customer: string, more: Record<string, unknown> = {}): Promise<string> {
    const reply = await ask(customer, more);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    return reply.body['subjectToken'] as string;
  }

  async function sessionOf(token: string): Promise<Record<string, unknown>> {
    const session = decodeJwt(token)['impersonation_session'] as string;
    return (await apiRequest(tp, 'GET', `${SESSIONS}/${session}`, admin)).body;
  }

  describe('at subject-token creation', () => {
    it("issues the token as without approvals when the policy answers 'none'", async () => {
      ap.policy.answer = 'none';
      const customer = newCustomer();
      const reply = await askForSubjectToken(tp, { userId: customer });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
      expect(reply.body['subjectToken']).to.match(/^ist_/);
      expect(seen(EVENTS.approvalRequested, customer)).to.deep.equal([]);
    });

    it('requires actorId and clientId when the customer must approve, saying which is missing: a customer approves a person and the application', async () => {
      const customer = newCustomer();
      for (const [body, message] of [
        [{}, /^actorId and clientId are required when the customer must approve$/],
        [{ clientId: CLIENTS.console.client_id }, /^actorId is required when the customer must approve$/],
        [{ actorId: 'alice' }, /^clientId is required when the customer must approve$/],
      ] as const) {
        expectError(await askForSubjectToken(tp, { userId: customer, ...body }), 400, 'invalid_request', message);
      }
      expect(seen(EVENTS.approvalRequested, customer)).to.deep.equal([]);
    });

    it('answers 202 with a pending approval request, and no token, when no grant covers the request', async () => {
      const customer = newCustomer();
      const reply = await ask(customer, { scope: ['profile:read'], resource: API, clientId: 'support-console' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(202);
      expect(reply.body).to.have.all.keys('approvalRequest');
      const request = reply.body['approvalRequest'] as ApprovalRequestView;
      expect(request).to.deep.include({
        status: 'pending',
        subject: customer,
        actor: 'alice',
        clientId: 'support-console',
        context: { ticketId: 'T-7' },
        resource: API,
        scope: ['profile:read'],
      });
      expect(request.id).to.match(/^apr_[A-Za-z0-9_-]{22}$/);
      expect(Date.parse(request.expiresAt) - Date.parse(request.createdAt)).to.equal(900_000);
      expect(request.createdAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(seen(EVENTS.subjectTokenCreated, customer)).to.deep.equal([]);
      expect(seen(EVENTS.approvalRequested, customer)).to.have.length(1);
      expect(seen(EVENTS.approvalRequested, customer)[0]).to.deep.include({
        approvalRequestId: request.id,
        actor: 'alice',
        createdBy: CLIENTS.backend.client_id,
      });
    });

    it('answers the same request when the same backend asks again for the same actor; another backend gets its own', async () => {
      const customer = newCustomer();
      const first = requestIdOf(await ask(customer));
      expect(requestIdOf(await ask(customer))).to.equal(first);
      const other = requestIdOf(await ask(customer, {}, CLIENTS.oncall));
      expect(other).to.not.equal(first);
      expect(seen(EVENTS.approvalRequested, customer)).to.have.length(2);
    });

    // The review's attack: concurrent bursts left 60 requests waiting against a bound of 20, past the customer's list.
    it('keeps a burst of concurrent asks within the cap: 30 at once, 3 waiting, each of them listed to the customer', async () => {
      const customer = newCustomer();
      const m2m = await m2mToken(tp);
      const replies = await Promise.all(
        Array.from({ length: 30 }, (_, n) =>
          managementRequest(
            tp,
            {
              userId: customer,
              actorId: `actor-${n}`,
              clientId: CLIENTS.console.client_id,
              context: { ticketId: 'T-9' },
            },
            m2m,
          ),
        ),
      );
      expect(replies.filter((reply) => reply.status === 202)).to.have.length(3);
      for (const reply of replies.filter((each) => each.status !== 202)) {
        expectError(reply, 429, 'too_many_pending_requests');
      }
      expect((await listPendingRequests(ap.deps, customer)).items).to.have.length(3);
      expect(seen(EVENTS.approvalRequested, customer)).to.have.length(3);
    });

    it("refuses a new request with 429 too_many_pending_requests once the customer's cap is reached", async () => {
      const customer = newCustomer();
      for (const actorId of ['alice', 'carol', 'dave']) requestIdOf(await ask(customer, { actorId }));
      expectError(await ask(customer, { actorId: 'erin' }), 429, 'too_many_pending_requests');
      // Asking again for a request that waits is no new request: still answered.
      requestIdOf(await ask(customer, { actorId: 'carol' }));
      expect(seen(EVENTS.approvalRequested, customer)).to.have.length(3);
    });

    it('refuses a policy answer it does not know with 500, and issues nothing', async () => {
      ap.policy.answer = 'sometimes' as never;
      const customer = newCustomer();
      const reply = await ask(customer);
      expectError(reply, 500, 'server_error');
      expect(seen(EVENTS.subjectTokenCreated, customer)).to.deep.equal([]);
      expect(seen(EVENTS.approvalRequested, customer)).to.deep.equal([]);
    });

    it('checks the ceiling asked: scope an array of scope names, resource an absolute URI', async () => {
      const customer = newCustomer();
      expectError(await ask(customer, { scope: 'profile:read' }), 400, 'invalid_request', /^scope must be an array/);
      expectError(await ask(customer, { scope: [] }), 400, 'invalid_request', /^scope must be an array/);
      expectError(await ask(customer, { resource: 'not a uri' }), 400, 'invalid_request', /^resource must be/);
      expectError(await ask(customer, { resource: `${API}#x` }), 400, 'invalid_request', /^resource must be/);
    });
  });

  describe('a grant in force', () => {
    it('lets the token be issued under it, named in the token, the session and the events', async () => {
      const customer = newCustomer();
      const grant = await giveGrant(ap.deps, customer, { duration: 3600, note: 'until my invoice is fixed' });
      const created = await ask(customer);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(seen(EVENTS.subjectTokenCreated, customer)[0]).to.include({ accessGrantId: grant.id });
      const exchanged = await exchangeAsActor(tp, {
        subjectToken: created.body['subjectToken'] as string,
        actorToken: alice,
        scope: 'profile:read',
      });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      const session = await sessionOf(exchanged.body['access_token'] as string);
      expect(session).to.include({ accessGrantId: grant.id, subject: customer, actor: 'alice', state: 'active' });
      expect(session).to.not.have.property('emergency');
    });

    it('covers only its actor, its resource and the scopes it allows', async () => {
      const customer = newCustomer();
      await giveGrant(ap.deps, customer, { duration: 3600, actorId: 'carol', resource: API, scope: ['profile:read'] });
      requestIdOf(await ask(customer, { actorId: 'alice' }));
      expect((await ask(customer, { actorId: 'carol' })).status).to.equal(201);
      requestIdOf(await ask(customer, { actorId: 'carol', resource: OPAQUE_API }));
      requestIdOf(await ask(customer, { actorId: 'carol', scope: ['profile:read', 'profile:write'] }));
      expect((await ask(customer, { actorId: 'carol', resource: API, scope: ['profile:read'] })).status).to.equal(201);
    });

    it('narrows the exchange to its scopes and resource, and caps the token at its expiry', async () => {
      const customer = newCustomer();
      await giveGrant(ap.deps, customer, { duration: 120, resource: API, scope: ['profile:read'] });
      const narrowed = await exchangeAsActor(tp, {
        subjectToken: await subjectTokenFor(customer),
        actorToken: alice,
        scope: 'profile:read profile:write',
      });
      expect(narrowed.status, JSON.stringify(narrowed.body)).to.equal(200);
      expect(narrowed.body['scope']).to.equal('profile:read');
      expect(narrowed.body['expires_in']).to.be.within(100, 120);
      const claims = decodeJwt(narrowed.body['access_token'] as string);
      expect(claims['scope']).to.equal('profile:read');

      const token = await subjectTokenFor(customer);
      expectError(
        await exchangeAsActor(tp, { subjectToken: token, actorToken: alice, scope: 'profile:write' }),
        400,
        'invalid_scope',
        /^the customer's access grant allows only: profile:read$/,
      );
      expectError(
        await exchangeAsActor(tp, { subjectToken: token, actorToken: alice, resource: OPAQUE_API, scope: 'read' }),
        400,
        'invalid_target',
      );
      // Refused before anything was written: the same token still works within the grant.
      const redeemed = await exchangeAsActor(tp, { subjectToken: token, actorToken: alice, scope: 'profile:read' });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    });

    it('refuses the exchange with invalid_grant once the grant ended, and burns nothing: the token can still be withdrawn', async () => {
      const customer = newCustomer();
      const grant = await giveGrant(ap.deps, customer, { duration: 3600 });
      const created = await ask(customer);
      const token = created.body['subjectToken'] as string;
      await endAccessGrant(ap.deps, customer, grant.id);
      for (let attempt = 0; attempt < 2; attempt += 1) {
        expectError(
          await exchangeAsActor(tp, { subjectToken: token, actorToken: alice }),
          400,
          'invalid_grant',
          /^the customer's access grant ended$/,
        );
      }
      const withdrawn = await apiRequest(tp, 'DELETE', `/api/subject-tokens/${created.body['id'] as string}`, admin);
      expect(withdrawn.status, 'not redeemed: withdrawn, not 409').to.equal(204);
      expect(seen(EVENTS.accessGrantEnded, customer)).to.have.length(1);
    });

    it('refuses the exchange when the grant ends while the exchange runs, and leaves no session behind', async () => {
      const customer = newCustomer();
      const grant = await giveGrant(ap.deps, customer, { duration: 3600 });
      const created = await ask(customer);
      duringExchange = (subject) => endAccessGrant(ap.deps, subject, grant.id);
      expectError(
        await exchangeAsActor(tp, { subjectToken: created.body['subjectToken'] as string, actorToken: alice }),
        400,
        'invalid_grant',
        /^the customer's access grant ended$/,
      );
      expect(duringExchange, 'the grant was ended during the exchange').to.equal(undefined);
      const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=${customer}`, admin);
      expect(listed.body['items']).to.deep.equal([]);
      const withdrawn = await apiRequest(tp, 'DELETE', `/api/subject-tokens/${created.body['id'] as string}`, admin);
      expect(withdrawn.status, 'nothing burned').to.equal(204);
    });

    it('ends every session it allowed when it ends: opaque tokens at once, JWTs at the resource server within a second', async () => {
      const customer = newCustomer();
      const grant = await giveGrant(ap.deps, customer, { duration: 3600 });
      const verifier: ImpersonationVerifier = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        revocationsUri: `${tp.base}${SESSIONS}/revocations`,
        refreshInterval: 100,
        maxStaleness: 1000,
      });
      try {
        await verifier.ready();
        const jwt = await exchangeAsActor(tp, { subjectToken: await subjectTokenFor(customer), actorToken: alice });
        const opaque = await exchangeAsActor(tp, {
          subjectToken: await subjectTokenFor(customer),
          actorToken: alice,
          resource: OPAQUE_API,
        });
        const token = jwt.body['access_token'] as string;
        expect((await verifier.verify(token)).subject).to.equal(customer);
        expect((await introspect(tp, opaque.body['access_token'] as string))['active']).to.equal(true);

        await endAccessGrant(ap.deps, customer, grant.id);
        const endedAt = Date.now();
        expect((await introspect(tp, opaque.body['access_token'] as string))['active']).to.equal(false);
        let refused: ImpersonationTokenError | undefined;
        while (!refused && Date.now() - endedAt < 1000) {
          await verifier.verify(token).then(
            () => new Promise((resolve) => setTimeout(resolve, 20)),
            (error: ImpersonationTokenError) => {
              refused = error;
            },
          );
        }
        expect(refused?.code, 'refused within 1 s').to.equal('session_revoked');
        expect(await sessionOf(token)).to.include({ state: 'ended', endReason: 'access_grant_ended' });
        const ended = seen(EVENTS.sessionEnded, customer);
        expect(ended.map((event) => event.endReason)).to.deep.equal(['access_grant_ended', 'access_grant_ended']);

        // Ending it again reports nothing twice.
        await endAccessGrant(ap.deps, customer, grant.id);
        expect(seen(EVENTS.accessGrantEnded, customer)).to.have.length(1);
        expect(seen(EVENTS.sessionEnded, customer)).to.have.length(2);
      } finally {
        verifier.close();
      }
    });

    it("is ignored under the 'request' policy: only a grant the customer made by approving counts", async () => {
      ap.policy.answer = 'request';
      const customer = newCustomer();
      await giveGrant(ap.deps, customer, { duration: 3600, actorId: 'alice' });
      requestIdOf(await ask(customer));
    });
  });

  describe('an approval request', () => {
    it('approved: the backend reads the grant it became, and the next ask for that actor gets a token within it', async () => {
      ap.policy.answer = 'request';
      const customer = newCustomer();
      const id = requestIdOf(await ask(customer, { scope: ['profile:read', 'profile:write'], resource: API }));
      expect((await listPendingRequests(ap.deps, customer)).items.map((item) => item.id)).to.deep.equal([id]);
      const { request, grant } = await approveRequest(ap.deps, customer, id, {
        duration: 600,
        scope: ['profile:read'],
      });
      expect(request.status).to.equal('approved');
      expect(grant).to.deep.include({
        origin: 'approval',
        actor: 'alice',
        approvalRequestId: id,
        resource: API,
        scope: ['profile:read'],
        state: 'active',
      });

      const read = await readApprovalRequest(tp, id);
      expect(read.status).to.equal(200);
      expect(read.body).to.deep.include({ id, status: 'approved' });
      expect(read.body['grant']).to.deep.equal({
        id: grant.id,
        expiresAt: grant.expiresAt,
        resource: API,
        scope: ['profile:read'],
      });
      expect(read.body['answeredAt']).to.be.a('string');
      expect((await listPendingRequests(ap.deps, customer)).items).to.deep.equal([]);

      const token = await subjectTokenFor(customer);
      const exchanged = await exchangeAsActor(tp, { subjectToken: token, actorToken: alice, scope: 'profile:read' });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      // Another actor is not covered by the customer's approval of alice.
      requestIdOf(await ask(customer, { actorId: 'carol' }));

      expect(seen(EVENTS.approvalApproved, customer)[0]).to.include({ approvalRequestId: id, accessGrantId: grant.id });
      expect(seen(EVENTS.accessGrantCreated, customer).map((event) => event.accessGrantId)).to.deep.equal([grant.id]);
      expect((await refusalOf(approveRequest(ap.deps, customer, id, { duration: 60 }))).error).to.equal(
        'already_answered',
      );
      expect((await refusalOf(denyRequest(ap.deps, customer, id, {}))).status).to.equal(409);
    });

    it('approved with no scope of the customer: the grant allows what was asked; never wider', async () => {
      const customer = newCustomer();
      const id = requestIdOf(await ask(customer, { scope: ['profile:read'] }));
      const wider = await refusalOf(approveRequest(ap.deps, customer, id, { duration: 60, scope: ['profile:write'] }));
      expect(wider).to.deep.include({ status: 400, error: 'invalid_request' });
      expect(wider.message).to.equal('scope may only narrow the scope asked: profile:read');
      const { grant } = await approveRequest(ap.deps, customer, id, { duration: 60 });
      expect(grant.scope).to.deep.equal(['profile:read']);
    });

    it('denied: the backend reads denied with the reason, and a later ask is a new request', async () => {
      const customer = newCustomer();
      const id = requestIdOf(await ask(customer));
      const { request } = await denyRequest(ap.deps, customer, id, { reason: 'not while I travel' });
      expect(request).to.include({ status: 'denied', denialReason: 'not while I travel' });
      const read = await readApprovalRequest(tp, id);
      expect(read.body).to.include({ status: 'denied', denialReason: 'not while I travel' });
      expect(read.body).to.not.have.property('grant');
      expect(seen(EVENTS.approvalDenied, customer)[0]).to.include({
        approvalRequestId: id,
        reason: 'not while I travel',
      });
      expect(requestIdOf(await ask(customer))).to.not.equal(id);
      expect((await refusalOf(approveRequest(ap.deps, customer, id, { duration: 60 }))).error).to.equal(
        'already_answered',
      );
    });

    // The review's attack: the grant kept only actor, resource and scope, so another backend, another ticket
    // and another client (a public one too) all passed under it for its whole time.
    it('becomes a grant bound to what the customer approved: the client, the backend that asked and the ticket', async () => {
      const customer = newCustomer();
      const id = requestIdOf(await ask(customer, { scope: ['profile:read'], resource: API }));
      const { grant } = await approveRequest(ap.deps, customer, id, { duration: 600 });
      // The customer sees what they approved.
      const approved = { clientId: CLIENTS.console.client_id, context: { ticketId: 'T-7' } };
      expect(grant).to.deep.include(approved);
      expect((await listGrants(ap.deps, customer)).items).to.deep.equal([grant]);
      for (const policy of ['grant', 'request'] as const) {
        ap.policy.answer = policy;
        for (const [what, more, client] of [
          ['another client (public)', { clientId: CLIENTS.mtls.client_id }, CLIENTS.backend],
          ['another client (confidential)', { clientId: CLIENTS.web.client_id }, CLIENTS.backend],
          ['another ticket', { context: { ticketId: 'T-8' } }, CLIENTS.backend],
          ['another backend', {}, CLIENTS.oncall],
        ] as const) {
          const reply = await ask(customer, more, client);
          // Asked of the customer again, and no token; denied at once, so that the next has room.
          await denyRequest(ap.deps, customer, requestIdOf(reply), {});
          expect(reply.status, `${policy}: ${what}`).to.equal(202);
        }
        // No subject token bound to no client passes under it either.
        expectError(await ask(customer, { clientId: undefined }), 400, 'invalid_request', /^clientId is required/);
        // The request asked again, the context's keys in any order: covered.
        const again = await ask(customer, { context: { ticketId: 'T-7' }, resource: API });
        expect(again.status, `${policy}: ${JSON.stringify(again.body)}`).to.equal(201);
      }
      const created = seen(EVENTS.subjectTokenCreated, customer);
      expect(created.map((event) => event.accessGrantId)).to.deep.equal([grant.id, grant.id]);
    });

    it('is read only by the client that made it: any other gets 404, as for an unknown id', async () => {
      const id = requestIdOf(await ask(newCustomer()));
      const unknown = await readApprovalRequest(tp, `apr_${'A'.repeat(22)}`);
      expectError(unknown, 404, 'not_found');
      const foreign = await readApprovalRequest(tp, id, CLIENTS.oncall);
      expect(foreign.status).to.equal(404);
      expect(foreign.body).to.deep.equal(unknown.body);
      expect((await readApprovalRequest(tp, 'nothing-like-an-id')).body).to.deep.equal(unknown.body);
      expectError(await apiRequest(tp, 'GET', `${REQUESTS}/${id}`), 401, 'invalid_token');
      expectError(await apiRequest(tp, 'GET', `${REQUESTS}/${id}`, admin), 403, 'insufficient_scope');
      expect((await apiRequest(tp, 'GET', `${REQUESTS}/${id}?x=%00`, await m2mToken(tp))).status).to.equal(400);
    });

    it("is answered by its own customer only: another customer's id is answered as unknown", async () => {
      const owner = newCustomer();
      const id = requestIdOf(await ask(owner));
      const stranger = newCustomer();
      for (const call of [
        approveRequest(ap.deps, stranger, id, { duration: 60 }),
        denyRequest(ap.deps, stranger, id, {}),
      ]) {
        expect(await refusalOf(call)).to.deep.equal({
          status: 404,
          error: 'not_found',
          message: 'no approval request has this id',
        });
      }
      expect((await readApprovalRequest(tp, id)).body['status']).to.equal('pending');
    });
  });

  describe('break-glass', () => {
    it('lets a client the deployment names issue a token without approval, recorded and shown as an emergency', async () => {
      const customer = newCustomer();
      const reply = await ask(
        customer,
        { breakGlass: { reason: 'payment outage, customer unreachable' } },
        CLIENTS.oncall,
      );
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
      const [used] = seen(EVENTS.breakGlassUsed, customer);
      expect(used).to.include({
        subjectTokenId: reply.body['id'],
        createdBy: CLIENTS.oncall.client_id,
        actor: 'alice',
        reason: 'payment outage, customer unreachable',
      });
      const exchanged = await exchangeAsActor(tp, {
        subjectToken: reply.body['subjectToken'] as string,
        actorToken: alice,
      });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(await sessionOf(exchanged.body['access_token'] as string)).to.include({
        emergency: true,
        emergencyReason: 'payment outage, customer unreachable',
      });
      expect(seen(EVENTS.approvalRequested, customer)).to.deep.equal([]);
    });

    it('is refused with 403 to any other client, and the attempt is recorded', async () => {
      const customer = newCustomer();
      const reply = await ask(customer, { breakGlass: { reason: 'I am in a hurry' } });
      expectError(reply, 403, 'access_denied', /^this client may not bypass the customer's approval$/);
      expect(seen(EVENTS.subjectTokenRefused, customer)[0]).to.include({ error: 'access_denied' });
      expect(seen(EVENTS.breakGlassUsed, customer)).to.deep.equal([]);
    });

    // The review's attack: a break-glass token bound to no one, redeemed by a public client with no actor token.
    it('names the person and the client: without actorId or clientId, 400 saying which is missing, and nothing issued', async () => {
      const customer = newCustomer();
      for (const [body, missing] of [
        [{ clientId: CLIENTS.console.client_id }, 'actorId'],
        [{ actorId: 'alice' }, 'clientId'],
        [{}, 'actorId and clientId'],
      ] as const) {
        expectError(
          await askForSubjectToken(tp, { userId: customer, breakGlass: { reason: 'outage' }, ...body }, CLIENTS.oncall),
          400,
          'invalid_request',
          new RegExp(`^breakGlass requires ${missing}: a bypass names the person who acts \\(actorId\\)`),
        );
      }
      expect(seen(EVENTS.breakGlassUsed, customer)).to.deep.equal([]);
      expect(seen(EVENTS.subjectTokenCreated, customer)).to.deep.equal([]);
      // Bound, the token is redeemed only by that client, with that person's own actor token.
      const reply = await ask(customer, { breakGlass: { reason: 'outage' } }, CLIENTS.oncall);
      const subjectToken = reply.body['subjectToken'] as string;
      expect((await exchange(tp, { subject_token: subjectToken, resource: API })).status).to.equal(400);
      const otherClient = await exchange(
        tp,
        { subject_token: subjectToken, resource: API, actor_token: alice, actor_token_type: ACCESS_TOKEN },
        CLIENTS.mtls,
      );
      expect(otherClient.status).to.equal(400);
      const bound = await exchangeAsActor(tp, { subjectToken, actorToken: alice });
      expect(bound.status, JSON.stringify(bound.body)).to.equal(200);
      expect(await sessionOf(bound.body['access_token'] as string)).to.include({ actor: 'alice', emergency: true });
    });

    it('needs a reason', async () => {
      for (const breakGlass of [
        {},
        { reason: '' },
        { reason: '   ' },
        { reason: 'x'.repeat(501) },
        'now',
        { why: 'x' },
      ]) {
        expect((await ask(newCustomer(), { breakGlass }, CLIENTS.oncall)).status, JSON.stringify(breakGlass)).to.equal(
          400,
        );
      }
    });
  });

  it("serves the new events in the customer's activity, filtered by event", async () => {
    const customer = newCustomer();
    const id = requestIdOf(await ask(customer));
    await approveRequest(ap.deps, customer, id, { duration: 60 });
    const names = [EVENTS.approvalRequested, EVENTS.approvalApproved, EVENTS.accessGrantCreated];
    const query = `?subject=${customer}&${names.map((name) => `event=${name}`).join('&')}`;
    const page = await trailEvents(tp, admin, query);
    expect(page.status, JSON.stringify(page.body)).to.equal(200);
    const items = page.body['items'] as Array<{ event: string; actor: string; outcome: string }>;
    expect(items.map((item) => item.event)).to.deep.equal([...names].reverse());
    expect(items.every((item) => item.actor === 'alice')).to.equal(true);
  });
});

describe('customer approval: the customer operations (library)', function () {
  this.timeout(30_000);
  let ap: ApprovalProvider;

  before(async () => {
    ap = await startApprovalProvider({ approvals: { maxGrantDuration: 3600, maxGrantsPerCustomer: 2 } });
  });
  after(() => ap?.tp.close());

  it('checks what a customer gives: duration, scope, resource, actor, note, and nothing else', async () => {
    const customer = newCustomer();
    const refused: Array<[unknown, RegExp]> = [
      [{}, /^duration must be an integer number of seconds from 1 to 3600$/],
      [{ duration: 0 }, /^duration must be/],
      [{ duration: 3601 }, /^duration must be/],
      [{ duration: 1.5 }, /^duration must be/],
      [{ duration: '60' }, /^duration must be/],
      [{ duration: 60, scope: 'read' }, /^scope must be an array/],
      [{ duration: 60, scope: ['a b'] }, /^scope must be an array/],
      [{ duration: 60, resource: 'relative/path' }, /^resource must be an absolute URI/],
      [{ duration: 60, actorId: ' alice' }, /^actorId must be a non-empty string$/],
      [{ duration: 60, note: 'x'.repeat(501) }, /^note must be a non-empty string of at most 500 characters$/],
      [{ duration: 60, note: 'see \u0000' }, /^note holds text that cannot be stored/],
      [{ duration: 60, note: 'lone \uD800' }, /^note holds text that cannot be stored/],
      [
        { duration: 60, extra: true },
        /^body has an unknown field; its fields are duration, scope, resource, actorId, note$/,
      ],
      ['60', /^body must be a JSON object$/],
    ];
    for (const [input, message] of refused) {
      const refusal = await refusalOf(giveGrant(ap.deps, customer, input));
      expect(refusal.status, JSON.stringify(input)).to.equal(400);
      expect(refusal.message, JSON.stringify(input)).to.match(message);
    }
    const grant: AccessGrantView = await giveGrant(ap.deps, customer, {
      duration: 3600,
      scope: ['profile:read', 'profile:read'],
      resource: API,
      actorId: 'alice',
      note: '  for ticket T-7  ',
    });
    expect(grant).to.deep.include({
      subject: customer,
      actor: 'alice',
      resource: API,
      scope: ['profile:read'],
      note: 'for ticket T-7',
      origin: 'customer',
      state: 'active',
    });
    expect(Date.parse(grant.expiresAt) - Date.parse(grant.createdAt)).to.equal(3_600_000);
  });

  it('caps the grants in force per customer with 429 too_many_grants; ending one makes room', async () => {
    const customer = newCustomer();
    const first = await giveGrant(ap.deps, customer, { duration: 60 });
    await giveGrant(ap.deps, customer, { duration: 60 });
    expect(await refusalOf(giveGrant(ap.deps, customer, { duration: 60 }))).to.deep.include({
      status: 429,
      error: 'too_many_grants',
    });
    await endAccessGrant(ap.deps, customer, first.id);
    await giveGrant(ap.deps, customer, { duration: 60 });
  });

  it('bounds the grants a customer gives in 24 hours, ended ones included: short grants in a loop cannot fill the store', async () => {
    const customer = newCustomer();
    // maxGrantsPerCustomer is 2 here: ten a day, however each ends.
    for (let given = 0; given < 10; given += 1) {
      const grant = await giveGrant(ap.deps, customer, { duration: 60 });
      await endAccessGrant(ap.deps, customer, grant.id);
    }
    expect(await ap.deps.approvals.activeGrants(customer, 10)).to.deep.equal([]);
    expect(await refusalOf(giveGrant(ap.deps, customer, { duration: 60 }))).to.deep.include({
      status: 429,
      error: 'too_many_grants',
      message: 'the customer gave as many access grants in the last 24 hours as the deployment allows',
    });
    // Another customer is not affected.
    await giveGrant(ap.deps, newCustomer(), { duration: 60 });
  });

  // The review's attack: concurrent bursts put 23 grants in force against a bound of 20.
  it('keeps a burst of concurrent grants within the cap: 20 given at once, 2 in force, both listed', async () => {
    const customer = newCustomer();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () => giveGrant(ap.deps, customer, { duration: 60 })),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).to.have.length(2);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected')
        expect(answerTo(outcome.reason)).to.include({ status: 429, error: 'too_many_grants' });
    }
    expect((await listGrants(ap.deps, customer)).items).to.have.length(2);
  });

  it('keeps a burst of concurrent approvals within the cap: those it had no room for stay pending', async () => {
    const customer = newCustomer();
    const ids: string[] = [];
    for (const actorId of ['alice', 'carol', 'dave', 'erin', 'frank']) {
      const asked = { userId: customer, actorId, clientId: CLIENTS.console.client_id };
      ids.push(requestIdOf(await askForSubjectToken(ap.tp, asked)));
    }
    const outcomes = await Promise.allSettled(ids.map((id) => approveRequest(ap.deps, customer, id, { duration: 60 })));
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).to.have.length(2);
    expect((await listGrants(ap.deps, customer)).items).to.have.length(2);
    expect((await listPendingRequests(ap.deps, customer)).items).to.have.length(3);
  });

  it("ends only the customer's own grants: another's, or an unknown id, is 404 alike", async () => {
    const owner = newCustomer();
    const grant = await giveGrant(ap.deps, owner, { duration: 60 });
    const stranger = await refusalOf(endAccessGrant(ap.deps, newCustomer(), grant.id));
    const unknown = await refusalOf(endAccessGrant(ap.deps, owner, `agr_${'B'.repeat(22)}`));
    expect(stranger).to.deep.equal({ status: 404, error: 'not_found', message: 'no access grant has this id' });
    expect(unknown).to.deep.equal(stranger);
    expect(await refusalOf(endAccessGrant(ap.deps, owner, 'garbage'))).to.deep.equal(stranger);
    expect((await ap.deps.approvals.findGrant(grant.id))?.ended).to.equal(undefined);
  });

  it('checks a denial reason and an approval duration', async () => {
    const customer = newCustomer();
    const id = requestIdOf(
      await askForSubjectToken(ap.tp, { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id }),
    );
    expect((await refusalOf(denyRequest(ap.deps, customer, id, { reason: '' }))).status).to.equal(400);
    expect((await refusalOf(denyRequest(ap.deps, customer, id, { why: 'x' }))).status).to.equal(400);
    expect((await refusalOf(approveRequest(ap.deps, customer, id, { duration: 3601 }))).status).to.equal(400);
    expect((await refusalOf(approveRequest(ap.deps, customer, id, {}))).status).to.equal(400);
    expect((await ap.deps.approvals.findRequest(id))?.answer).to.equal(undefined);
  });
});

describe('customer approval: a deployment that widens its approvals', function () {
  this.timeout(30_000);
  let ap: ApprovalProvider;

  before(async () => {
    ap = await startApprovalProvider({ approvals: { widenApprovedGrants: ['clientId', 'caller', 'context'] } });
    ap.policy.answer = 'request';
  });
  after(() => ap?.tp.close());

  it('lets an approval cover what it names: another client or none, another backend, another ticket; still one actor', async () => {
    const customer = newCustomer();
    const asked = {
      userId: customer,
      actorId: 'alice',
      clientId: CLIENTS.console.client_id,
      context: { ticketId: 'T-1' },
    };
    const { grant } = await approveRequest(ap.deps, customer, requestIdOf(await askForSubjectToken(ap.tp, asked)), {
      duration: 600,
    });
    expect(grant).to.not.have.any.keys('clientId', 'context');
    const wider = [
      [{ clientId: CLIENTS.web.client_id, context: { ticketId: 'T-2' } }, CLIENTS.backend],
      [{}, CLIENTS.oncall],
    ] as const;
    for (const [more, client] of wider) {
      const reply = await askForSubjectToken(ap.tp, { userId: customer, actorId: 'alice', ...more }, client);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    }
    requestIdOf(await askForSubjectToken(ap.tp, { userId: customer, actorId: 'carol' }));
  });
});

describe('customer approval: a request that waits too long', function () {
  this.timeout(30_000);
  let ap: ApprovalProvider;
  const expired: ImpersonationEvent[] = [];

  before(async () => {
    ap = await startApprovalProvider({ approvals: { requestTTL: 1 } });
    onImpersonationEvent(ap.tp.provider, EVENTS.approvalExpired, (event) => expired.push(event));
  });
  after(() => ap?.tp.close());

  it('is read as expired, reported once, and can no longer be approved', async () => {
    const customer = newCustomer();
    const id = requestIdOf(
      await askForSubjectToken(ap.tp, { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id }),
    );
    const waiting = (await ap.deps.approvals.findRequest(id))!;
    const backend = await m2mToken(ap.tp);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await listPendingRequests(ap.deps, customer)).items).to.deep.equal([]);
    // Everyone who notices the expiry at once, from the same unanswered record: one of them reports it.
    const [first, second, ...settled] = await Promise.all([
      apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, backend),
      apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, backend),
      ...Array.from({ length: 3 }, () => settleExpiry(ap.deps, waiting, undefined)),
    ]);
    for (const read of [first!, second!]) expect(read.body).to.include({ id, status: 'expired' });
    for (const record of settled) expect(requestStateOf(record)).to.equal('expired');
    expect(await refusalOf(approveRequest(ap.deps, customer, id, { duration: 60 }))).to.deep.include({
      status: 409,
      error: 'request_expired',
    });
    expect(expired.map((event) => event.approvalRequestId)).to.deep.equal([id]);
    // The next ask is a new request.
    expect(
      requestIdOf(
        await askForSubjectToken(ap.tp, { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id }),
      ),
    ).to.not.equal(id);
  });
});

describe('customer approval: an audit trail that cannot be written', function () {
  this.timeout(30_000);
  let ap: ApprovalProvider;
  const failing = new Set<string>();
  const issued: ImpersonationEvent[] = [];

  before(async () => {
    ap = await startApprovalProvider({
      approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
      plugin: {
        auditLog: {
          append: async (name) => {
            if (failing.has(name)) throw new Error('the trail is down');
          },
        },
      },
    });
    onImpersonationEvent(ap.tp.provider, EVENTS.subjectTokenCreated, (event) => issued.push(event));
  });
  afterEach(() => failing.clear());
  after(() => ap?.tp.close());

  it('issues no break-glass token without the record of the bypass', async () => {
    failing.add(EVENTS.breakGlassUsed);
    const customer = newCustomer();
    const reply = await askForSubjectToken(
      ap.tp,
      { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id, breakGlass: { reason: 'outage' } },
      CLIENTS.oncall,
    );
    expectError(
      reply,
      503,
      'temporarily_unavailable',
      /^the audit trail cannot be written; no subject token was issued$/,
    );
    expect(issued.filter((event) => event.subject === customer)).to.deep.equal([]);
  });

  it('puts no grant in force without its record', async () => {
    failing.add(EVENTS.accessGrantCreated);
    const customer = newCustomer();
    expect(await refusalOf(giveGrant(ap.deps, customer, { duration: 60 }))).to.deep.include({
      status: 503,
      error: 'temporarily_unavailable',
    });
    expect((await listGrants(ap.deps, customer)).items).to.deep.equal([]);
    requestIdOf(
      await askForSubjectToken(ap.tp, { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id }),
    );
  });
});

describe('customer approval: off (no approvals option)', () => {
  let tp: TestProvider;
  before(async () => {
    tp = await startProvider();
  });
  after(() => tp?.close());

  it('keeps subject-token creation as it was: the new fields are unknown, and no requests path is served', async () => {
    const m2m = await m2mToken(tp);
    for (const field of ['scope', 'resource', 'breakGlass']) {
      expectError(
        await managementRequest(tp, { userId: 'bob', [field]: ['x'] }, m2m),
        400,
        'invalid_request',
        new RegExp(`^unknown field: ${field}$`),
      );
    }
    expect((await managementRequest(tp, { userId: 'bob' }, m2m)).status).to.equal(201);
    expect((await apiRequest(tp, 'GET', `${REQUESTS}/apr_${'A'.repeat(22)}`, m2m)).status).to.equal(404);
  });
});

describe('customer approval: a requests path the sessions path is nested under', function () {
  this.timeout(30_000);

  it('serves the sessions list at its own path, the approval request route at its own', async () => {
    const { tp } = await startApprovalProvider({
      approvals: { requestsPath: '/api/support' },
      plugin: { sessionsPath: '/api/support/impersonations' },
    });
    try {
      const listed = await apiRequest(tp, 'GET', '/api/support/impersonations', await adminToken(tp));
      expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
      expect(listed.body['items']).to.be.an('array');
      const unknown = await apiRequest(tp, 'GET', `/api/support/apr_${'A'.repeat(22)}`, await m2mToken(tp));
      expect(unknown.status).to.equal(404);
    } finally {
      await tp.close();
    }
  });
});
