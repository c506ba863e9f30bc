/**
 * RFC 8693 delegation on the plugin's token-exchange grant: a service that
 * holds a user's access token gets a narrower one for the next API, naming
 * itself in `act`. Over HTTP against a real provider, on TEST_ADAPTER's store.
 */
import { expect } from 'chai';
import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import { giveGrant } from '../../lib/approvals/actions.js';
import { checkCeiling } from '../../lib/exchange/customer-grant.js';
import { EVENTS, type DelegationPolicyInput, type ImpersonationEvent } from '../../lib/index.js';
import {
  ACTOR_API,
  API,
  CLIENTS,
  DOWNSTREAM_API,
  OPAQUE_API,
  SHORT_API,
  startProvider,
  type TestProvider,
  type TestProviderOptions,
} from '../support/provider.js';
import {
  ACCESS_TOKEN,
  apiRequest,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  userAccessToken,
  type Reply,
} from '../support/http.js';
import { DpopKey } from '../support/dpop.js';
import { adminToken, exchangeAsActor, impersonate, revokeSession, SESSIONS } from '../support/impersonations.js';
import { askForSubjectToken, newCustomer, startApprovalProvider, type ApprovalProvider } from '../support/approvals.js';

const JWT = 'urn:ietf:params:oauth:token-type:jwt';
const PARTNER = 'urn:example:partner-token';

/** A delegation by the orders service (or `client`): the reply as it comes. */
function delegate(
  tp: TestProvider,
  subjectToken: string,
  params: Record<string, string | string[] | undefined> = {},
  client: { client_id: string; client_secret?: string } = CLIENTS.orders,
): Promise<Reply> {
  return exchange(tp, { subject_token: subjectToken, resource: DOWNSTREAM_API, ...params }, client);
}

/** Bob's access token for API (a JWT with profile:read profile:write), as the console got it. */
function bobsToken(tp: TestProvider, user = 'bob', resource = API, scope = 'openid profile:read profile:write') {
  return userAccessToken(tp, user, { resource, scope });
}

function ok(reply: Reply): Record<string, unknown> {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
  return reply.body;
}

describe('delegation', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let admin: string;
  const events: ImpersonationEvent[] = [];

  before(async () => {
    tp = await startProvider(delegationProvider());
    admin = await adminToken(tp);
    for (const name of [EVENTS.delegationSucceeded, EVENTS.delegationRefused, EVENTS.sessionEnded]) {
      tp.provider.on(name, (event: ImpersonationEvent) => events.push(event));
    }
  });
  after(() => tp.close());

  describe('an access token of this provider as the subject', () => {
    it('issues a narrower JWT naming the client in act, with no refresh token, recorded as a delegation session', async () => {
      const subject = await bobsToken(tp);
      const body = ok(await delegate(tp, subject, { scope: 'profile:read' }));
      expect(body['issued_token_type']).to.equal(ACCESS_TOKEN);
      expect(body).not.to.have.property('refresh_token');
      expect(body['scope']).to.equal('profile:read');
      const claims = decodeJwt(body['access_token'] as string);
      expect(claims['sub']).to.equal('bob');
      expect(claims['aud']).to.equal(DOWNSTREAM_API);
      expect(claims['act']).to.deep.equal({ sub: CLIENTS.orders.client_id, client_id: CLIENTS.orders.client_id });
      expect(claims['exp']).to.be.at.most(decodeJwt(subject)['exp'] as number);
      const sessionId = claims['impersonation_session'] as string;
      const session = await apiRequest(tp, 'GET', `${SESSIONS}/${sessionId}`, admin);
      expect(session.body).to.include({ type: 'delegation', state: 'active', subject: 'bob' });
      expect(session.body['actor']).to.equal(CLIENTS.orders.client_id);
      const event = events.find((seen) => seen.name === EVENTS.delegationSucceeded && seen.sessionId === sessionId);
      expect(event).to.include({ subject: 'bob', actor: CLIENTS.orders.client_id, depth: 1, resource: DOWNSTREAM_API });
    });

    it('defaults the scopes to those of the subject token that the resource defines', async () => {
      const body = ok(await delegate(tp, await bobsToken(tp)));
      expect(body['scope']).to.equal('profile:read');
    });

    it('takes an opaque subject token and issues an opaque token that stopping its session ends', async () => {
      const subject = await bobsToken(tp, 'bob', OPAQUE_API, 'openid read write');
      const body = ok(await delegate(tp, subject, { resource: OPAQUE_API, scope: 'read' }));
      const token = body['access_token'] as string;
      const seen = await introspect(tp, token);
      expect(seen).to.include({ active: true, sub: 'bob', scope: 'read' });
      expect(seen['act']).to.deep.include({ sub: CLIENTS.orders.client_id });
      const revoked = await revokeSession(tp, admin, seen['impersonation_session'] as string);
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
      expect(await introspect(tp, token)).to.include({ active: false });
    });

    it('issues the same delegation under its session while it lives, and under a new one once it is stopped, though this process found it live just before', async () => {
      const subject = await bobsToken(tp);
      const sessionOf = (body: Record<string, unknown>) =>
        decodeJwt(body['access_token'] as string)['impersonation_session'] as string;
      const first = sessionOf(ok(await delegate(tp, subject, { scope: 'profile:read' })));
      expect(sessionOf(ok(await delegate(tp, subject, { scope: 'profile:read' })))).to.equal(first);
      expect((await revokeSession(tp, admin, first)).status).to.equal(204);
      const next = sessionOf(ok(await delegate(tp, subject, { scope: 'profile:read' })));
      expect(next).to.not.equal(first);
      expect((await apiRequest(tp, 'GET', `${SESSIONS}/${next}`, admin)).body).to.include({ state: 'active' });
      expect((await apiRequest(tp, 'GET', `${SESSIONS}/${first}`, admin)).body).to.include({ state: 'revoked' });
    });

    it('answers issued_token_type jwt when a JWT is asked for, and refuses other types as invalid_request', async () => {
      const subject = await bobsToken(tp);
      expect(ok(await delegate(tp, subject, { requested_token_type: JWT }))['issued_token_type']).to.equal(JWT);
      expect(ok(await delegate(tp, subject, { subject_token_type: JWT }))['issued_token_type']).to.equal(ACCESS_TOKEN);
      expectError(
        await delegate(tp, subject, { requested_token_type: 'urn:ietf:params:oauth:token-type:id_token' }),
        400,
        'invalid_request',
        /requested_token_type/,
      );
      expectError(
        await delegate(tp, subject, { requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token' }),
        400,
        'invalid_request',
      );
      const opaque = await bobsToken(tp, 'bob', OPAQUE_API, 'openid read');
      expectError(
        await delegate(tp, opaque, { resource: OPAQUE_API, requested_token_type: JWT }),
        400,
        'invalid_request',
        /opaque/,
      );
      // The refusal names the resource it was asked for.
      expect(events.filter((event) => event.name === EVENTS.delegationRefused).at(-1)).to.include({
        resource: OPAQUE_API,
        reason: 'requested_token_type jwt: this resource server is issued opaque access tokens',
      });
    });
  });

  describe('who may act', () => {
    it('refuses a client without delegation metadata as before: its subject token is unknown', async () => {
      expectError(await delegate(tp, await bobsToken(tp), {}, CLIENTS.web), 400, 'invalid_request', /unknown/);
    });

    it('refuses a subject token issued for a resource the client does not run', async () => {
      const elsewhere = await bobsToken(tp, 'bob', ACTOR_API, 'openid profile:read');
      expectError(await delegate(tp, elsewhere), 400, 'invalid_request', /neither to this client/);
    });

    it('lets only the actor that may_act names act', async () => {
      // carol's tokens name alice (through the support console) as the one who may act for her.
      const carols = await bobsToken(tp, 'carol');
      expectError(await delegate(tp, carols), 400, 'invalid_request', /may_act/);
      const alice = await userAccessToken(tp, 'alice');
      const body = ok(await delegate(tp, carols, { actor_token: alice, actor_token_type: ACCESS_TOKEN }));
      expect(decodeJwt(body['access_token'] as string)['act']).to.deep.equal({
        sub: 'alice',
        client_id: CLIENTS.orders.client_id,
      });
    });

    it('refuses an actor token that is not valid', async () => {
      expectError(
        await delegate(tp, await bobsToken(tp), { actor_token: 'not-a-token', actor_token_type: ACCESS_TOKEN }),
        400,
        'invalid_request',
        /actor_token is invalid/,
      );
    });

    it('refuses as actor_token any token an exchange issued, live or stopped: the actor presents a token of its own', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const asActor = (actorToken: string, resource = DOWNSTREAM_API) =>
        bobsToken(tp, 'alice').then((subject) =>
          delegate(tp, subject, { resource, actor_token: actorToken, actor_token_type: ACCESS_TOKEN }),
        );
      const refused = /actor_token was issued by a token exchange/;
      // An impersonation of bob (issued to the console, whose tokens count as actor tokens here), JWT and opaque.
      const impersonation = await impersonate(tp, { actorToken: alice, scope: 'profile:read' });
      expectError(await asActor(impersonation.token), 400, 'invalid_request', refused);
      const opaque = await impersonate(tp, { actorToken: alice, resource: OPAQUE_API, scope: 'read' });
      expectError(await asActor(opaque.token), 400, 'invalid_request', refused);
      // A delegation of it, issued to the orders service itself: bob would become the actor.
      const delegated = ok(await delegate(tp, impersonation.token))['access_token'] as string;
      expectError(await asActor(delegated), 400, 'invalid_request', refused);
      // Its impersonation stopped: refused as subject_token, and as actor_token too (its JWT still verifies).
      expect((await revokeSession(tp, admin, impersonation.session)).status).to.equal(204);
      expectError(await delegate(tp, delegated), 400, 'invalid_request', /stopped/);
      expectError(await asActor(delegated), 400, 'invalid_request', refused);
      // A plain delegation of bob's own token, which names no impersonation, is no actor either.
      const plain = ok(await delegate(tp, await bobsToken(tp)))['access_token'] as string;
      expectError(await asActor(plain), 400, 'invalid_request', refused);
      // alice's own token still is.
      expect(ok(await asActor(alice))['access_token']).to.be.a('string');
    });

    it('asks canDelegate, which may refuse or narrow, never widen', async () => {
      const subject = await bobsToken(tp, 'admin');
      expectError(await delegate(tp, subject), 400, 'invalid_request', /admins are not delegated/);
      const narrowed = await bobsToken(tp, 'bob');
      expect(ok(await delegate(tp, narrowed, { resource: API }))['scope']).to.equal('profile:read');
    });
  });

  describe('narrower, never wider', () => {
    it('refuses a scope the subject token does not carry, or the resource does not define', async () => {
      const subject = await bobsToken(tp, 'bob', API, 'openid profile:read');
      expectError(await delegate(tp, subject, { scope: 'orders:read' }), 400, 'invalid_scope', /wider/);
      expectError(await delegate(tp, subject, { scope: 'profile:write' }), 400, 'invalid_scope', /not defined/);
      expectError(await delegate(tp, subject, { scope: 'offline_access' }), 400, 'invalid_scope');
    });

    it('maps an audience to its resource, and refuses an unknown audience or two targets', async () => {
      const subject = await bobsToken(tp);
      const body = ok(await delegate(tp, subject, { resource: undefined, audience: 'downstream' }));
      expect(decodeJwt(body['access_token'] as string)['aud']).to.equal(DOWNSTREAM_API);
      expectError(await delegate(tp, subject, { resource: undefined, audience: 'payroll' }), 400, 'invalid_target');
      expectError(await delegate(tp, subject, { resource: [DOWNSTREAM_API, API] }), 400, 'invalid_target');
      expectError(await delegate(tp, subject, { audience: 'api' }), 400, 'invalid_target');
    });

    it('refuses an expired subject token, and keeps a delegated token within what the subject had left', async () => {
      const short = await bobsToken(tp, 'bob', SHORT_API, 'openid');
      // DOWNSTREAM_API's tokens live 600 s: this one, no longer than the 3 s its subject token had.
      const body = ok(await delegate(tp, short));
      expect(body['expires_in']).to.be.at.most(3);
      await new Promise((resolve) => setTimeout(resolve, 3500));
      expectError(await delegate(tp, short, { resource: SHORT_API }), 400, 'invalid_request', /invalid, expired/);
    });

    it('refuses a revoked subject token', async () => {
      const subject = await bobsToken(tp, 'bob', OPAQUE_API, 'openid read');
      const revoked = await fetch(`${tp.base}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: subject, client_id: CLIENTS.console.client_id }),
      });
      expect(revoked.status).to.equal(200);
      expectError(await delegate(tp, subject, { resource: OPAQUE_API }), 400, 'invalid_request', /revoked/);
    });
  });

  describe('the chain', () => {
    it('nests the act of the subject token, refuses a chain over the limit, and never drops an actor', async () => {
      const first = ok(await delegate(tp, await bobsToken(tp), { resource: API }))['access_token'] as string;
      const second = ok(await delegate(tp, first, { resource: API }))['access_token'] as string;
      const act = decodeJwt(second)['act'];
      expect(act).to.deep.equal({ ...(decodeJwt(first)['act'] as object), act: decodeJwt(first)['act'] });
      // maxChainDepth is 2 here: a third actor is refused rather than any dropped.
      expectError(await delegate(tp, second, { resource: API }), 400, 'invalid_request', /at most 2/);
      // A deployment's extraTokenClaims cannot replace the chain (it tries to on every token here).
      expect(JSON.stringify(act)).not.to.include('forged');
    });

    it('keeps an impersonation an impersonation: the engineer stays in act, and stopping it stops the delegation', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = await impersonate(tp, { actorToken: alice, scope: 'profile:read' });
      const delegated = ok(await delegate(tp, impersonation.token))['access_token'] as string;
      const claims = decodeJwt(delegated);
      expect(claims['sub']).to.equal('bob');
      expect(claims['act']).to.deep.equal({
        sub: CLIENTS.orders.client_id,
        client_id: CLIENTS.orders.client_id,
        act: { sub: 'alice' },
      });
      const delegation = claims['impersonation_session'] as string;
      const session = await apiRequest(tp, 'GET', `${SESSIONS}/${delegation}`, admin);
      expect(session.body['parentSessionId']).to.equal(impersonation.session);

      expect((await revokeSession(tp, admin, impersonation.session)).status).to.equal(204);
      const stopped = await apiRequest(tp, 'GET', `${SESSIONS}/${delegation}`, admin);
      expect(stopped.body).to.include({ state: 'ended', endReason: 'parent_session_stopped' });
      const feed = await apiRequest(tp, 'GET', `${SESSIONS}/revocations`, admin);
      expect(JSON.stringify(feed.body)).to.include(delegation);
      // The impersonation token is a valid JWT still; its stopped session delegates nothing more.
      expectError(await delegate(tp, impersonation.token), 400, 'invalid_request', /stopped/);
    });
  });

  describe('sender-constrained subject tokens', () => {
    it('needs no proof from an API exchanging the DPoP-bound token it received, and the proof from the client it was issued to', async () => {
      const callerKey = await DpopKey.generate();
      const bound = await userAccessToken(tp, 'bob', {
        resource: API,
        scope: 'openid profile:read',
        headers: { dpop: await callerKey.proof(`${tp.base}/token`) },
      });
      expect(decodeJwt(bound)['cnf']).to.have.property('jkt');
      // The orders API cannot prove its caller's key; it binds what it gets to its own.
      const ownKey = await DpopKey.generate();
      const own = ok(
        await exchange(tp, { subject_token: bound, resource: API }, CLIENTS.orders, {
          dpop: await ownKey.proof(`${tp.base}/token`),
        }),
      )['access_token'] as string;
      expect((decodeJwt(own)['cnf'] as { jkt: string }).jkt).to.equal(ownKey.thumbprint);
      // That token was issued to the orders service: exchanging it again takes the proof of its key.
      expectError(await delegate(tp, own), 400, 'invalid_request', /DPoP-bound/);
      const other = await DpopKey.generate();
      expectError(
        await exchange(tp, { subject_token: own, resource: DOWNSTREAM_API }, CLIENTS.orders, {
          dpop: await other.proof(`${tp.base}/token`),
        }),
        400,
        'invalid_request',
        /DPoP-bound/,
      );
      const proved = await exchange(tp, { subject_token: own, resource: DOWNSTREAM_API }, CLIENTS.orders, {
        dpop: await ownKey.proof(`${tp.base}/token`),
      });
      expect(proved.status, JSON.stringify(proved.body)).to.equal(200);
    });
  });

  describe('custom subject token types', () => {
    it('hands a type of the deployment’s own to its resolver, then makes the same checks', async () => {
      const body = ok(await delegate(tp, 'partner:bob', { subject_token_type: PARTNER }));
      expect(decodeJwt(body['access_token'] as string)).to.include({ sub: 'bob' });
      expectError(await delegate(tp, 'partner:nobody', { subject_token_type: PARTNER }), 400, 'invalid_request');
      expectError(
        await delegate(tp, 'partner:bob', { subject_token_type: PARTNER, scope: 'orders:read' }),
        400,
        'invalid_scope',
      );
      expectError(
        await delegate(tp, 'partner:bob', { subject_token_type: 'urn:example:unknown' }),
        400,
        'invalid_request',
        /unknown|unsupported/,
      );
    });
  });

  describe('governance', () => {
    it('records refusals of a verified subject token, naming it by its public id only', async () => {
      const subject = await bobsToken(tp, 'bob', API, 'openid profile:read');
      expectError(await delegate(tp, subject, { scope: 'orders:read' }), 400, 'invalid_scope');
      const refusal = events.filter((event) => event.name === EVENTS.delegationRefused).at(-1);
      expect(refusal).to.include({ clientId: CLIENTS.orders.client_id, subject: 'bob', error: 'invalid_scope' });
      expect(refusal!.subjectTokenId).to.equal(decodeJwt(subject)['jti']);
      expect(JSON.stringify(events)).not.to.include(subject);
    });
  });
});

describe('delegation: a may_act that is not a JSON object', function () {
  this.timeout(60_000);
  let tp: TestProvider;

  before(async () => {
    // Each user's tokens carry a may_act of another shape; alice's carry none.
    const mayActs: Record<string, unknown> = { bob: ['alice'], carol: CLIENTS.orders.client_id, admin: null };
    const partner = (mayAct: unknown) => ({
      id: 'partner-2',
      sub: 'bob',
      scope: ['profile:read'],
      exp: Math.floor(Date.now() / 1000) + 60,
      clientId: CLIENTS.orders.client_id,
      mayAct: mayAct as Record<string, unknown>,
    });
    tp = await startProvider({
      plugin: {
        delegation: {
          subjectTokenTypes: {
            // A resolver passes its token's may_act through, as the documented example does.
            [PARTNER]: ({ token }) => (token === 'partner:none' ? partner(undefined) : partner(JSON.parse(token))),
          },
        },
      },
      configuration: {
        extraTokenClaims: (_ctx: KoaContextWithOIDC, token: unknown) => {
          const accountId = (token as AccessToken).accountId ?? '';
          return accountId in mayActs ? { may_act: mayActs[accountId] } : undefined;
        },
      },
    });
  });
  after(() => tp.close());

  it('refuses it as invalid_request, from a JWT, an opaque token or a resolver, rather than take it for absent', async () => {
    const malformed = /may_act claim that is not a JSON object/;
    for (const user of ['bob', 'carol', 'admin']) {
      expectError(await delegate(tp, await bobsToken(tp, user)), 400, 'invalid_request', malformed);
      const opaque = await bobsToken(tp, user, OPAQUE_API, 'openid read');
      expectError(await delegate(tp, opaque, { resource: OPAQUE_API }), 400, 'invalid_request', malformed);
    }
    for (const mayAct of ['["alice"]', '"orders-service"', 'null', '3']) {
      expectError(await delegate(tp, mayAct, { subject_token_type: PARTNER }), 400, 'invalid_request', malformed);
    }
    // Without may_act, the same tokens delegate.
    ok(await delegate(tp, await bobsToken(tp, 'alice')));
    ok(await delegate(tp, await bobsToken(tp, 'alice', OPAQUE_API, 'openid read'), { resource: OPAQUE_API }));
    ok(await delegate(tp, 'partner:none', { subject_token_type: PARTNER }));
  });
});

describe("delegation from an impersonation under the customer's access grant", function () {
  this.timeout(60_000);
  let ap: ApprovalProvider;
  let alice: string;
  const asked: DelegationPolicyInput[] = [];

  before(async () => {
    ap = await startApprovalProvider({
      plugin: {
        delegation: {
          canDelegate: (input) => {
            asked.push(input);
            return true;
          },
        },
      },
    });
    alice = await userAccessToken(ap.tp, 'alice');
  });
  beforeEach(() => {
    ap.policy.answer = 'grant';
  });
  after(() => ap.tp.close());

  /** alice impersonates `customer` at API, under the grant the policy finds. */
  async function impersonation(customer: string): Promise<{ token: string; session: string }> {
    const created = await askForSubjectToken(ap.tp, {
      userId: customer,
      actorId: 'alice',
      clientId: CLIENTS.console.client_id,
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const exchanged = await exchangeAsActor(ap.tp, {
      subjectToken: created.body['subjectToken'] as string,
      actorToken: alice,
      scope: 'profile:read',
    });
    const token = ok(exchanged)['access_token'] as string;
    return { token, session: decodeJwt(token)['impersonation_session'] as string };
  }

  it("keeps every delegation within the grant's resource, at any depth, and tells canDelegate the grant", async () => {
    const customer = newCustomer();
    const grant = await giveGrant(ap.deps, customer, { duration: 600, resource: API, scope: ['profile:read'] });
    const { token, session } = await impersonation(customer);
    // DOWNSTREAM_API defines profile:read too: only the customer's grant stands in the way.
    const outside = /access grant this impersonation was started under does not cover this resource/;
    expectError(await delegate(ap.tp, token), 400, 'invalid_target', outside);

    const first = ok(await delegate(ap.tp, token, { resource: API }))['access_token'] as string;
    expect(asked.at(-1)).to.include({ accessGrantId: grant.id, parentSessionId: session, resource: API });
    // A delegation of that delegation is under the same grant.
    expectError(await delegate(ap.tp, first), 400, 'invalid_target', outside);
    ok(await delegate(ap.tp, first, { resource: API }));
    expect(asked.at(-1)).to.include({ accessGrantId: grant.id, resource: API });
  });

  it('lets a delegation from an impersonation that no grant governs go elsewhere, and says no grant', async () => {
    ap.policy.answer = 'none';
    const { token } = await impersonation(newCustomer());
    ok(await delegate(ap.tp, token));
    expect(asked.at(-1)).to.include({ resource: DOWNSTREAM_API }).and.not.have.property('accessGrantId');
  });

  it('refuses a delegation under a grant that ended while its sessions are still being stopped', async () => {
    const customer = newCustomer();
    const grant = await giveGrant(ap.deps, customer, { duration: 600, resource: API });
    const { token } = await impersonation(customer);
    // The grant's end is written before its sessions are stopped: in between, the impersonation is active still.
    const record = (await ap.deps.approvals.findGrant(grant.id))!;
    await ap.deps.approvals.endGrant(record, { at: Math.floor(Date.now() / 1000), by: 'customer' });
    expectError(await delegate(ap.tp, token, { resource: API }), 400, 'invalid_grant', /no longer in force/);
  });

  it('holds the scopes to those of the grant (which its impersonation already kept to)', () => {
    expect(() => checkCeiling({ resource: API, scope: ['profile:read'] }, { resource: API, scope: ['profile:write'] }))
      .to.throw()
      .that.includes({ error: 'invalid_scope' });
    expect(() => checkCeiling({ scope: ['read'] }, { resource: OPAQUE_API, scope: ['read'] })).not.to.throw();
  });
});

/** The provider of these tests: delegation set, may_act on carol's tokens, a partner token type. */
function delegationProvider(): TestProviderOptions {
  return {
    plugin: {
      actorClients: [CLIENTS.console.client_id],
      delegation: {
        maxChainDepth: 2,
        resolveAudience: (audience) =>
          audience === 'downstream' ? DOWNSTREAM_API : audience === 'api' ? API : undefined,
        canDelegate: ({ subject, resource, scope }) => {
          if (subject === 'admin') return { reason: 'admins are not delegated' };
          if (resource === API && scope.includes('profile:write')) return { scope: ['profile:read'] };
          return true;
        },
        subjectTokenTypes: {
          [PARTNER]: ({ token, clientId }) =>
            token === 'partner:bob'
              ? {
                  id: 'partner-1',
                  sub: 'bob',
                  scope: ['profile:read'],
                  exp: Math.floor(Date.now() / 1000) + 60,
                  clientId,
                }
              : undefined,
        },
      },
    },
    configuration: {
      extraTokenClaims: (_ctx: KoaContextWithOIDC, token: unknown) => {
        const accountId = (token as AccessToken).accountId;
        return accountId === 'carol'
          ? { may_act: { sub: 'alice', client_id: CLIENTS.orders.client_id }, act: { sub: 'forged' } }
          : { act: { sub: 'forged' } };
      },
    },
  };
}
