/**
 * Bugs other token-exchange servers shipped, each played here against a real
 * provider over HTTP: the test fails if the same bug were in this plugin.
 *
 * - keycloak#52691: a delegated token exchanged again by a route that ignores
 *   `act` and `may_act` came back as a clean token, its actor gone.
 * - logto#9458: a token the user gave a third-party application was exchanged
 *   by a first-party client into the user's whole first-party authorization.
 * - zitadel#12171: the ID token an impersonation exchange returned lost the
 *   sign-in's `nonce`. Token exchange here issues no ID token at all.
 * - Keycloak CVE-2026-96460: an exchanged token got a fresh lifetime, and so
 *   outlived the token it came from.
 * - keycloak#53029: introspection of an exchanged token left out `act`.
 * - Keycloak CVE-2026-17526, ZITADEL CVE-2026-109374: an administrator could
 *   be impersonated. Here a subject that is a client (the Management API's
 *   callers are clients) is refused whatever findAccount answers.
 */
import { expect } from 'chai';
import type { AccessToken, ClientMetadata, KoaContextWithOIDC } from 'oidc-provider';
import {
  ACTOR_API,
  API,
  CLIENTS,
  DOWNSTREAM_API,
  FIXTURE_CLIENTS,
  OPAQUE_API,
  REDIRECT_URI,
  SHORT_API,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  ACCESS_TOKEN,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  managementRequest,
  m2mToken,
  subjectToken,
  userAccessToken,
  type Reply,
} from '../support/http.js';
import { adminToken, exchangeAsActor, revokeSession } from '../support/impersonations.js';

const JWT = 'urn:ietf:params:oauth:token-type:jwt';
const ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';

/** A third party's application: bob signs in to it and consents to profile:read at API, nothing more. */
const PARTNER_APP = { client_id: 'partner-app' } as const;
const PARTNER_METADATA: ClientMetadata = {
  ...PARTNER_APP,
  token_endpoint_auth_method: 'none',
  grant_types: ['authorization_code'],
  response_types: ['code'],
  redirect_uris: [REDIRECT_URI],
};

function issued(reply: Reply): string {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
  return reply.body['access_token'] as string;
}

/** A delegation by the orders service, which runs API, OPAQUE_API and SHORT_API. */
function delegate(tp: TestProvider, subject: string, params: Record<string, string | undefined> = {}): Promise<Reply> {
  return exchange(tp, { subject_token: subject, resource: DOWNSTREAM_API, ...params }, CLIENTS.orders);
}

describe('bugs of other token-exchange servers', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let admin: string;
  /** The users the deployment knows: a test removes one. */
  const users = new Set(['alice', 'bob', 'carol', 'dave', 'erin']);

  before(async () => {
    tp = await startProvider({
      // Impersonations shorter than delegations (300 s): a delegation's lifetime shows what caps it.
      plugin: { actorClients: [CLIENTS.console.client_id], accessTokenTTL: 120 },
      configuration: {
        clients: [...FIXTURE_CLIENTS, PARTNER_METADATA],
        findAccount: (_ctx: KoaContextWithOIDC, sub: string) =>
          users.has(sub) ? { accountId: sub, claims: () => ({ sub }) } : undefined,
        // carol lets alice act for her, through the orders service, and no one else.
        extraTokenClaims: (_ctx: KoaContextWithOIDC, token: unknown) =>
          (token as AccessToken).accountId === 'carol'
            ? { may_act: { sub: 'alice', client_id: CLIENTS.orders.client_id } }
            : undefined,
      },
    });
    admin = await adminToken(tp);
  });
  after(() => tp.close());

  describe('keycloak#52691: a delegated token exchanged again keeps its actors and its may_act', () => {
    it('refuses a delegated token at the plain exchange, and nests the chain when it is delegated again', async () => {
      const bobs = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
      const alice = await userAccessToken(tp, 'alice');
      const first = issued(
        await delegate(tp, bobs, { resource: API, actor_token: alice, actor_token_type: ACCESS_TOKEN }),
      );
      // A client that may not delegate gets the impersonation's answers: never a token without act.
      for (const type of [ACCESS_TOKEN, JWT]) {
        const plain = await exchange(
          tp,
          { subject_token: first, subject_token_type: type, resource: API },
          CLIENTS.web,
        );
        expect(plain.status, JSON.stringify(plain.body)).to.equal(400);
        expect(plain.body).to.include({ error: 'invalid_request' });
      }
      // Without an actor token the orders service acts, on top of alice: the chain is copied, never dropped.
      const again = decodeJwt(issued(await delegate(tp, first)));
      expect(again['sub']).to.equal('bob');
      expect(again['act']).to.deep.equal({
        sub: CLIENTS.orders.client_id,
        client_id: CLIENTS.orders.client_id,
        act: { sub: 'alice', client_id: CLIENTS.orders.client_id },
      });
      // It lives no longer than the token it came from, so exchanging again never extends a delegation.
      expect(again['exp']).to.be.at.most(decodeJwt(first)['exp'] as number);
    });

    it("holds the subject's may_act at every later exchange of a token delegated from it", async () => {
      const carols = await userAccessToken(tp, 'carol', { resource: API, scope: 'openid profile:read' });
      const alice = await userAccessToken(tp, 'alice');
      // The orders service alone may not act for carol.
      expectError(await delegate(tp, carols), 400, 'invalid_request', /may_act/);
      const withAlice = { actor_token: alice, actor_token_type: ACCESS_TOKEN };
      const jwt = issued(await delegate(tp, carols, { resource: API, ...withAlice }));
      const opaque = issued(await delegate(tp, carols, { resource: OPAQUE_API, scope: undefined, ...withAlice }));
      // Nor by exchanging again the token alice's delegation gave it, JWT or opaque.
      expectError(await delegate(tp, jwt), 400, 'invalid_request', /may_act/);
      expectError(await delegate(tp, opaque, { resource: OPAQUE_API }), 400, 'invalid_request', /may_act/);
      // alice, through the orders service, still may.
      const further = decodeJwt(issued(await delegate(tp, jwt, withAlice)));
      expect(further['act']).to.deep.include({ sub: 'alice', client_id: CLIENTS.orders.client_id });
      expect((await introspect(tp, opaque))['may_act']).to.deep.equal({
        sub: 'alice',
        client_id: CLIENTS.orders.client_id,
      });
    });

    it('refuses as actor a user the deployment no longer knows, though their JWT has not expired', async () => {
      const bobs = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
      const daves = await userAccessToken(tp, 'dave', { resource: API, scope: 'openid profile:read' });
      const asDave = { resource: API, actor_token: daves, actor_token_type: ACCESS_TOKEN };
      expect(decodeJwt(issued(await delegate(tp, bobs, asDave)))['act']).to.deep.include({ sub: 'dave' });
      users.delete('dave');
      expectError(await delegate(tp, bobs, asDave), 400, 'invalid_request', /no longer exists/);
      // A client acting with its own client-credentials token is no user, and is not looked up.
      const own = await m2mToken(tp, CLIENTS.orders, 'profile:read', API);
      const asClient = { resource: API, actor_token: own, actor_token_type: ACCESS_TOKEN };
      expect(decodeJwt(issued(await delegate(tp, bobs, asClient)))['act']).to.deep.include({
        sub: CLIENTS.orders.client_id,
      });
    });

    it('refuses a token delegated from an impersonation once the impersonation is stopped', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = issued(
        await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: alice, scope: 'profile:read' }),
      );
      const delegated = issued(await delegate(tp, impersonation, { resource: API }));
      expect(decodeJwt(delegated)['act']).to.deep.include({ act: { sub: 'alice' } });
      const session = decodeJwt(impersonation)['impersonation_session'] as string;
      expect((await revokeSession(tp, admin, session)).status).to.equal(204);
      expectError(await delegate(tp, delegated), 400, 'invalid_request', /stopped/);
    });
  });

  describe('Keycloak CVE-2026-96460: a token exchanged again never outlives the token it came from', () => {
    const expOf = (token: string) => decodeJwt(token)['exp'] as number;

    it('caps a delegation from an impersonation, and its delegation in turn, at the exp of the token each came from', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = issued(
        await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: alice, scope: 'profile:read' }),
      );
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const delegated = issued(await delegate(tp, impersonation, { resource: API }));
      expect(expOf(delegated)).to.be.at.most(expOf(impersonation));
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const again = issued(await delegate(tp, delegated, { resource: API }));
      expect(expOf(again)).to.be.at.most(expOf(delegated));
    });

    it("caps an impersonation whose actor token is an impersonation token at that token's exp", async () => {
      const alice = await userAccessToken(tp, 'alice');
      const bobForAlice = issued(
        await exchangeAsActor(tp, {
          subjectToken: await subjectToken(tp),
          actorToken: alice,
          resource: ACTOR_API,
          scope: 'openid',
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const reply = await exchangeAsActor(tp, {
        subjectToken: await subjectToken(tp, { userId: 'erin' }),
        actorToken: bobForAlice,
      });
      const derived = decodeJwt(issued(reply));
      expect(derived['act']).to.deep.equal({ sub: 'bob', act: { sub: 'alice' } });
      expect(derived['exp']).to.be.at.most(expOf(bobForAlice));
      expect(reply.body['expires_in']).to.be.at.most(expOf(bobForAlice) - Math.floor(Date.now() / 1000) + 1);
    });
  });

  describe('keycloak#53029: introspection names who acts', () => {
    it('answers act for an impersonation token, and the nested chain for a delegation from it', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = issued(
        await exchangeAsActor(tp, {
          subjectToken: await subjectToken(tp),
          actorToken: alice,
          resource: OPAQUE_API,
          scope: 'read',
        }),
      );
      expect(await introspect(tp, impersonation)).to.deep.include({ active: true, sub: 'bob', act: { sub: 'alice' } });
      const delegated = issued(await delegate(tp, impersonation, { resource: OPAQUE_API }));
      expect(await introspect(tp, delegated)).to.deep.include({
        active: true,
        sub: 'bob',
        act: { sub: CLIENTS.orders.client_id, client_id: CLIENTS.orders.client_id, act: { sub: 'alice' } },
      });
    });
  });

  describe('Keycloak CVE-2026-17526, ZITADEL CVE-2026-109374: no administrator is impersonated by default', () => {
    it('refuses a subject that is a client, the administration and the backends included, whatever findAccount answers', async () => {
      const backend = await m2mToken(tp);
      for (const client of [CLIENTS.admin, CLIENTS.backend, CLIENTS.orders]) {
        // findAccount knows the id (a deployment's may answer for any): the client's id alone refuses it.
        users.add(client.client_id);
        const refused = await managementRequest(tp, { userId: client.client_id }, backend);
        expectError(refused, 403, 'access_denied', /^userId names a client: only users are impersonated$/);
      }
      expect((await managementRequest(tp, { userId: 'bob' }, backend)).status).to.equal(201);
    });
  });

  describe("logto#9458: a third party's token is never widened into first-party access", () => {
    let partners: string;

    before(async () => {
      partners = await userAccessToken(tp, 'bob', { client: PARTNER_APP, resource: API, scope: 'openid profile:read' });
      const claims = decodeJwt(partners);
      expect(claims).to.include({ client_id: PARTNER_APP.client_id });
      // oidc-provider 9.12 lists openid in a resource's token too, 9.13 does not: the resource's scopes are what count.
      expect(
        String(claims['scope'])
          .split(' ')
          .filter((scope) => scope !== 'openid'),
      ).to.deep.equal(['profile:read']);
    });

    it('does not let the third party exchange at all: its grant_types lack token exchange', async () => {
      const reply = await exchange(tp, { subject_token: partners, resource: API }, PARTNER_APP);
      // oidc-provider answers before the grant runs: invalid_request, not RFC 6749's unauthorized_client.
      expectError(reply, 400, 'invalid_request', /requested grant type is not allowed for this client/);
    });

    it('keeps a token delegated from it to the scopes the user gave the third party', async () => {
      // bob's first-party sign-in carries profile:write at API; the partner's token does not.
      const firstParty = decodeJwt(
        await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read profile:write' }),
      );
      expect(
        String(firstParty['scope'])
          .split(' ')
          .filter((scope) => scope !== 'openid'),
      ).to.deep.equal(['profile:read', 'profile:write']);
      const narrow = decodeJwt(issued(await delegate(tp, partners, { resource: API })));
      expect(narrow).to.include({ sub: 'bob', scope: 'profile:read' });
      expectError(
        await delegate(tp, partners, { resource: API, scope: 'profile:read profile:write' }),
        400,
        'invalid_scope',
      );
    });

    it('refuses it where it was not sent to a resource the exchanging client runs, and at the plain exchange', async () => {
      // Issued to the partner without a resource: for no API the orders service runs.
      const userinfoOnly = await userAccessToken(tp, 'bob', { client: PARTNER_APP, scope: 'openid' });
      expectError(await delegate(tp, userinfoOnly), 400, 'invalid_request', /neither to this client/);
      // A first-party client that may exchange but not delegate: the token is no subject token of the plugin's.
      expectError(
        await exchange(tp, { subject_token: partners, resource: API }, CLIENTS.web),
        400,
        'invalid_request',
        /subject_token is unknown/,
      );
    });
  });

  describe('zitadel#12171: token exchange issues no ID token, so none can lose its nonce', () => {
    it('answers an impersonation and a delegation asked for openid with an access token only', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = await exchangeAsActor(tp, {
        subjectToken: await subjectToken(tp),
        actorToken: alice,
        resource: SHORT_API,
        scope: 'openid',
      });
      issued(impersonation);
      const subject = await userAccessToken(tp, 'bob', { resource: SHORT_API, scope: 'openid' });
      const delegation = await delegate(tp, subject, { resource: SHORT_API, scope: 'openid' });
      issued(delegation);
      for (const reply of [impersonation, delegation]) {
        expect(reply.body).to.include({ issued_token_type: ACCESS_TOKEN, scope: 'openid' });
        expect(reply.body).not.to.have.any.keys('id_token', 'refresh_token');
        const claims = decodeJwt(reply.body['access_token'] as string);
        expect(claims).not.to.have.any.keys('nonce', 'auth_time', 'acr', 'amr', 'sid', 'at_hash');
      }
    });

    it('refuses requested_token_type id_token, for impersonation and delegation', async () => {
      const alice = await userAccessToken(tp, 'alice');
      const impersonation = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
        requested_token_type: ID_TOKEN,
      });
      expectError(impersonation, 400, 'invalid_request', /requested_token_type/);
      const subject = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
      expectError(
        await delegate(tp, subject, { requested_token_type: ID_TOKEN }),
        400,
        'invalid_request',
        /requested_token_type/,
      );
    });
  });
});
