/**
 * The issuing side of the Identity Assertion JWT Authorization Grant
 * (draft-ietf-oauth-identity-assertion-authz-grant): this provider's ID token
 * exchanged for an ID-JAG at the token-exchange grant, over HTTP at a real
 * provider on TEST_ADAPTER's store; one test per rule and per refusal, the
 * session listed and stopped, and the ID-JAG redeemed at a second provider.
 */
import { expect } from 'chai';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { createLocalJWKSet, importJWK, jwtVerify, SignJWT, type JSONWebKeySet } from 'jose';
import type { ClientMetadata } from 'oidc-provider';
import {
  createImpersonation,
  createMemoryAuditLog,
  EVENTS,
  onImpersonationEvent,
  type IdJagIssueInput,
  type ImpersonationEvent,
} from '../../lib/index.js';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import { JWT_TOKEN_TYPE } from '../../lib/exchange/request.js';
import {
  ID_JAG_JWT_TYPE,
  ID_JAG_TOKEN_TYPE,
  ID_TOKEN_TYPE,
  withIdJagMetadata,
} from '../../lib/exchange/id-jag-issuance.js';
import { FIXTURE_JWKS } from '../../fixtures/keys.js';
import {
  API,
  CLIENTS,
  FIXTURE_CLIENTS,
  startProvider,
  TOKEN_EXCHANGE,
  type TestProvider,
} from '../support/provider.js';
import {
  ACCESS_TOKEN,
  apiRequest,
  basic,
  decodeHeader,
  decodeJwt,
  expectError,
  tokenRequest,
  userAccessToken,
  userSignIn,
  type ClientCredentials,
  type Reply,
} from '../support/http.js';
import { DpopKey } from '../support/dpop.js';
import { startDecisionPoint, type DecisionPoint } from '../support/decision-point.js';
import { scaled } from '../support/time.js';
import { adminToken, revokeSession, SESSIONS, trailEvents } from '../support/impersonations.js';
import { AGENT, agentAtIdp, CHAT, exchangeForIdJag, OTHER_AGENT, startChat } from '../support/id-jag.js';

const CALENDAR = 'https://calendar.example.com';

const AGENT_AT_IDP: ClientMetadata = {
  ...agentAtIdp(AGENT, `${CHAT} ${CALENDAR}`),
  // The agent delegates too: a token it is issued so carries act, and is no identity of its own.
  token_exchange_delegation: API,
};

const OTHER_AGENT_AT_IDP: ClientMetadata = { ...AGENT_AT_IDP, ...OTHER_AGENT };

const now = () => Math.floor(Date.now() / 1000);

describe('ID-JAG issuance (token exchange of an ID token): the draft, over HTTP', function () {
  this.timeout(60_000);
  let idp: TestProvider;
  let chat: TestProvider;
  let jwks: JSONWebKeySet;
  let idToken: string;
  const issued: Array<ImpersonationEvent<typeof EVENTS.idJagIssued>> = [];
  const asked: IdJagIssueInput[] = [];

  before(async () => {
    idp = await startProvider({
      plugin: {
        auditLog: createMemoryAuditLog(),
        idJagIssuance: {
          canIssue(input) {
            asked.push(input);
            if (input.subject === 'carol') return { reason: 'carol works elsewhere' };
            if (input.scope.includes('chat.admin'))
              return { scope: input.scope.filter((name) => name !== 'chat.admin') };
            return true;
          },
        },
      },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    onImpersonationEvent(idp.provider, EVENTS.idJagIssued, (event) => issued.push(event));
    jwks = (await (await fetch(`${idp.base}/jwks`)).json()) as JSONWebKeySet;
    // The first provider's users are this one's: its `sub` is the local account.
    chat = await startChat(idp, jwks);
    idToken = (await userSignIn(idp, 'alice', { client: AGENT, scope: 'openid' })).idToken!;
  });
  after(async () => {
    await idp.close();
    await chat.close();
  });

  function requestIdJag(
    params: Record<string, string | string[] | undefined> = {},
    client: { client_id: string; client_secret?: string } = AGENT,
    on: TestProvider = idp,
  ): Promise<Reply> {
    return exchangeForIdJag(on, client, { subject_token: idToken, audience: CHAT, ...params });
  }

  /** An ID token signed with the provider's own key, as the test says: expired, of another issuer, another user. */
  async function forgedIdToken(claims: Record<string, unknown>, typ?: string): Promise<string> {
    const key = await importJWK(FIXTURE_JWKS.keys[0]!, 'RS256');
    return new SignJWT({ iss: idp.issuer, sub: 'alice', aud: AGENT.client_id, iat: now(), exp: now() + 600, ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: FIXTURE_JWKS.keys[0]!.kid!, ...(typ ? { typ } : {}) })
      .sign(key);
  }

  /** A refusal with its code, that issues nothing and names no token in its answer. */
  async function expectRefused(reply: Reply, status: number, error: string, description: RegExp, before: number) {
    expectError(reply, status, error, description);
    expect(JSON.stringify(reply.body)).not.to.include(idToken);
    expect(issued.length, 'no ID-JAG issued').to.equal(before);
  }

  async function refused(
    params: Record<string, string | string[] | undefined>,
    error: string,
    description: RegExp,
    client: { client_id: string; client_secret?: string } = AGENT,
  ): Promise<void> {
    const before = issued.length;
    await expectRefused(await requestIdJag(params, client), 400, error, description, before);
  }

  describe('what is issued', () => {
    it('an ID-JAG: typ oauth-id-jag+jwt, signed with the provider key (RS256), its claims; N_A, no refresh token', async () => {
      const reply = await requestIdJag({ resource: 'https://chat.example.com/api', scope: 'chat.read chat.history' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.headers.get('cache-control')).to.equal('no-store');
      expect(Object.keys(reply.body).sort()).to.deep.equal([
        'access_token',
        'expires_in',
        'issued_token_type',
        'scope',
        'token_type',
      ]);
      expect(reply.body).to.include({
        issued_token_type: ID_JAG_TOKEN_TYPE,
        token_type: 'N_A',
        scope: 'chat.read chat.history',
        expires_in: 300,
      });
      const value = reply.body['access_token'] as string;
      expect(decodeHeader(value)).to.include({ typ: ID_JAG_JWT_TYPE, alg: 'RS256', kid: FIXTURE_JWKS.keys[0]!.kid });
      const { payload } = await jwtVerify(value, createLocalJWKSet(jwks), {
        issuer: idp.issuer,
        audience: CHAT,
        typ: ID_JAG_JWT_TYPE,
      });
      expect(Object.keys(payload).sort()).to.deep.equal(
        ['aud', 'client_id', 'exp', 'iat', 'impersonation_session', 'iss', 'jti', 'resource', 'scope', 'sub'].sort(),
      );
      expect(payload['impersonation_session']).to.equal(issued.at(-1)!.sessionId);
      expect(payload).to.include({
        sub: 'alice',
        aud: CHAT,
        client_id: AGENT.client_id,
        resource: 'https://chat.example.com/api',
        scope: 'chat.read chat.history',
      });
      expect(payload.exp! - payload.iat!).to.equal(300);
      const event = issued.at(-1)!;
      expect(event).to.include({
        subject: 'alice',
        clientId: AGENT.client_id,
        resource: CHAT,
        scope: 'chat.read chat.history',
        accessTokenId: payload.jti,
        expiresAt: payload.exp,
      });
      expect(event.subjectTokenId).to.match(/^sha256\./);
      expect(JSON.stringify(event)).not.to.include(value).and.not.to.include(idToken);
      expect(asked.at(-1)).to.deep.equal({
        clientId: AGENT.client_id,
        subject: 'alice',
        audience: CHAT,
        resource: ['https://chat.example.com/api'],
        scope: ['chat.read', 'chat.history'],
      });
    });

    it('without resource and scope, neither claim; several resources, a list; the audience is another allowed one', async () => {
      const bare = await requestIdJag({ audience: CALENDAR });
      expect(bare.status, JSON.stringify(bare.body)).to.equal(200);
      const claims = decodeJwt(bare.body['access_token'] as string);
      expect(claims).not.to.have.property('resource');
      expect(claims).not.to.have.property('scope');
      expect(claims['aud']).to.equal(CALENDAR);
      const both = await requestIdJag({ resource: ['https://chat.example.com/a', 'https://chat.example.com/b'] });
      expect(decodeJwt(both.body['access_token'] as string)['resource']).to.deep.equal([
        'https://chat.example.com/a',
        'https://chat.example.com/b',
      ]);
    });

    it('carries the sign-in the ID token records: its auth_time, acr and amr', async () => {
      const signIn = { auth_time: now() - 60, acr: 'urn:example:mfa', amr: ['pwd', 'otp'] };
      const reply = await requestIdJag({ subject_token: await forgedIdToken(signIn) });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(decodeJwt(reply.body['access_token'] as string)).to.deep.include(signIn);
    });

    it('never outlives the ID token it attests', async () => {
      const reply = await requestIdJag({ subject_token: await forgedIdToken({ exp: now() + 30 }) });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['expires_in']).to.be.at.most(30).and.at.least(25);
    });

    it('the policy may narrow the scopes, never widen them', async () => {
      const reply = await requestIdJag({ scope: 'chat.read chat.admin' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['scope']).to.equal('chat.read');
      expect(decodeJwt(reply.body['access_token'] as string)['scope']).to.equal('chat.read');
    });

    it('discovery lists the ID-JAG among identity_chaining_requested_token_types_supported, only when issued', async () => {
      const metadata = async (tp: TestProvider) =>
        (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
      expect((await metadata(idp))['identity_chaining_requested_token_types_supported']).to.deep.equal([
        ID_JAG_TOKEN_TYPE,
      ]);
      expect(await metadata(chat)).not.to.have.property('identity_chaining_requested_token_types_supported');
    });
  });

  describe('refusals, each with its code', () => {
    it('a client without id_jag_audiences: unauthorized_client', async () => {
      const own = (await userSignIn(idp, 'alice', { client: CLIENTS.web, scope: 'openid' })).idToken!;
      await refused({ subject_token: own }, 'unauthorized_client', /may not request ID-JAGs/, CLIENTS.web);
    });

    it('an audience missing, repeated, or not the client’s', async () => {
      await refused({ audience: undefined }, 'invalid_request', /missing required parameter audience/);
      await refused({ audience: [CHAT, CALENDAR] }, 'invalid_target', /exactly one audience/);
      await refused(
        { audience: 'https://mail.example.com' },
        'invalid_target',
        /not request an ID-JAG for this audience/,
      );
    });

    it('a resource that is no absolute URI without a fragment: invalid_target', async () => {
      await refused({ resource: 'https://chat.example.com/api#x' }, 'invalid_target', /absolute URI/);
      await refused({ resource: 'chat' }, 'invalid_target', /absolute URI/);
      // As sent, or not at all: a value a URL parser would trim or clean is not signed into an ID-JAG.
      for (const resource of [
        ' https://chat.example.com/api',
        'https://chat.example.com/\tapi',
        'https://a.example/\n',
      ]) {
        await refused({ resource }, 'invalid_target', /absolute URI/);
      }
      const many = Array.from({ length: 11 }, (_, n) => `https://chat.example.com/${n}`);
      await refused({ resource: many }, 'invalid_target', /at most 10/);
      await refused({ scope: 'x'.repeat(2049) }, 'invalid_scope', /at most 2048 characters/);
    });

    it('another subject_token_type, or an actor_token that is an ID token: invalid_request', async () => {
      await refused({ subject_token_type: ACCESS_TOKEN }, 'invalid_request', /unsupported subject_token_type/);
      await refused(
        { actor_token: idToken, actor_token_type: ID_TOKEN_TYPE },
        'invalid_request',
        /unsupported actor_token_type/,
      );
    });

    it('an ID token of another client, of another issuer, expired, forged, or no ID token: invalid_request', async () => {
      const ofWeb = (await userSignIn(idp, 'bob', { client: CLIENTS.web, scope: 'openid' })).idToken!;
      await refused({ subject_token: ofWeb }, 'invalid_request', /not a valid ID token.*aud/);
      await refused(
        { subject_token: await forgedIdToken({ iss: 'https://idp.example.net' }) },
        'invalid_request',
        /not a valid ID token.*iss/,
      );
      await refused(
        { subject_token: await forgedIdToken({ exp: now() - 3600 }) },
        'invalid_request',
        /not a valid ID token.*exp/,
      );
      const [header, payload] = idToken.split('.');
      await refused(
        { subject_token: `${header}.${payload}.${'A'.repeat(342)}` },
        'invalid_request',
        /not a valid ID token/,
      );
      await refused({ subject_token: 'not-a-jwt' }, 'invalid_request', /not a valid ID token/);
      await refused(
        { subject_token: await forgedIdToken({}, 'at+jwt') },
        'invalid_request',
        /subject_token is not an ID token/,
      );
      const accessToken = await userAccessToken(idp, 'alice', { client: AGENT, resource: API, scope: 'openid' });
      await refused({ subject_token: accessToken }, 'invalid_request', /not a valid ID token/);
    });

    it('an ID token of a user who no longer exists', async () => {
      await refused(
        { subject_token: await forgedIdToken({ sub: 'mallory' }) },
        'invalid_request',
        /names a user that no longer exists/,
      );
    });

    it('the policy refuses: invalid_request with its reason', async () => {
      const carol = (await userSignIn(idp, 'carol', { client: AGENT, scope: 'openid' })).idToken!;
      await refused({ subject_token: carol }, 'invalid_request', /carol works elsewhere/);
    });

    it('a provider that issues no ID-JAG refuses the requested_token_type', async () => {
      const before = issued.length;
      const reply = await requestIdJag({ subject_token: 'x' }, CLIENTS.web, chat);
      await expectRefused(reply, 400, 'invalid_request', /unsupported (subject|requested)_token_type/, before);
    });
  });

  describe('an actor (RFC 8693 4.1): the agent presents its own access token', () => {
    /** The agent's own identity here: bob, signed in through the agent itself. */
    const agentToken = (client: ClientCredentials = AGENT) => userAccessToken(idp, 'bob', { client, scope: 'openid' });

    it('the ID-JAG carries act, the policy and the listed session name the actor, the redeemed token carries act', async () => {
      const actor = await agentToken();
      const reply = await requestIdJag({ actor_token: actor, actor_token_type: ACCESS_TOKEN, resource: API });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const assertion = reply.body['access_token'] as string;
      expect(decodeJwt(assertion)['act']).to.deep.equal({ sub: 'bob' });
      expect(asked.at(-1)).to.include({ subject: 'alice', actor: 'bob' });
      const { sessionId } = issued.at(-1)!;
      expect(issued.at(-1)).to.include({ subject: 'alice', actor: 'bob' });
      const admin = await adminToken(idp);
      const listed = await apiRequest(idp, 'GET', `${SESSIONS}/${sessionId!}`, admin);
      expect(listed.body).to.include({ type: 'id-jag', subject: 'alice', actor: 'bob' });
      const byActor = await apiRequest(idp, 'GET', `${SESSIONS}?actor=bob`, admin);
      expect((byActor.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.include(sessionId);
      expect(JSON.stringify([reply.body, listed.body, issued.at(-1)])).not.to.include(actor);
      const redeemed = await tokenRequest(chat, { grant_type: JWT_BEARER_GRANT, assertion }, AGENT);
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(decodeJwt(redeemed.body['access_token'] as string)).to.deep.include({ sub: 'alice', act: { sub: 'bob' } });
    });

    it("another client's token, one invalid, revoked, not the JWT its type says, or an exchange's: invalid_request", async () => {
      await refused(
        { actor_token: await agentToken(CLIENTS.web), actor_token_type: ACCESS_TOKEN },
        'invalid_request',
        /actor_token was issued to a client whose tokens are not accepted/,
      );
      const invalid = /actor_token is invalid, expired, revoked/;
      await refused({ actor_token: 'not-a-token', actor_token_type: ACCESS_TOKEN }, 'invalid_request', invalid);
      const revoked = await agentToken();
      const revocation = await fetch(`${idp.base}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(AGENT) },
        body: new URLSearchParams({ token: revoked }),
      });
      expect(revocation.status).to.equal(200);
      await refused({ actor_token: revoked, actor_token_type: ACCESS_TOKEN }, 'invalid_request', invalid);
      await refused({ actor_token: 'opaque', actor_token_type: JWT_TOKEN_TYPE }, 'invalid_request', /not a JWT/);
      const delegated = await tokenRequest(
        idp,
        {
          grant_type: TOKEN_EXCHANGE,
          subject_token: await userAccessToken(idp, 'bob', { client: AGENT, resource: API, scope: 'openid' }),
          subject_token_type: ACCESS_TOKEN,
          resource: API,
        },
        AGENT,
      );
      expect(decodeJwt(delegated.body['access_token'] as string)).to.have.property('act');
      await refused(
        { actor_token: delegated.body['access_token'] as string, actor_token_type: ACCESS_TOKEN },
        'invalid_request',
        /actor_token was issued by a token exchange/,
      );
    });

    it("the ID token's may_act narrows who may act; with no actor token no one acts, and the ID-JAG names none", async () => {
      const actor = { actor_token: await agentToken(), actor_token_type: ACCESS_TOKEN };
      const forCarol = await forgedIdToken({ may_act: { sub: 'carol' } });
      await refused(
        { subject_token: forCarol, ...actor },
        'invalid_request',
        /may_act claim does not allow this actor/,
      );
      const forBob = await requestIdJag({ subject_token: await forgedIdToken({ may_act: { sub: 'bob' } }), ...actor });
      expect(forBob.status, JSON.stringify(forBob.body)).to.equal(200);
      const alone = await requestIdJag({ subject_token: forCarol });
      expect(alone.status, JSON.stringify(alone.body)).to.equal(200);
      expect(decodeJwt(alone.body['access_token'] as string)).not.to.have.property('act');
      expect(asked.at(-1)).not.to.have.property('actor');
    });
  });

  describe('governed as a session', () => {
    it('listed and stopped through the Management API, its issue and its stop on the trail', async () => {
      const reply = await requestIdJag({ scope: 'chat.read' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const { sessionId } = issued.at(-1)!;
      const admin = await adminToken(idp);
      const listed = await apiRequest(idp, 'GET', `${SESSIONS}?subject=alice`, admin);
      const items = listed.body['items'] as Array<Record<string, unknown>>;
      expect(items.find((item) => item['id'] === sessionId)).to.include({
        type: 'id-jag',
        clientId: AGENT.client_id,
        resource: CHAT,
        scope: 'chat.read',
        state: 'active',
      });
      const stopped: Array<ImpersonationEvent<typeof EVENTS.sessionRevoked>> = [];
      onImpersonationEvent(idp.provider, EVENTS.sessionRevoked, (event) => stopped.push(event));
      expect((await revokeSession(idp, admin, sessionId!)).status).to.equal(204);
      expect((await apiRequest(idp, 'GET', `${SESSIONS}/${sessionId!}`, admin)).body).to.include({ state: 'revoked' });
      expect(stopped.map((event) => event.sessionId)).to.include(sessionId);
      const trail = (await trailEvents(idp, admin, '?subject=alice')).body['items'] as Array<Record<string, unknown>>;
      const named = trail.filter((row) => row['sessionId'] === sessionId).map((row) => row['event']);
      expect(named).to.have.members([EVENTS.idJagIssued, EVENTS.sessionRevoked]);
    });
  });

  describe('proof of possession', () => {
    it('a DPoP proof binds the ID-JAG (cnf.jkt), is spent, and the second provider redeems it only with that key', async () => {
      const key = await DpopKey.generate();
      const proof = await key.proof(`${idp.base}/token`);
      const ask = () =>
        exchangeForIdJag(
          idp,
          AGENT,
          { subject_token: idToken, audience: CHAT, resource: API, scope: 'profile:read' },
          { dpop: proof },
        );
      const reply = await ask();
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const assertion = reply.body['access_token'] as string;
      expect(decodeJwt(assertion)['cnf']).to.deep.equal({ jkt: key.thumbprint });
      expectError(await ask(), 400, 'invalid_dpop_proof');
      const redeem = async (dpop?: DpopKey) =>
        tokenRequest(
          chat,
          { grant_type: JWT_BEARER_GRANT, assertion },
          AGENT,
          dpop ? { dpop: await dpop.proof(`${chat.base}/token`) } : {},
        );
      expectError(await redeem(), 400, 'invalid_grant', /bound to a key/);
      const redeemed = await redeem(key);
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(redeemed.body['token_type']).to.equal('DPoP');
    });
  });

  describe('end to end: two providers', () => {
    it('ID token → ID-JAG at the first, ID-JAG → access token at the second, the session stopped at the first', async () => {
      const reply = await requestIdJag({ resource: API, scope: 'profile:read' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const redeemed = await tokenRequest(
        chat,
        { grant_type: JWT_BEARER_GRANT, assertion: reply.body['access_token'] as string },
        AGENT,
      );
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(redeemed.body).to.include({ token_type: 'Bearer', scope: 'profile:read' });
      expect(decodeJwt(redeemed.body['access_token'] as string)).to.include({
        sub: 'alice',
        client_id: AGENT.client_id,
        aud: API,
        iss: CHAT,
      });
      const admin = await adminToken(idp);
      const { sessionId } = issued.at(-1)!;
      expect((await revokeSession(idp, admin, sessionId!)).status).to.equal(204);
      expect((await apiRequest(idp, 'GET', `${SESSIONS}/${sessionId!}`, admin)).body).to.include({ state: 'revoked' });
    });
  });
});

describe('ID-JAG issuance asked of an AuthZEN decision point (authzen), after canIssue', function () {
  this.timeout(60_000);
  let pdp: DecisionPoint;
  let idp: TestProvider;
  let idToken: string;
  const issued: Array<ImpersonationEvent<typeof EVENTS.idJagIssued>> = [];

  /** `canIssue` as the first suite's: carol refused, `chat.admin` taken out. */
  const canIssue = (input: IdJagIssueInput) =>
    input.subject === 'carol'
      ? { reason: 'carol works elsewhere' }
      : { scope: input.scope.filter((name) => name !== 'chat.admin') };

  before(async () => {
    pdp = await startDecisionPoint();
    idp = await startProvider({
      plugin: {
        auditLog: createMemoryAuditLog(),
        idJagIssuance: { canIssue, maxPerUser: 2 },
        authzen: { url: pdp.url, timeout: scaled(1000) },
      },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    onImpersonationEvent(idp.provider, EVENTS.idJagIssued, (event) => issued.push(event));
    idToken = (await userSignIn(idp, 'alice', { client: AGENT, scope: 'openid' })).idToken!;
  });
  beforeEach(() => {
    pdp.answer = { allow: true };
    pdp.received.length = 0;
  });
  after(async () => {
    await idp?.close();
    await pdp?.close();
  });

  const idJagAt = (tp: TestProvider, token: string, params: Record<string, string> = {}) =>
    exchangeForIdJag(tp, AGENT, { subject_token: token, audience: CHAT, ...params });

  it('asks issue-id-jag of the scopes canIssue let through: the client, the user, the audience, resources; allowed, issued', async () => {
    const reply = await idJagAt(idp, idToken, {
      resource: 'https://chat.example.com/api',
      scope: 'chat.read chat.admin',
    });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(reply.body['scope']).to.equal('chat.read');
    expect(pdp.received).to.have.length(1);
    expect(pdp.received[0]!.path).to.equal('/pdp/access/v1/evaluation');
    expect(pdp.received[0]!.body).to.deep.equal({
      subject: { type: 'client', id: AGENT.client_id },
      action: { name: 'issue-id-jag' },
      resource: { type: 'user', id: 'alice' },
      context: {
        client: AGENT.client_id,
        audience: CHAT,
        resources: ['https://chat.example.com/api'],
        scopes: ['chat.read'],
      },
    });
    expect(pdp.received[0]!.raw).not.to.include(idToken);
  });

  it("names the request's actor in the context: who the agent's own access token names", async () => {
    const actor = await userAccessToken(idp, 'bob', { client: AGENT, scope: 'openid' });
    const reply = await idJagAt(idp, idToken, { actor_token: actor, actor_token_type: ACCESS_TOKEN });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(pdp.received).to.have.length(1);
    expect(pdp.received[0]!.body['context']).to.include({ client: AGENT.client_id, actor: 'bob', audience: CHAT });
    expect(pdp.received[0]!.raw).not.to.include(actor);
  });

  it('refused by canIssue: nothing asked; refused by the decision point: invalid_request with its words, nothing issued', async () => {
    const before = issued.length;
    const carol = (await userSignIn(idp, 'carol', { client: AGENT, scope: 'openid' })).idToken!;
    expectError(await idJagAt(idp, carol), 400, 'invalid_request', /^carol works elsewhere$/);
    expect(pdp.received).to.deep.equal([]);

    pdp.answer = { deny: 'alice may not bring agents to chat' };
    const refused = await idJagAt(idp, idToken, { scope: 'chat.read' });
    expectError(refused, 400, 'invalid_request', /^alice may not bring agents to chat$/);
    expect(JSON.stringify(refused.body)).not.to.include(idToken);
    pdp.answer = { deny: undefined };
    expectError(await idJagAt(idp, idToken), 400, 'invalid_request', /^the policy decision point refused this ID-JAG$/);
    expect(issued.length, 'no ID-JAG issued').to.equal(before);
  });

  it('a decision point that cannot answer: 503, nothing issued or charged; the same request works after', async () => {
    const before = issued.length;
    const bob = (await userSignIn(idp, 'bob', { client: AGENT, scope: 'openid' })).idToken!;
    for (const answer of [{ status: 500 }, { hang: true }, { body: '{"allowed":true}' }] as const) {
      pdp.answer = answer;
      const reply = await idJagAt(idp, bob, { scope: 'chat.read' });
      expectError(reply, 503, 'temporarily_unavailable', /nothing was issued, retry shortly/);
      expect(JSON.stringify(reply.body)).not.to.include(bob);
    }
    expect(issued.length, 'no ID-JAG issued').to.equal(before);
    // bob's share (maxPerUser: 2) was not charged by the refusals: both of his are still his.
    pdp.answer = { allow: true };
    expect((await idJagAt(idp, bob, { scope: 'chat.read' })).status).to.equal(200);
    expect((await idJagAt(idp, bob, { scope: 'chat.read' })).status).to.equal(200);
    expectError(await idJagAt(idp, bob, { scope: 'chat.read' }), 429, 'invalid_request', /as many ID-JAGs/);
  });

  it('without canIssue the decision point alone decides; without authzen it is never asked', async () => {
    pdp.answer = { deny: 'no agents today' };
    const only = await startProvider({
      plugin: { idJagIssuance: {}, authzen: { url: pdp.url, timeout: scaled(1000) } },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    const none = await startProvider({
      plugin: { idJagIssuance: { canIssue } },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP] },
    });
    try {
      const own = (await userSignIn(only, 'bob', { client: AGENT, scope: 'openid' })).idToken!;
      expectError(await idJagAt(only, own, { scope: 'chat.admin' }), 400, 'invalid_request', /^no agents today$/);
      expect(pdp.received.at(-1)!.body.context['scopes']).to.deep.equal(['chat.admin']);
      pdp.received.length = 0;

      const theirs = (await userSignIn(none, 'bob', { client: AGENT, scope: 'openid' })).idToken!;
      const reply = await idJagAt(none, theirs, { scope: 'chat.read chat.admin' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['scope']).to.equal('chat.read');
      expect(pdp.received).to.deep.equal([]);
    } finally {
      await only.close();
      await none.close();
    }
  });
});

describe('ID-JAG issuance: shares and options', function () {
  this.timeout(60_000);

  it('an hour of issues for one user is bounded: 429 with Retry-After, the share named', async () => {
    const tp = await startProvider({
      plugin: { idJagIssuance: { maxPerUser: 2 } },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_IDP, OTHER_AGENT_AT_IDP] },
    });
    try {
      const idToken = (await userSignIn(tp, 'bob', { client: AGENT, scope: 'openid' })).idToken!;
      const ask = () => exchangeForIdJag(tp, AGENT, { subject_token: idToken, audience: CHAT });
      expect((await ask()).status).to.equal(200);
      expect((await ask()).status).to.equal(200);
      const third = await ask();
      expectError(
        third,
        429,
        'invalid_request',
        /this user, at this client, has been issued as many ID-JAGs this hour as allowed \(2\)/,
      );
      expect(Number(third.headers.get('retry-after'))).to.be.within(1, 3600);
      // The share is the user's at this client: the user's other agents still get theirs.
      const other = (await userSignIn(tp, 'bob', { client: OTHER_AGENT, scope: 'openid' })).idToken!;
      const theirs = await exchangeForIdJag(tp, OTHER_AGENT, { subject_token: other, audience: CHAT });
      expect(theirs.status, JSON.stringify(theirs.body)).to.equal(200);
    } finally {
      await tp.close();
    }
  });

  it('its options are checked at start-up', () => {
    const create = (idJagIssuance: unknown) => () =>
      createImpersonation({ managementResource: 'https://id.example.com/api', idJagIssuance } as never);
    expect(create({})).not.to.throw();
    expect(create({ canIssue: 'yes' })).to.throw(/idJagIssuance\.canIssue" must be a function/);
    expect(create({ maxPerUser: 0 })).to.throw(/idJagIssuance\.maxPerUser" must be an integer from 1/);
    expect(create({ maxPerClient: 2.5 })).to.throw(/idJagIssuance\.maxPerClient/);
    expect(create({ lifetime: 60 })).to.throw(/idJagIssuance\.lifetime/);
    expect(create([])).to.throw(/idJagIssuance" must be an object/);
  });
});

describe('id_jag_audiences client metadata', () => {
  const { validator } = withIdJagMetadata({}, true);
  const refusal = (metadata: ClientMetadata): string | undefined => {
    try {
      validator!(
        { oidc: { route: 'token' } } as unknown as KoaContextWithOIDC,
        'id_jag_audiences',
        metadata['id_jag_audiences'],
        metadata,
      );
      return undefined;
    } catch (error) {
      expect((error as { error?: string }).error).to.equal('invalid_client_metadata');
      return (error as { error_description: string }).error_description;
    }
  };
  const confidential: ClientMetadata = {
    client_id: 'a',
    grant_types: [TOKEN_EXCHANGE],
    token_endpoint_auth_method: 'private_key_jwt',
  };

  it('takes issuer URLs, normalised; refuses any other value, a public client, a client without the grant', () => {
    const metadata: ClientMetadata = { ...confidential, id_jag_audiences: `${CHAT}  ${CHAT} ${CALENDAR}/` };
    expect(refusal(metadata)).to.equal(undefined);
    expect(metadata['id_jag_audiences']).to.equal(`${CHAT} ${CALENDAR}/`);
    expect(refusal({ ...confidential, id_jag_audiences: 'http://chat.example.com' })).to.match(/issuer URLs/);
    expect(refusal({ ...confidential, id_jag_audiences: '' })).to.match(/issuer URLs/);
    expect(refusal({ ...confidential, id_jag_audiences: [CHAT] })).to.match(/issuer URLs/);
    expect(refusal({ ...confidential, token_endpoint_auth_method: 'none', id_jag_audiences: CHAT })).to.match(
      /authenticates/,
    );
    expect(refusal({ ...confidential, grant_types: ['authorization_code'], id_jag_audiences: CHAT })).to.match(
      /grant type/,
    );
  });
});
