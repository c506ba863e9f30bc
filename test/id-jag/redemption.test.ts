/**
 * The redeeming side of the Identity Assertion JWT Authorization Grant
 * (draft-ietf-oauth-identity-assertion-authz-grant, RFC 7523 3): ID-JAGs
 * signed here by a test issuer's key, redeemed over HTTP at a real provider
 * on TEST_ADAPTER's store (memory, Redis, PostgreSQL); one test per rule and
 * per refusal, and single use across two providers sharing one store.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { ClientMetadata } from 'oidc-provider';
import {
  createImpersonation,
  EVENTS,
  onImpersonationEvent,
  type ExchangeDecision,
  type IdJagAssertion,
  type IdJagOptions,
  type IdJagRedeemInput,
  type ImpersonationEvent,
} from '../../lib/index.js';
import { ID_JAG_PROFILE, JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import {
  API,
  CLIENTS,
  FIXTURE_CLIENTS,
  MANAGEMENT,
  OPAQUE_API,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import { apiRequest, decodeJwt, expectError, introspect, tokenRequest, type Reply } from '../support/http.js';
import { adminToken, SESSIONS } from '../support/impersonations.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { DpopKey } from '../support/dpop.js';
import { startDecisionPoint, type DecisionPoint } from '../support/decision-point.js';
import { scaled } from '../support/time.js';
import { agentAtRedeemer } from '../support/id-jag.js';

const IDP = 'https://idp.example.com';
const AGENT = { client_id: 'orders-agent', client_secret: 'orders-agent-secret' };
const OTHER_AGENT = { client_id: 'other-agent', client_secret: 'other-agent-secret' };
const PUBLIC_AGENT = { client_id: 'public-agent' };
const DPOP_AGENT = { client_id: 'dpop-agent', client_secret: 'dpop-agent-secret' };

const AGENT_CLIENTS: ClientMetadata[] = [
  agentAtRedeemer(AGENT),
  agentAtRedeemer(OTHER_AGENT),
  { ...agentAtRedeemer(DPOP_AGENT), dpop_bound_access_tokens: true },
  {
    ...PUBLIC_AGENT,
    token_endpoint_auth_method: 'none',
    grant_types: [JWT_BEARER_GRANT],
    response_types: [],
    redirect_uris: [],
  },
];

interface IssuerKey {
  privateKey: CryptoKey;
  jwks: JSONWebKeySet;
}

async function issuerKey(kid: string): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  return { privateKey, jwks: { keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] } };
}

const now = () => Math.floor(Date.now() / 1000);

/** The deployment's choice for a single issuer in these tests: its subjects are the accounts of the same name. */
const asIs = ({ sub }: IdJagAssertion) => sub;

describe('ID-JAG redemption (jwt-bearer grant): RFC 7523 3 and the draft, over HTTP', function () {
  this.timeout(60_000);
  let idp: IssuerKey;
  let stranger: IssuerKey;
  let tp: TestProvider;
  const redeemed: Array<ImpersonationEvent<typeof EVENTS.idJagRedeemed>> = [];
  /** What oidc-provider tells a deployment's `grant.error` listeners of each refusal. */
  const errors: string[] = [];

  before(async () => {
    idp = await issuerKey('idp-1');
    stranger = await issuerKey('idp-1');
    tp = await redeemer({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] });
    onImpersonationEvent(tp.provider, EVENTS.idJagRedeemed, (event) => redeemed.push(event));
    tp.provider.on('grant.error', (_ctx, error: Error & { error_description?: string }) =>
      errors.push(`${error.message} ${error.error_description ?? ''} ${error.stack ?? ''}`),
    );
  });
  after(() => tp.close());

  function redeemer(idJag: IdJagOptions, adapter?: TestProvider['adapter'], issuer?: string): Promise<TestProvider> {
    return startProvider({
      plugin: { idJag },
      configuration: { clients: [...FIXTURE_CLIENTS, ...AGENT_CLIENTS] },
      ...(adapter ? { adapter } : {}),
      ...(issuer ? { issuer } : {}),
    });
  }

  /** An ID-JAG for `tp`, signed by the trusted issuer unless told otherwise; `undefined` leaves a claim out. */
  function idJag(
    claims: Record<string, unknown> = {},
    { key = idp, header = {} }: { key?: IssuerKey; header?: Record<string, unknown> } = {},
    audience = tp.issuer,
  ): Promise<string> {
    const payload = Object.fromEntries(
      Object.entries({
        iss: IDP,
        sub: 'alice',
        aud: audience,
        client_id: AGENT.client_id,
        jti: randomUUID(),
        iat: now(),
        exp: now() + 120,
        resource: API,
        scope: 'profile:read profile:write',
        ...claims,
      }).filter(([, value]) => value !== undefined),
    ) as JWTPayload;
    return new SignJWT(payload)
      .setProtectedHeader({ alg: 'ES256', typ: 'oauth-id-jag+jwt', kid: 'idp-1', ...header })
      .sign(key.privateKey);
  }

  function redeem(
    assertion: string | undefined,
    params: Record<string, string> = {},
    client: { client_id: string; client_secret?: string } = AGENT,
    on: TestProvider = tp,
  ): Promise<Reply> {
    return tokenRequest(on, { grant_type: JWT_BEARER_GRANT, assertion, ...params }, client);
  }

  /** A refusal with its code, whose answer and reported error never quote the assertion, and that issues nothing. */
  async function expectRefused(
    assertion: string,
    status: number,
    error: string,
    description: RegExp,
    params: Record<string, string> = {},
    client: { client_id: string; client_secret?: string } = AGENT,
  ): Promise<void> {
    const [issued, reported] = [redeemed.length, errors.length];
    const reply = await redeem(assertion, params, client);
    expectError(reply, status, error, description);
    expect(JSON.stringify(reply.body)).not.to.include(assertion);
    expect(errors.length, 'the refusal reached grant.error').to.equal(reported + 1);
    expect(errors.at(-1)).not.to.include(assertion);
    expect(redeemed.length, 'no redemption event').to.equal(issued);
  }

  describe('what is issued', () => {
    it('an access token for the assertion: its sub, the authenticated client, its resource and scope; no refresh token', async () => {
      const assertion = await idJag();
      const reply = await redeem(assertion);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.headers.get('cache-control')).to.equal('no-store');
      expect(Object.keys(reply.body).sort()).to.deep.equal(['access_token', 'expires_in', 'scope', 'token_type']);
      expect(reply.body).to.include({ token_type: 'Bearer', scope: 'profile:read profile:write' });
      const token = decodeJwt(reply.body['access_token'] as string);
      expect(token).to.include({ sub: 'alice', client_id: AGENT.client_id, aud: API, iss: tp.issuer });
      const event = redeemed.at(-1)!;
      expect(event).to.deep.include({
        name: EVENTS.idJagRedeemed,
        subject: 'alice',
        clientId: AGENT.client_id,
        resource: API,
        scope: 'profile:read profile:write',
        accessTokenId: token['jti'],
        context: { issuer: IDP, assertionId: decodeJwt(assertion)['jti'] },
      });
      expect(Object.keys(event).sort()).to.deep.equal(
        ['accessTokenId', 'clientId', 'context', 'expiresAt', 'name', 'resource', 'scope', 'sessionId', 'subject'],
        'the fields test/audit/events.test.ts lists for it',
      );
      expect(token['impersonation_session']).to.equal(event.sessionId);
      expect(JSON.stringify(event)).not.to.include(assertion);
    });

    it("an assertion's act (RFC 8693 4.1) rides onto the access token, JWT or opaque; the session names its actor", async () => {
      const act = { sub: 'orders-bot', act: { sub: 'scheduler' } };
      const reply = await redeem(await idJag({ act }));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(decodeJwt(reply.body['access_token'] as string)['act']).to.deep.equal(act);
      const session = await apiRequest(tp, 'GET', `${SESSIONS}/${redeemed.at(-1)!.sessionId}`, await adminToken(tp));
      expect(session.body).to.include({ type: 'id-jag-redemption', subject: 'alice', actor: 'orders-bot' });
      const opaque = await redeem(await idJag({ act, resource: OPAQUE_API, scope: 'read' }));
      expect((await introspect(tp, opaque.body['access_token'] as string))['act']).to.deep.equal(act);
      // Without act, no actor: the token carries none.
      expect(decodeJwt((await redeem(await idJag())).body['access_token'] as string)).not.to.have.property('act');
    });

    it("never outlives the assertion: expires_in and exp end by the assertion's exp", async () => {
      const exp = now() + 20;
      const reply = await redeem(await idJag({ exp }));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['expires_in']).to.be.within(1, 20);
      expect(decodeJwt(reply.body['access_token'] as string)['exp']).to.be.at.most(exp);
    });

    it('an opaque token for an opaque resource, which introspects active with its sub and client', async () => {
      const reply = await redeem(await idJag({ resource: OPAQUE_API, scope: 'read' }));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      const seen = await introspect(tp, reply.body['access_token'] as string);
      expect(seen).to.include({
        active: true,
        sub: 'alice',
        client_id: AGENT.client_id,
        aud: OPAQUE_API,
        scope: 'read',
      });
    });

    it('scope: RFC 6749 3.3 within the assertion; a narrower request is granted as asked', async () => {
      const reply = await redeem(await idJag(), { scope: 'profile:read' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['scope']).to.equal('profile:read');
    });

    it('scope: without a request, only the assertion scopes the resource defines', async () => {
      const reply = await redeem(await idJag({ scope: 'profile:read calendar:write' }));
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['scope']).to.equal('profile:read');
    });

    it('resource: a resource parameter chooses among the resources the assertion lists', async () => {
      const assertion = await idJag({ resource: [API, OPAQUE_API], scope: 'read' });
      const reply = await redeem(assertion, { resource: OPAQUE_API });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect((await introspect(tp, reply.body['access_token'] as string))['aud']).to.equal(OPAQUE_API);
    });

    it("the account is the one the issuer's accountOf names: an issuer names no account it is not given", async () => {
      const SECOND_IDP = 'https://second-idp.example.com';
      const seen: IdJagAssertion[] = [];
      const two = await redeemer({
        trustedIssuers: [
          { issuer: IDP, jwks: idp.jwks, accountOf: asIs },
          {
            issuer: SECOND_IDP,
            jwks: idp.jwks,
            // This issuer's users are known here under their own names, within its one tenant.
            accountOf: (assertion) => {
              seen.push(assertion);
              return assertion['tenant'] === 'acme' && assertion.sub === 'b-7' ? 'bob' : undefined;
            },
          },
        ],
      });
      try {
        const second = (claims: Record<string, unknown>) =>
          idJag({ iss: SECOND_IDP, ...claims }, {}, two.issuer).then((assertion) => redeem(assertion, {}, AGENT, two));
        const issued = await second({ sub: 'b-7', tenant: 'acme' });
        expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
        expect(decodeJwt(issued.body['access_token'] as string)['sub']).to.equal('bob');
        expect(seen.at(-1)).to.include({ iss: SECOND_IDP, sub: 'b-7', tenant: 'acme', client_id: AGENT.client_id });
        // The first issuer's user, or another tenant's, named by the second issuer: refused.
        for (const claims of [{ sub: 'alice' }, { sub: 'b-7', tenant: 'other' }]) {
          expectError(await second(claims), 400, 'invalid_grant', /names no account here/);
        }
      } finally {
        await two.close();
      }
    });

    it('a key-bound assertion (cnf.jkt) is redeemed only with a DPoP proof of that key, and the token is bound to it', async () => {
      const [bound, other] = await Promise.all([DpopKey.generate(), DpopKey.generate()]);
      const withProof = async (key: DpopKey | undefined) =>
        tokenRequest(
          tp,
          { grant_type: JWT_BEARER_GRANT, assertion: await idJag({ cnf: { jkt: bound.thumbprint } }) },
          AGENT,
          key ? { dpop: await key.proof(`${tp.base}/token`) } : {},
        );
      expectError(await withProof(undefined), 400, 'invalid_grant', /bound to a key/);
      expectError(await withProof(other), 400, 'invalid_grant', /bound to a key/);
      const reply = await withProof(bound);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['token_type']).to.equal('DPoP');
      expect(decodeJwt(reply.body['access_token'] as string)['cnf']).to.deep.equal({ jkt: bound.thumbprint });
      await expectRefused(await idJag({ cnf: { 'x5t#S256': 'abc' } }), 400, 'invalid_grant', /"cnf" is not supported/);
    });

    it('discovery lists the profile (authorization_grant_profiles_supported) and the grant type', async () => {
      const metadata = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as Record<
        string,
        string[]
      >;
      expect(metadata['authorization_grant_profiles_supported']).to.deep.equal([ID_JAG_PROFILE]);
      expect(metadata['grant_types_supported']).to.include(JWT_BEARER_GRANT);
    });
  });

  describe('single use of jti', () => {
    it('a second redemption of the same assertion is invalid_grant', async () => {
      const assertion = await idJag();
      expect((await redeem(assertion)).status).to.equal(200);
      await expectRefused(assertion, 400, 'invalid_grant', /redeemed already/);
    });

    it('a refused redemption burns nothing: the same assertion is redeemed once the request is right', async () => {
      const assertion = await idJag();
      await expectRefused(assertion, 400, 'invalid_scope', /wider than the assertion/, { scope: 'profile:admin' });
      expect((await redeem(assertion)).status).to.equal(200);
    });

    it('the same jti from another issuer is another assertion', async () => {
      const other = await redeemer({
        trustedIssuers: [
          { issuer: IDP, jwks: idp.jwks, accountOf: asIs },
          { issuer: 'https://other-idp.example.com', jwks: idp.jwks, accountOf: asIs },
        ],
      });
      try {
        const jti = randomUUID();
        const first = await redeem(await idJag({ jti }, {}, other.issuer), {}, AGENT, other);
        const second = await redeem(
          await idJag({ jti, iss: 'https://other-idp.example.com' }, {}, other.issuer),
          {},
          AGENT,
          other,
        );
        expect([first.status, second.status]).to.deep.equal([200, 200]);
      } finally {
        await other.close();
      }
    });

    it('two providers on one store: the assertion is redeemed at one of them, once, however the requests race', async () => {
      const adapter = await suiteAdapterKind().open();
      const first = await redeemer({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] }, adapter);
      const second = await redeemer(
        { trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] },
        adapter,
        first.issuer,
      );
      try {
        const assertion = await idJag({}, {}, first.issuer);
        expect((await redeem(assertion, {}, AGENT, first)).status).to.equal(200);
        expectError(await redeem(assertion, {}, AGENT, second), 400, 'invalid_grant', /redeemed already/);

        const raced = await idJag({}, {}, first.issuer);
        const replies = await Promise.all(
          Array.from({ length: 6 }, (_, at) => redeem(raced, {}, AGENT, at % 2 ? second : first)),
        );
        expect(replies.map((reply) => reply.status).sort()).to.deep.equal([200, 400, 400, 400, 400, 400]);
      } finally {
        await Promise.all([first.close(), second.close()]);
      }
    });

    it("a client's and an issuer's redemptions per hour are bounded: beyond either, 429 with Retry-After", async () => {
      const SECOND_IDP = 'https://second-idp.example.com';
      const agents = Array.from({ length: 11 }, (_, n) => ({ client_id: `agent-${n}`, client_secret: `secret-${n}` }));
      const bounded = await startProvider({
        plugin: {
          idJag: {
            trustedIssuers: [
              { issuer: IDP, jwks: idp.jwks, accountOf: asIs },
              { issuer: SECOND_IDP, jwks: idp.jwks, accountOf: asIs },
            ],
            maxRedemptionsPerClient: 1,
          },
        },
        configuration: { clients: [...FIXTURE_CLIENTS, ...agents.map(agentAtRedeemer)] },
      });
      const by = (client: (typeof agents)[number], iss = IDP) =>
        idJag({ client_id: client.client_id, iss }, {}, bounded.issuer).then((assertion) =>
          redeem(assertion, {}, client, bounded),
        );
      try {
        // A client's share: one redemption, then none, whichever issuer.
        expect((await by(agents[0]!)).status).to.equal(200);
        const clientSpent = await by(agents[0]!, SECOND_IDP);
        expectError(clientSpent, 429, 'invalid_request', /redemptions this hour are spent/);
        expect(Number(clientSpent.headers.get('retry-after'))).to.be.within(1, 3600);
        // An issuer's share, ten clients' worth: the eleventh client gets none of its assertions, another issuer's still.
        for (const agent of agents.slice(1, 10)) expect((await by(agent)).status, agent.client_id).to.equal(200);
        expectError(await by(agents[10]!), 429, 'invalid_request', /redemptions this hour are spent/);
        expect((await by(agents[10]!, SECOND_IDP)).status).to.equal(200);
      } finally {
        await bounded.close();
      }
    });
  });

  describe('the redemption policy: idJag.canRedeem, then the AuthZEN decision point (redeem-id-jag)', () => {
    let pdp: DecisionPoint;
    let governed: TestProvider;
    /** What canRedeem answers, as each test sets it; and every input it was given. */
    let policy: (input: IdJagRedeemInput) => ExchangeDecision = () => true;
    const asked: IdJagRedeemInput[] = [];
    const told: Array<ImpersonationEvent<typeof EVENTS.idJagRedeemed>> = [];

    before(async () => {
      pdp = await startDecisionPoint();
      governed = await startProvider({
        plugin: {
          idJag: {
            // The issuer's subject 00u-alice is alice here.
            trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: ({ sub }) => sub.replace(/^00u-/, '') }],
            canRedeem: (input) => {
              asked.push(input);
              return policy(input);
            },
            maxRedemptionsPerClient: 5,
          },
          authzen: { url: pdp.url, timeout: scaled(1000) },
        },
        configuration: { clients: [...FIXTURE_CLIENTS, ...AGENT_CLIENTS] },
      });
      onImpersonationEvent(governed.provider, EVENTS.idJagRedeemed, (event) => told.push(event));
    });
    beforeEach(() => {
      policy = () => true;
      pdp.answer = { allow: true };
      pdp.received.length = 0;
      asked.length = 0;
    });
    after(async () => {
      await governed?.close();
      await pdp?.close();
    });

    const governedJag = (claims: Record<string, unknown> = {}) =>
      idJag({ sub: '00u-alice', ...claims }, {}, governed.issuer);
    const redeemGoverned = (assertion: string, params: Record<string, string> = {}, client = AGENT) =>
      redeem(assertion, params, client, governed);

    it('allowed: canRedeem sees the client, the local account, the actor, the issuer, the resource and scopes; then redeem-id-jag is asked', async () => {
      const assertion = await governedJag({ act: { sub: 'orders-bot' } });
      const reply = await redeemGoverned(assertion);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(asked).to.deep.equal([
        {
          clientId: AGENT.client_id,
          subject: 'alice',
          actor: 'orders-bot',
          issuer: IDP,
          resource: API,
          scope: ['profile:read', 'profile:write'],
        },
      ]);
      expect(pdp.received).to.have.length(1);
      expect(pdp.received[0]!.body).to.deep.equal({
        subject: { type: 'client', id: AGENT.client_id },
        action: { name: 'redeem-id-jag' },
        resource: { type: 'user', id: 'alice' },
        context: {
          client: AGENT.client_id,
          actor: 'orders-bot',
          issuer: IDP,
          resource_server: API,
          scopes: ['profile:read', 'profile:write'],
        },
      });
      expect(pdp.received[0]!.raw).not.to.include(assertion);
      expect(decodeJwt(reply.body['access_token'] as string)).to.include({ sub: 'alice' });
    });

    it('refused by canRedeem: invalid_grant with its reason, the decision point not asked, nothing spent', async () => {
      const before = told.length;
      const assertion = await governedJag();
      policy = () => ({ reason: 'alice may not use agents at orders' });
      const refused = await redeemGoverned(assertion);
      expectError(refused, 400, 'invalid_grant', /^alice may not use agents at orders$/);
      expect(JSON.stringify(refused.body)).not.to.include(assertion);
      policy = () => false;
      expectError(
        await redeemGoverned(assertion),
        400,
        'invalid_grant',
        /^the redemption policy refused this redemption$/,
      );
      expect(pdp.received).to.deep.equal([]);
      expect(told.length, 'no redemption').to.equal(before);
      // The assertion's jti was not taken: once the policy allows, the same ID-JAG is redeemed, once.
      policy = () => true;
      expect((await redeemGoverned(assertion)).status).to.equal(200);
      expectError(await redeemGoverned(assertion), 400, 'invalid_grant', /redeemed already/);
    });

    it('narrowed: the token and its session carry the scopes canRedeem let through, of which the decision point is asked; never widened', async () => {
      policy = ({ scope }) => ({ scope: scope.filter((name) => name !== 'profile:write') });
      const reply = await redeemGoverned(await governedJag());
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['scope']).to.equal('profile:read');
      expect(decodeJwt(reply.body['access_token'] as string)['scope']).to.equal('profile:read');
      expect(told.at(-1)!.scope).to.equal('profile:read');
      expect(pdp.received[0]!.body.context['scopes']).to.deep.equal(['profile:read']);

      policy = () => ({ scope: ['profile:read', 'profile:admin'] });
      const widened = await redeemGoverned(await governedJag());
      expectError(widened, 400, 'invalid_grant', /may narrow the requested scope, never widen it/);
    });

    it('refused by the decision point: invalid_grant with its words; one that cannot answer: 503; nothing spent or charged', async () => {
      const before = told.length;
      const assertion = await governedJag({ client_id: OTHER_AGENT.client_id });
      pdp.answer = { deny: 'orders-agent is suspended' };
      expectError(
        await redeemGoverned(assertion, {}, OTHER_AGENT),
        400,
        'invalid_grant',
        /^orders-agent is suspended$/,
      );
      pdp.answer = { deny: undefined };
      const refused = await redeemGoverned(assertion, {}, OTHER_AGENT);
      expectError(refused, 400, 'invalid_grant', /^the policy decision point refused this redemption$/);
      for (const answer of [{ status: 500 }, { hang: true }, { body: '{"allowed":true}' }] as const) {
        pdp.answer = answer;
        const reply = await redeemGoverned(assertion, {}, OTHER_AGENT);
        expectError(reply, 503, 'temporarily_unavailable', /nothing was issued, retry shortly/);
      }
      expect(pdp.received.every(({ body }) => body.action.name === 'redeem-id-jag')).to.equal(true);
      expect(told.length, 'no redemption').to.equal(before);
      // Neither the jti nor the client's share (5 an hour) was spent by the refusals.
      pdp.answer = { allow: true };
      expect((await redeemGoverned(assertion, {}, OTHER_AGENT)).status).to.equal(200);
      for (let more = 0; more < 4; more += 1) {
        const next = await governedJag({ client_id: OTHER_AGENT.client_id });
        expect((await redeemGoverned(next, {}, OTHER_AGENT)).status).to.equal(200);
      }
      const beyond = await governedJag({ client_id: OTHER_AGENT.client_id });
      expectError(await redeemGoverned(beyond, {}, OTHER_AGENT), 429, 'invalid_request', /redemptions this hour/);
    });

    it('a canRedeem that throws: 500 server_error, as any hook that throws; nothing spent', async () => {
      const assertion = await governedJag();
      policy = () => {
        throw new Error('the policy store is down');
      };
      const reply = await redeemGoverned(assertion);
      expectError(reply, 500, 'server_error');
      expect(JSON.stringify(reply.body)).not.to.include('policy store');
      expect(pdp.received).to.deep.equal([]);
      policy = () => true;
      expect((await redeemGoverned(assertion)).status).to.equal(200);
    });

    it('without canRedeem the decision point alone decides; without authzen it is never asked', async () => {
      const only = await startProvider({
        plugin: {
          idJag: { trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] },
          authzen: { url: pdp.url, timeout: scaled(1000) },
        },
        configuration: { clients: [...FIXTURE_CLIENTS, ...AGENT_CLIENTS] },
      });
      try {
        pdp.answer = { deny: 'no agents today' };
        const reply = await redeem(await idJag({}, {}, only.issuer), { scope: 'profile:read' }, AGENT, only);
        expectError(reply, 400, 'invalid_grant', /^no agents today$/);
        expect(pdp.received.at(-1)!.body.context['scopes']).to.deep.equal(['profile:read']);
        pdp.received.length = 0;
        expect((await redeem(await idJag())).status, 'tp has no authzen').to.equal(200);
        expect(pdp.received).to.deep.equal([]);
      } finally {
        await only.close();
      }
    });
  });

  describe('refusals: invalid_grant for an assertion that is not valid (RFC 7523 3.1)', () => {
    it('not a JWT', () => expectRefused('not-a-jwt', 400, 'invalid_grant', /assertion is invalid/));

    it('unsigned (alg none)', async () => {
      const encode = (part: object) => Buffer.from(JSON.stringify(part)).toString('base64url');
      const signed = decodeJwt(await idJag());
      const unsigned = `${encode({ alg: 'none', typ: 'oauth-id-jag+jwt' })}.${encode(signed)}.`;
      await expectRefused(unsigned, 400, 'invalid_grant', /assertion is invalid/);
    });

    it("signed by a key that is not the issuer's", async () =>
      expectRefused(await idJag({}, { key: stranger }), 400, 'invalid_grant', /signature verification failed/));

    it('from an issuer that is not trusted', async () =>
      expectRefused(
        await idJag({ iss: 'https://evil.example.com' }),
        400,
        'invalid_grant',
        /not from a trusted issuer/,
      ));

    it('aud naming this server and another: the draft allows exactly one member', async () => {
      await expectRefused(
        await idJag({}, {}, [tp.issuer, 'https://other-as.example.com'] as unknown as string),
        400,
        'invalid_grant',
        /another server too/,
      );
      expect((await redeem(await idJag({}, {}, [tp.issuer] as unknown as string))).status).to.equal(200);
    });

    it('authorization_details, which this server does not process: refused, not ignored', async () =>
      expectRefused(
        await idJag({ authorization_details: [{ type: 'payment' }] }),
        400,
        'invalid_grant',
        /authorization_details is not supported/,
      ));

    it("a header the caller wrote is never quoted back: the description is jose's code, not its message", async () => {
      // jose checks `crit` before the signature: a caller's own header, with any signature, reaches the check.
      const encode = (part: object) => Buffer.from(JSON.stringify(part)).toString('base64url');
      const header = { alg: 'ES256', typ: 'oauth-id-jag+jwt', crit: ['x"\n<script>'], 'x"\n<script>': 1 };
      const reply = await redeem(`${encode(header)}.${encode(decodeJwt(await idJag()))}.c2ln`);
      expectError(reply, 400, 'invalid_grant', /assertion is invalid: ERR_/);
      expect(JSON.stringify(reply.body)).not.to.include('<script>');
    });

    it('typ other than oauth-id-jag+jwt', async () => {
      for (const typ of ['JWT', 'at+jwt', undefined]) {
        await expectRefused(await idJag({}, { header: { typ } }), 400, 'invalid_grant', /"typ"/);
      }
    });

    it("aud other than this server's issuer (the token endpoint is not accepted)", async () => {
      await expectRefused(await idJag({}, {}, 'https://other-as.example.com'), 400, 'invalid_grant', /"aud"/);
      await expectRefused(await idJag({}, {}, `${tp.issuer}/token`), 400, 'invalid_grant', /"aud"/);
    });

    it('client_id of another client than the authenticated one', async () =>
      expectRefused(await idJag({ client_id: OTHER_AGENT.client_id }), 400, 'invalid_grant', /another client/));

    it('expired (beyond the clock tolerance)', async () =>
      expectRefused(await idJag({ iat: now() - 200, exp: now() - 60 }), 400, 'invalid_grant', /"exp"/));

    it('exp unreasonably far in the future (more than 300 s ahead)', async () =>
      expectRefused(await idJag({ exp: now() + 3600 }), 400, 'invalid_grant', /"exp" at most 300 s from now/));

    it('iat in the future, or older than 300 s', async () => {
      await expectRefused(await idJag({ iat: now() + 600 }), 400, 'invalid_grant', /"iat"/);
      await expectRefused(await idJag({ iat: now() - 600 }), 400, 'invalid_grant', /"iat"/);
    });

    it('nbf in the future', async () =>
      expectRefused(await idJag({ nbf: now() + 600 }), 400, 'invalid_grant', /"nbf"/));

    it('a required claim missing: sub, client_id, jti, exp, iat, iss, aud', async () => {
      for (const claim of ['sub', 'client_id', 'jti', 'exp', 'iat']) {
        await expectRefused(await idJag({ [claim]: undefined }), 400, 'invalid_grant', new RegExp(`"${claim}"`));
      }
      await expectRefused(await idJag({ iss: undefined }), 400, 'invalid_grant', /not from a trusted issuer/);
      await expectRefused(await idJag({ aud: undefined }), 400, 'invalid_grant', /"aud"/);
    });

    it('sub, client_id or jti that is not a non-empty string', async () => {
      for (const claim of ['sub', 'client_id', 'jti']) {
        await expectRefused(await idJag({ [claim]: 42 }), 400, 'invalid_grant', new RegExp(`"${claim}"`));
      }
    });

    it('sub naming no account of this server', async () =>
      expectRefused(await idJag({ sub: 'mallory' }), 400, 'invalid_grant', /no account/));

    it('resource or scope claims of the wrong type', async () => {
      await expectRefused(await idJag({ resource: 42 }), 400, 'invalid_grant', /resource claim is malformed/);
      await expectRefused(await idJag({ scope: ['profile:read'] }), 400, 'invalid_grant', /scope claim is malformed/);
    });
    it('act that is no chain of objects each naming a sub, nested too deep, or too long', async () => {
      let deep: Record<string, unknown> = { sub: 'a' };
      for (let level = 1; level < 11; level += 1) deep = { sub: 'a', act: deep };
      const malformed = ['bot', [{ sub: 'bot' }], {}, { sub: 42 }, { sub: '' }, { sub: 'bot', act: 'x' }, deep];
      for (const act of malformed) {
        await expectRefused(await idJag({ act }), 400, 'invalid_grant', /"act" claim is no chain/);
      }
      const long = { sub: 'bot', note: 'x'.repeat(2048) };
      await expectRefused(await idJag({ act: long }), 400, 'invalid_grant', /"act" claim must be at most 2048/);
      // Ten actors deep is the bound, as a delegation's chain.
      expect((await redeem(await idJag({ act: deep['act'] }))).status).to.equal(200);
    });
  });

  describe('refusals of the request', () => {
    it('no assertion: invalid_request', async () => {
      expectError(await redeem(undefined), 400, 'invalid_request', /assertion/);
    });

    it('a public client: invalid_client (the draft: confidential clients only)', async () =>
      expectRefused(await idJag({ client_id: PUBLIC_AGENT.client_id }), 401, 'invalid_client', /./, {}, PUBLIC_AGENT));

    it("a client whose grant_types lack jwt-bearer: oidc-provider's invalid_request", async () => {
      const reply = await redeem(await idJag({ client_id: CLIENTS.web.client_id }), {}, CLIENTS.web);
      expectError(reply, 400, 'invalid_request', /grant type is not allowed/);
    });

    it('a client bound to DPoP (dpop_bound_access_tokens) that sends no proof: invalid_grant, as the draft asks', async () => {
      const assertion = await idJag({ client_id: DPOP_AGENT.client_id });
      await expectRefused(assertion, 400, 'invalid_grant', /DPoP proof JWT not provided/, {}, DPOP_AGENT);
      // With a proof, the same assertion is redeemed, and the token bound to its key.
      const key = await DpopKey.generate();
      const reply = await tokenRequest(tp, { grant_type: JWT_BEARER_GRANT, assertion }, DPOP_AGENT, {
        dpop: await key.proof(`${tp.base}/token`),
      });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(decodeJwt(reply.body['access_token'] as string)['cnf']).to.deep.equal({ jkt: key.thumbprint });
    });

    it('scope wider than the assertion: invalid_scope', async () =>
      expectRefused(await idJag({ scope: 'profile:read' }), 400, 'invalid_scope', /wider/, { scope: 'profile:write' }));

    it('scope the resource does not define: invalid_scope', async () =>
      expectRefused(await idJag({ scope: 'profile:read calendar:write' }), 400, 'invalid_scope', /not defined/, {
        scope: 'calendar:write',
      }));

    it('a resource the assertion does not list: invalid_target', async () =>
      expectRefused(await idJag(), 400, 'invalid_target', /not in the assertion/, { resource: OPAQUE_API }));

    it('several resources in the assertion and none chosen: invalid_target', async () =>
      expectRefused(await idJag({ resource: [API, OPAQUE_API] }), 400, 'invalid_target', /name one of its resources/));

    it('a resource unknown to getResourceServerInfo: invalid_target', async () =>
      expectRefused(await idJag({ resource: 'https://unknown.example.com' }), 400, 'invalid_target', /./));

    it('the Management API as the resource: invalid_target', async () =>
      expectRefused(await idJag({ resource: MANAGEMENT }), 400, 'invalid_target', /Management API/));
  });

  describe('configuration', () => {
    it('without the idJag option nothing is accepted: the grant is unsupported and discovery does not list it', async () => {
      const plain = await startProvider({ configuration: { clients: [...FIXTURE_CLIENTS] } });
      try {
        const reply = await tokenRequest(
          plain,
          { grant_type: JWT_BEARER_GRANT, assertion: await idJag() },
          CLIENTS.web,
        );
        expectError(reply, 400, 'unsupported_grant_type');
        const metadata = (await (await fetch(`${plain.base}/.well-known/openid-configuration`)).json()) as object;
        expect(metadata).not.to.have.property('authorization_grant_profiles_supported');
      } finally {
        await plain.close();
      }
    });

    it('an issuer whose keys are at jwksUri: fetched from there', async () => {
      const server: Server = createServer((_req, res) => res.end(JSON.stringify(idp.jwks)));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const jwksUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
      const remote = await redeemer({ trustedIssuers: [{ issuer: IDP, jwksUri, accountOf: asIs }] });
      try {
        expect((await redeem(await idJag({}, {}, remote.issuer), {}, AGENT, remote)).status).to.equal(200);
      } finally {
        await remote.close();
        server.close();
      }
    });

    it('an issuer whose keys cannot be fetched or read: 503 temporarily_unavailable, not invalid_grant', async () => {
      const answers = [
        (res: import('node:http').ServerResponse) => res.writeHead(500).end(),
        (res: import('node:http').ServerResponse) => res.end('not json'),
      ];
      const server: Server = createServer((_req, res) => answers.shift()?.(res));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const served = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
      for (const jwksUri of ['http://127.0.0.1:9/jwks', served, served]) {
        const remote = await redeemer({ trustedIssuers: [{ issuer: IDP, jwksUri, accountOf: asIs }] });
        try {
          const reply = await redeem(await idJag({}, {}, remote.issuer), {}, AGENT, remote);
          expectError(reply, 503, 'temporarily_unavailable', /keys could not be fetched/);
        } finally {
          await remote.close();
        }
      }
      server.close();
    });

    it('a trail that cannot record the redemption: 5xx, no token answered, none left live, no event told', async () => {
      const told: unknown[] = [];
      const unrecorded = await startProvider({
        plugin: {
          idJag: { trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] },
          auditLog: {
            append: async (name) => {
              if (name === EVENTS.idJagRedeemed) throw new Error('the trail is down');
            },
          },
        },
        configuration: { clients: [...FIXTURE_CLIENTS, ...AGENT_CLIENTS] },
      });
      onImpersonationEvent(unrecorded.provider, EVENTS.idJagRedeemed, (event) => told.push(event));
      try {
        const assertion = await idJag({ resource: OPAQUE_API, scope: 'read' }, {}, unrecorded.issuer);
        const reply = await redeem(assertion, {}, AGENT, unrecorded);
        expect(reply.status).to.be.within(500, 599);
        expect(reply.body).not.to.have.property('access_token');
        expect(told).to.deep.equal([]);
        // Its session ended (its token's Grant with it) and listed on the revocation feed.
        const admin = await adminToken(unrecorded);
        const feed = await apiRequest(unrecorded, 'GET', `${SESSIONS}/revocations`, admin);
        const [stopped] = feed.body['revoked'] as Array<{ id: string }>;
        const session = await apiRequest(unrecorded, 'GET', `${SESSIONS}/${stopped!.id}`, admin);
        expect(session.body).to.include({ type: 'id-jag-redemption', state: 'ended', endReason: 'not_recorded' });
      } finally {
        await unrecorded.close();
      }
    });

    it('options are checked at start-up: unknown names, no issuer, bad keys, http off loopback', () => {
      const make = (idJag: unknown) => () =>
        createImpersonation({ managementResource: MANAGEMENT, idJag: idJag as IdJagOptions });
      expect(make({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }], maxLifetime: 60 })).to.throw(
        /idJag\.maxLifetime/,
      );
      expect(make({ trustedIssuers: [] })).to.throw(/idJag\.trustedIssuers/);
      expect(make({ trustedIssuers: [{ issuer: IDP, accountOf: asIs }] })).to.throw(/"jwks" or "jwksUri"/);
      expect(make({ trustedIssuers: [{ issuer: IDP, jwks: { keys: 'none' }, accountOf: asIs }] })).to.throw(/jwks/);
      expect(make({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks }] })).to.throw(/trustedIssuers\[0\]\.accountOf/);
      expect(
        make({ trustedIssuers: [{ issuer: 'http://idp.example.com', jwks: idp.jwks, accountOf: asIs }] }),
      ).to.throw(/https issuer/);
      expect(
        make({ trustedIssuers: [{ issuer: IDP, jwksUri: 'http://idp.example.com/jwks', accountOf: asIs }] }),
      ).to.throw(/https/);
      expect(make({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, kid: 'x', accountOf: asIs }] })).to.throw(
        /trustedIssuers\[0\]\.kid/,
      );
      expect(
        make({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }], maxRedemptionsPerClient: 0 }),
      ).to.throw(/maxRedemptionsPerClient/);
      expect(make({ trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }], canRedeem: 'yes' })).to.throw(
        /idJag\.canRedeem" must be a function/,
      );
      expect(
        make({
          trustedIssuers: [
            { issuer: IDP, jwks: idp.jwks, accountOf: asIs },
            { issuer: IDP, jwks: idp.jwks, accountOf: asIs },
          ],
        }),
      ).to.throw(/trustedIssuers\[1\]/);
    });

    it("a provider that trusts its own issuer still redeems none of its own assertions (the draft's Cross-Domain Use)", async () => {
      const own = await redeemer(
        { trustedIssuers: [{ issuer: IDP, jwks: idp.jwks, accountOf: asIs }] },
        undefined,
        IDP,
      );
      try {
        const reply = await redeem(await idJag({}, {}, IDP), {}, AGENT, own);
        expectError(reply, 400, 'invalid_grant', /no assertion of its own/);
      } finally {
        await own.close();
      }
    });
  });
});
