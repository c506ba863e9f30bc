import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { importJWK, SignJWT, type JWK } from 'jose';
import Koa from 'koa';
import { FIXTURE_JWKS } from '../../fixtures/keys.js';
import { approveRequest } from '../../lib/approvals/actions.js';
import { newAccessGrantId, newApprovalRequestId, type ApprovalRequest } from '../../lib/approvals/record.js';
import type { ApprovalStore } from '../../lib/approvals/store.js';
import { startApprovalProvider, type ApprovalProvider, type ApprovalProviderOptions } from '../support/approvals.js';
import { impersonate } from '../support/impersonations.js';
import {
  apiRequest,
  decodeJwt,
  exchange,
  expectError,
  m2mToken,
  subjectToken,
  tokenRequest,
  userAccessToken,
  userSignIn,
  type Reply,
} from '../support/http.js';
import { mountCallback } from '../support/mount.js';
import {
  API,
  CLIENTS,
  CUSTOMER_API,
  CUSTOMER_SCOPE,
  MANAGEMENT,
  REDIRECT_URI,
  type TestProvider,
} from '../support/provider.js';

const BASE = '/api/support-access';
const GRANTS = `${BASE}/grants`;
const REQUESTS = `${BASE}/requests`;
const DAY = 24 * 3600;
const APPROVALS = { maxGrantDuration: 7 * DAY, maxGrantsPerCustomer: 3 };

/**
 * The provider with the customer API. The backend's subject tokens need no
 * approval here (`require` answers `none`): this file is about the customer's side.
 */
async function startCustomerApiProvider(
  options: Omit<ApprovalProviderOptions, 'approvals'> = {},
): Promise<ApprovalProvider> {
  const ap = await startApprovalProvider({ ...options, approvals: APPROVALS });
  ap.policy.answer = 'none';
  return ap;
}

const now = () => Math.floor(Date.now() / 1000);

/** A token's scopes but `openid`, which oidc-provider before 9.13 also writes into a resource's JWT. */
function resourceScopes(claims: Record<string, unknown>): string[] {
  return String(claims['scope'])
    .split(' ')
    .filter((scope) => scope !== 'openid');
}

/** The customer's own sign-in to the customer app, for the customer API (with its scope unless told otherwise). */
function customerToken(tp: TestProvider, user: string, scope = `openid ${CUSTOMER_SCOPE}`): Promise<string> {
  return userAccessToken(tp, user, { client: CLIENTS.customer, scope, resource: CUSTOMER_API });
}

/**
 * A JWT signed with the provider's own key, as the provider would sign one:
 * the claims a token path nobody foresaw could give a token for the customer
 * API. The check must hold whatever issued it.
 */
async function signedToken(tp: TestProvider, claims: Record<string, unknown>): Promise<string> {
  const jwk = FIXTURE_JWKS.keys[0] as JWK;
  const key = await importJWK(jwk, 'RS256');
  return new SignJWT({
    sub: 'bob',
    client_id: CLIENTS.customer.client_id,
    aud: CUSTOMER_API,
    scope: CUSTOMER_SCOPE,
    jti: randomUUID(),
    ...claims,
  })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: jwk.kid! })
    .setIssuer(tp.issuer)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(key);
}

function expectChallenge(reply: Reply, pattern: RegExp): void {
  expect(reply.headers.get('www-authenticate')).to.match(pattern);
}

describe('customer API', function () {
  this.timeout(60_000);
  let ap: ApprovalProvider;
  let tp: TestProvider;
  let store: ApprovalStore;
  let bob: string;
  let carol: string;

  /** A request from the backend, waiting for bob's answer, kept as the Management API would keep it. */
  async function pendingRequest(overrides: Partial<ApprovalRequest> = {}): Promise<ApprovalRequest> {
    const request: ApprovalRequest = {
      id: newApprovalRequestId(),
      subject: 'bob',
      actor: 'alice',
      requestedBy: CLIENTS.backend.client_id,
      clientId: CLIENTS.console.client_id,
      context: { ticketId: 'T-7', reason: 'checkout fails' },
      resource: API,
      scope: ['profile:read', 'profile:write'],
      createdAt: now(),
      expiresAt: now() + 900,
      ...overrides,
    };
    await store.saveRequest(request, 20);
    return request;
  }

  before(async () => {
    ap = await startCustomerApiProvider();
    tp = ap.tp;
    store = ap.deps.approvals;
    bob = await customerToken(tp, 'bob');
    carol = await customerToken(tp, 'carol');
  });
  after(() => tp?.close());

  describe("the customer's access token", () => {
    it("is a JWT for the customer API with the customer scope, from the customer's own sign-in, for 600 s", () => {
      const claims = decodeJwt(bob);
      expect(claims).to.include({ sub: 'bob', aud: CUSTOMER_API });
      expect(resourceScopes(claims)).to.deep.equal([CUSTOMER_SCOPE]);
      expect(claims['client_id']).to.equal(CLIENTS.customer.client_id);
      expect((claims['exp'] as number) - (claims['iat'] as number)).to.equal(600);
      expect(claims).to.not.have.property('act');
    });

    it('is issued again through the refresh token of that sign-in', async () => {
      const { refreshToken } = await userSignIn(tp, 'bob', {
        client: CLIENTS.customer,
        scope: `openid offline_access ${CUSTOMER_SCOPE}`,
        resource: CUSTOMER_API,
        prompt: 'consent',
      });
      expect(refreshToken).to.be.a('string');
      const refreshed = await tokenRequest(
        tp,
        { grant_type: 'refresh_token', refresh_token: refreshToken, resource: CUSTOMER_API },
        CLIENTS.customer,
      );
      expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
      const token = refreshed.body['access_token'] as string;
      const claims = decodeJwt(token);
      expect(claims).to.include({ sub: 'bob', aud: CUSTOMER_API });
      expect(resourceScopes(claims)).to.deep.equal([CUSTOMER_SCOPE]);
      expect((await apiRequest(tp, 'GET', GRANTS, token)).status).to.equal(200);
    });

    it('is never issued to a client with pairwise subject identifiers, whose tokens name no account', async () => {
      const client = { client_id: 'pairwise-app' };
      const { tp: pairwise } = await startCustomerApiProvider({
        configuration: {
          subjectTypes: ['public', 'pairwise'],
          pairwiseIdentifier: (_ctx, accountId, { sectorIdentifier }) =>
            createHash('sha256')
              .update(`${sectorIdentifier ?? ''}:${accountId}`)
              .digest('base64url'),
          clients: [
            {
              ...client,
              subject_type: 'pairwise',
              token_endpoint_auth_method: 'none',
              grant_types: ['authorization_code'],
              response_types: ['code'],
              redirect_uris: [REDIRECT_URI],
            },
          ],
        },
      });
      try {
        const signIn = { client, scope: `openid ${CUSTOMER_SCOPE}` };
        let refusal: unknown;
        await userAccessToken(pairwise, 'bob', { ...signIn, resource: CUSTOMER_API }).catch((error: unknown) => {
          refusal = error;
        });
        expect(String(refusal)).to.match(/invalid_target/);
        // The same client signs in for another resource: what is refused is the customer's API.
        expect(await userAccessToken(pairwise, 'bob', { ...signIn, resource: API, scope: 'profile:read' })).to.be.a(
          'string',
        );
      } finally {
        await pairwise.close();
      }
    });

    it('is never issued through client_credentials', async () => {
      const refused = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', scope: CUSTOMER_SCOPE, resource: CUSTOMER_API },
        CLIENTS.backend,
      );
      expectError(refused, 400, 'invalid_target');
    });

    it('is never issued by the token exchange, and the refused subject token is not burned', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp, { userId: 'bob' });
      const refused = await exchange(tp, {
        subject_token: subject,
        resource: CUSTOMER_API,
        scope: CUSTOMER_SCOPE,
        actor_token: alice,
        actor_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      });
      expectError(refused, 400, 'invalid_target');
      expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
    });
  });

  describe('authentication', () => {
    it('401 with a bare challenge without a token, and for a token that is no token of this provider', async () => {
      const missing = await apiRequest(tp, 'GET', GRANTS);
      expectError(missing, 401, 'invalid_token');
      expect(missing.headers.get('www-authenticate')).to.equal('Bearer');
      const garbage = await apiRequest(tp, 'GET', GRANTS, 'not-a-token');
      expectError(garbage, 401, 'invalid_token');
      expectChallenge(garbage, /^Bearer error="invalid_token", error_description="[^"]+"$/);
      expect(missing.headers.get('cache-control')).to.equal('no-store');
    });

    it('403 insufficient_scope for a token for the customer API without the customer scope', async () => {
      const narrow = await customerToken(tp, 'bob', 'openid');
      const reply = await apiRequest(tp, 'GET', GRANTS, narrow);
      expectError(reply, 403, 'insufficient_scope');
      expect(reply.headers.get('www-authenticate')).to.equal(
        `Bearer error="insufficient_scope", scope="${CUSTOMER_SCOPE}"`,
      );
    });

    it("401 for a Management API token, and for the customer's token for another resource", async () => {
      expectError(await apiRequest(tp, 'GET', GRANTS, await m2mToken(tp)), 401, 'invalid_token', /customer's own/);
      const elsewhere = await userAccessToken(tp, 'bob', {
        client: CLIENTS.customer,
        resource: API,
        scope: 'profile:read',
      });
      expectError(await apiRequest(tp, 'GET', GRANTS, elsewhere), 401, 'invalid_token', /not for the customer/);
    });

    it('401 for an impersonation token of the customer, with an actor or without', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const { token } = await impersonate(tp, { actorToken: alice, subject: { userId: 'bob' } });
      expect(decodeJwt(token)).to.include({ sub: 'bob' }).and.have.property('act');
      expectError(await apiRequest(tp, 'GET', GRANTS, token), 401, 'invalid_token', /impersonation token/);
      const bare = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
      const unacted = bare.body['access_token'] as string;
      expect(decodeJwt(unacted)).to.not.have.property('act');
      expectError(await apiRequest(tp, 'GET', GRANTS, unacted), 401, 'invalid_token', /impersonation token/);
    });

    it('401 for a token of this provider for the customer API that carries act, a session, a binding, or a client as subject', async () => {
      // The same token without any of them is accepted: what refuses the others is what they carry.
      expect((await apiRequest(tp, 'GET', GRANTS, await signedToken(tp, {}))).status).to.equal(200);
      for (const [claims, description] of [
        [{ act: { sub: 'alice' } }, /impersonation token/],
        [{ impersonation_session: 'imp_AAAAAAAAAAAAAAAAAAAAAA' }, /impersonation token/],
        [{ cnf: { jkt: 'A'.repeat(43) } }, /sender-constrained/],
        [{ cnf: { 'x5t#S256': 'A'.repeat(43) } }, /sender-constrained/],
        [{ sub: CLIENTS.customer.client_id }, /customer's own/],
        [{ aud: MANAGEMENT }, /not for the customer/],
      ] as const) {
        const reply = await apiRequest(tp, 'GET', GRANTS, await signedToken(tp, claims));
        expectError(reply, 401, 'invalid_token', description);
      }
    });
  });

  describe('grants', () => {
    it('gives a grant, lists it, ends it once, and ending it again changes nothing', async () => {
      const given = await apiRequest(tp, 'POST', GRANTS, bob, {
        duration: 3600,
        scope: ['profile:read', 'profile:read'],
        resource: API,
        actorId: 'alice',
        note: '  until the invoice is fixed ',
      });
      expect(given.status, JSON.stringify(given.body)).to.equal(201);
      expect(given.body).to.deep.include({
        state: 'active',
        subject: 'bob',
        actor: 'alice',
        resource: API,
        scope: ['profile:read'],
        note: 'until the invoice is fixed',
        origin: 'customer',
      });
      const id = given.body['id'] as string;
      expect(id).to.match(/^agr_[A-Za-z0-9_-]{22}$/);
      const expires = Date.parse(given.body['expiresAt'] as string) - Date.parse(given.body['createdAt'] as string);
      expect(expires).to.equal(3600_000);

      const listed = await apiRequest(tp, 'GET', GRANTS, bob);
      expect(listed.status).to.equal(200);
      expect((listed.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.include(id);
      // Another customer neither sees it nor ends it.
      const theirs = await apiRequest(tp, 'GET', GRANTS, carol);
      expect((theirs.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.not.include(id);
      expectError(await apiRequest(tp, 'DELETE', `${GRANTS}/${id}`, carol), 404, 'not_found');

      const ended = await apiRequest(tp, 'DELETE', `${GRANTS}/${id}`, bob);
      expect(ended.status).to.equal(204);
      expect((await store.findGrant(id))?.ended?.by).to.equal('customer');
      expect((await apiRequest(tp, 'DELETE', `${GRANTS}/${id}`, bob)).status).to.equal(204);
      const after = await apiRequest(tp, 'GET', GRANTS, bob);
      expect((after.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.not.include(id);
    });

    it('gives a grant with nothing but its duration: any actor, any scope', async () => {
      const given = await apiRequest(tp, 'POST', GRANTS, bob, { duration: 60 });
      expect(given.status).to.equal(201);
      expect(given.body).to.include({ subject: 'bob', origin: 'customer', state: 'active' });
      expect(given.body).to.not.have.any.keys('actor', 'scope', 'resource', 'note', 'endedAt', 'endedBy');
      await apiRequest(tp, 'DELETE', `${GRANTS}/${given.body['id'] as string}`, bob);
    });

    it('ending a grant that expired changes nothing', async () => {
      const expired = {
        id: newAccessGrantId(),
        subject: 'bob',
        origin: 'customer' as const,
        createdAt: now() - 120,
        expiresAt: now() - 60,
      };
      await store.saveGrant(expired);
      expect((await apiRequest(tp, 'DELETE', `${GRANTS}/${expired.id}`, bob)).status).to.equal(204);
      expect(await store.findGrant(expired.id)).to.deep.equal(expired);
    });

    it('404 for an id no grant has', async () => {
      expectError(await apiRequest(tp, 'DELETE', `${GRANTS}/${newAccessGrantId()}`, bob), 404, 'not_found');
      expectError(await apiRequest(tp, 'DELETE', `${GRANTS}/agr_nope`, bob), 404, 'not_found');
    });

    it('400 for a bad duration, scope, resource, actor, note, an unknown field, a query or a body that is no JSON', async () => {
      for (const body of [
        {},
        { duration: 0 },
        { duration: 1.5 },
        { duration: '60' },
        { duration: 7 * DAY + 1 },
        { duration: 60, scope: 'profile:read' },
        { duration: 60, scope: [] },
        { duration: 60, scope: ['two words'] },
        { duration: 60, scope: ['quote"'] },
        { duration: 60, scope: [7] },
        { duration: 60, scope: ['x'.repeat(257)] },
        { duration: 60, scope: Array.from({ length: 51 }, (_, index) => `s${index}`) },
        { duration: 60, resource: '/relative' },
        { duration: 60, resource: `${API}#part` },
        { duration: 60, actorId: '' },
        { duration: 60, actorId: ' alice' },
        { duration: 60, note: '' },
        { duration: 60, note: '   ' },
        { duration: 60, note: 'x'.repeat(501) },
        { duration: 60, note: 'T\u0000' },
        { duration: 60, Duration: 60 },
      ]) {
        expectError(await apiRequest(tp, 'POST', GRANTS, bob, body), 400, 'invalid_request');
      }
      expectError(await apiRequest(tp, 'GET', `${GRANTS}?limit=1`, bob), 400, 'invalid_request');
      const text = await fetch(`${tp.base}${GRANTS}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bob}`, 'content-type': 'text/plain' },
        body: '{"duration":60}',
      });
      expect(text.status).to.equal(400);
      expect((await apiRequest(tp, 'GET', GRANTS, bob)).body['items']).to.deep.equal([]);
    });

    it('429 too_many_grants past the most grants in force a customer may hold', async () => {
      const dave = await customerToken(tp, 'admin');
      const ids: string[] = [];
      for (let count = 0; count < APPROVALS.maxGrantsPerCustomer; count += 1) {
        const given = await apiRequest(tp, 'POST', GRANTS, dave, { duration: 600 });
        expect(given.status).to.equal(201);
        ids.push(given.body['id'] as string);
      }
      expectError(await apiRequest(tp, 'POST', GRANTS, dave, { duration: 600 }), 429, 'too_many_grants');
      // Approving would make one more grant too: refused, and the request still waits.
      const request = await pendingRequest({ subject: 'admin' });
      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, dave, { duration: 600 }),
        429,
        'too_many_grants',
      );
      expect((await store.findRequest(request.id))?.answer).to.equal(undefined);
      // Ending one makes room.
      expect((await apiRequest(tp, 'DELETE', `${GRANTS}/${ids[0]!}`, dave)).status).to.equal(204);
      expect((await apiRequest(tp, 'POST', GRANTS, dave, { duration: 600 })).status).to.equal(201);
    });
  });

  describe('approval requests', () => {
    it('lists the pending requests of the customer only', async () => {
      const mine = await pendingRequest();
      const theirs = await pendingRequest({ subject: 'carol' });
      const listed = await apiRequest(tp, 'GET', REQUESTS, bob);
      expect(listed.status).to.equal(200);
      const items = listed.body['items'] as Array<Record<string, unknown>>;
      expect(items.map((item) => item['id']))
        .to.include(mine.id)
        .and.not.include(theirs.id);
      expect(items.find((item) => item['id'] === mine.id)).to.deep.include({
        status: 'pending',
        subject: 'bob',
        actor: 'alice',
        context: { ticketId: 'T-7', reason: 'checkout fails' },
        resource: API,
        scope: ['profile:read', 'profile:write'],
      });
    });

    it('approves within the asked scope: a grant for the actor and resource of the request; once', async () => {
      const request = await pendingRequest();
      const approved = await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, bob, {
        duration: 1800,
        scope: ['profile:read'],
      });
      expect(approved.status, JSON.stringify(approved.body)).to.equal(200);
      const grant = approved.body['grant'] as Record<string, unknown>;
      expect(grant).to.deep.include({
        state: 'active',
        subject: 'bob',
        actor: 'alice',
        resource: API,
        scope: ['profile:read'],
        origin: 'approval',
        approvalRequestId: request.id,
        // What the customer approved, shown with the grant: the application support acts through, the ticket.
        clientId: CLIENTS.console.client_id,
        context: { ticketId: 'T-7', reason: 'checkout fails' },
      });
      const answered = approved.body['request'] as Record<string, unknown>;
      expect(answered).to.include({ id: request.id, status: 'approved' });
      expect(answered['grant']).to.deep.equal({
        id: grant['id'],
        expiresAt: grant['expiresAt'],
        resource: API,
        scope: ['profile:read'],
      });
      expect(answered['answeredAt']).to.be.a('string');
      expect((await apiRequest(tp, 'GET', GRANTS, bob)).body['items']).to.deep.include(grant);
      expect((await apiRequest(tp, 'GET', REQUESTS, bob)).body['items']).to.not.deep.include({ id: request.id });

      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, bob, { duration: 60 }),
        409,
        'already_answered',
      );
      expectError(await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/deny`, bob), 409, 'already_answered');
      expect((await store.findRequest(request.id))?.answer?.decision).to.equal('approved');
      await apiRequest(tp, 'DELETE', `${GRANTS}/${grant['id'] as string}`, bob);
    });

    it('approves with the asked scope when none is given, and with any scope when the request asked none', async () => {
      const asked = await pendingRequest();
      const whole = await apiRequest(tp, 'POST', `${REQUESTS}/${asked.id}/approve`, bob, { duration: 60 });
      expect((whole.body['grant'] as Record<string, unknown>)['scope']).to.deep.equal([
        'profile:read',
        'profile:write',
      ]);
      const open = await pendingRequest({ scope: undefined, resource: undefined });
      const any = await apiRequest(tp, 'POST', `${REQUESTS}/${open.id}/approve`, bob, { duration: 60, scope: ['x'] });
      expect(any.status).to.equal(200);
      expect(any.body['grant'])
        .to.deep.include({ scope: ['x'] })
        .and.not.have.property('resource');
      for (const reply of [whole, any]) {
        await apiRequest(tp, 'DELETE', `${GRANTS}/${(reply.body['grant'] as { id: string }).id}`, bob);
      }
    });

    it('400 for a scope wider than the request asked, or a duration beyond the most: nothing answered', async () => {
      const request = await pendingRequest();
      const path = `${REQUESTS}/${request.id}/approve`;
      for (const body of [
        { duration: 60, scope: ['profile:read', 'admin'] },
        { duration: 7 * DAY + 1 },
        { duration: -1 },
        { scope: ['profile:read'] },
        { duration: 60, resource: API },
      ]) {
        expectError(await apiRequest(tp, 'POST', path, bob, body), 400, 'invalid_request');
      }
      expect((await store.findRequest(request.id))?.answer).to.equal(undefined);
    });

    it('answers a request once when answers race: only the approval that won makes a grant', async () => {
      // Approvals and a denial sent at once: each writes its answer before any grant is made.
      const races = [
        ['approve', 'approve'],
        ['approve', 'approve'],
        ['approve', 'deny', 'approve'],
        ['deny', 'approve'],
      ];
      for (const race of races) {
        const request = await pendingRequest();
        const path = `${REQUESTS}/${request.id}`;
        const replies = await Promise.all(
          race.map((action, index) =>
            action === 'approve'
              ? apiRequest(tp, 'POST', `${path}/approve`, bob, { duration: 60 * (index + 1) })
              : apiRequest(tp, 'POST', `${path}/deny`, bob),
          ),
        );
        expect(replies.map((reply) => reply.status).sort()).to.deep.equal([200, ...race.slice(1).map(() => 409)]);
        const won = replies.find((reply) => reply.status === 200)!;
        const inForce = (await apiRequest(tp, 'GET', GRANTS, bob)).body['items'] as Array<{ id: string }>;
        const answer = (await store.findRequest(request.id))?.answer;
        if (answer?.decision === 'approved') {
          expect(inForce.map((grant) => grant.id)).to.deep.equal([answer.grantId]);
          expect((won.body['grant'] as { id: string }).id).to.equal(answer.grantId);
          await apiRequest(tp, 'DELETE', `${GRANTS}/${answer.grantId!}`, bob);
        } else {
          expect(answer?.decision).to.equal('denied');
          expect(inForce).to.deep.equal([]);
        }
      }
    });

    it('two approvals at once, side by side to the store: one answers and makes the grant, the other neither', async () => {
      const request = await pendingRequest();
      const outcomes = await Promise.allSettled([
        approveRequest(ap.deps, 'bob', request.id, { duration: 60 }),
        approveRequest(ap.deps, 'bob', request.id, { duration: 120 }),
      ]);
      const won = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
      const lost = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as Error] : []));
      expect(won).to.have.length(1);
      expect(lost.map((error) => error.message)).to.deep.equal(['the approval request was answered already']);
      const inForce = await store.activeGrants('bob', 10);
      expect(inForce.map((grant) => grant.id)).to.deep.equal([won[0]!.grant.id]);
      await apiRequest(tp, 'DELETE', `${GRANTS}/${won[0]!.grant.id}`, bob);
    });

    it('denies, with a reason or without one; once', async () => {
      const request = await pendingRequest();
      const denied = await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/deny`, bob, {
        reason: ' not today ',
      });
      expect(denied.status).to.equal(200);
      expect(denied.body['request']).to.include({ id: request.id, status: 'denied', denialReason: 'not today' });
      expect(denied.body['request']).to.not.have.property('grant');
      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, bob, { duration: 60 }),
        409,
        'already_answered',
      );

      const silent = await pendingRequest();
      const bare = await apiRequest(tp, 'POST', `${REQUESTS}/${silent.id}/deny`, bob);
      expect(bare.status).to.equal(200);
      expect(bare.body['request']).to.include({ status: 'denied' }).and.not.have.property('denialReason');

      const other = await pendingRequest();
      for (const body of [{ reason: '' }, { reason: 'x'.repeat(501) }, { reason: 5 }, { why: 'no' }]) {
        expectError(await apiRequest(tp, 'POST', `${REQUESTS}/${other.id}/deny`, bob, body), 400, 'invalid_request');
      }
    });

    it('409 request_expired for a request past its expiry, its expiry recorded once', async () => {
      const request = await pendingRequest({ createdAt: now() - 1000, expiresAt: now() - 100 });
      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, bob, { duration: 60 }),
        409,
        'request_expired',
      );
      const recorded = await store.findRequest(request.id);
      expect(recorded?.answer?.decision).to.equal('expired');
      expectError(await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/deny`, bob), 409, 'request_expired');
      expect((await store.findRequest(request.id))?.answer?.at).to.equal(recorded?.answer?.at);
      expect((await apiRequest(tp, 'GET', GRANTS, bob)).body['items']).to.deep.equal([]);
    });

    it("404 for another customer's request and for an id no request has", async () => {
      const request = await pendingRequest();
      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/approve`, carol, { duration: 60 }),
        404,
        'not_found',
      );
      expectError(await apiRequest(tp, 'POST', `${REQUESTS}/${request.id}/deny`, carol), 404, 'not_found');
      expectError(
        await apiRequest(tp, 'POST', `${REQUESTS}/${newApprovalRequestId()}/approve`, bob, { duration: 60 }),
        404,
        'not_found',
      );
      expectError(await apiRequest(tp, 'POST', `${REQUESTS}/${newApprovalRequestId()}/deny`, bob), 404, 'not_found');
      expectError(await apiRequest(tp, 'POST', `${REQUESTS}/apr_nope/deny`, bob), 404, 'not_found');
      expect((await store.findRequest(request.id))?.answer).to.equal(undefined);
    });
  });
});

describe('customer API: where the deployment serves the Management API', function () {
  this.timeout(60_000);

  for (const via of ['managementApi()', 'managementApiHandler()'] as const) {
    it(`answers through ${via}, with install() leaving the API to the host`, async () => {
      const server: Server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const { tp } = await startCustomerApiProvider({
        issuer: `${origin}/oidc`,
        mount: (provider, install, impersonation) => {
          install({ mountManagementApi: false });
          if (via === 'managementApi()') {
            const parent = new Koa();
            parent.use(impersonation.managementApi());
            parent.use(mountCallback('/oidc', provider));
            server.on('request', parent.callback());
          } else {
            const handler = impersonation.managementApiHandler();
            const providerHandler = provider.callback();
            server.on('request', (req, res) =>
              handler(req, res, () => {
                const request = req as typeof req & { originalUrl?: string };
                request.originalUrl = req.url;
                req.url = (req.url ?? '/').slice('/oidc'.length) || '/';
                void providerHandler(req, res);
              }),
            );
          }
        },
      });
      try {
        const mounted = { ...tp, base: `${origin}/oidc` };
        const token = await customerToken(mounted, 'bob');
        const onHost = { ...tp, base: origin };
        const given = await apiRequest(onHost, 'POST', GRANTS, token, { duration: 60 });
        expect(given.status, JSON.stringify(given.body)).to.equal(201);
        expect((await apiRequest(onHost, 'GET', GRANTS, token)).body['items']).to.have.length(1);
        expectError(await apiRequest(onHost, 'GET', GRANTS), 401, 'invalid_token');
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await tp.close();
      }
    });
  }
});
