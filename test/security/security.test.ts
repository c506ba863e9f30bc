import { hash } from 'node:crypto';
import { expect } from 'chai';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import {
  ACTOR_API,
  API,
  CLIENTS,
  MANAGEMENT,
  MANAGEMENT_SCOPE,
  OPAQUE_API,
  USERS,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  ACCESS_TOKEN,
  actorParams,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  m2mToken,
  subjectToken,
  tokenRequest,
  userAccessToken,
} from '../support/http.js';

describe('security guarantees', () => {
  let tp: TestProvider;
  /** Accounts findAccount knows; a test may remove one to model a deleted user. */
  const accounts = new Set([...USERS, 'dave']);
  let alice: string;

  before(async () => {
    tp = await startProvider({
      configuration: {
        findAccount(_ctx: KoaContextWithOIDC, sub: string) {
          if (!accounts.has(sub)) return undefined;
          return { accountId: sub, claims: () => ({ sub }) };
        },
      },
    });
    alice = await userAccessToken(tp, 'alice');
  });
  after(() => tp.close());

  describe('events name tokens by non-secret ids only', () => {
    for (const [format, resource] of [
      ['opaque', OPAQUE_API],
      ['JWT', API],
    ] as const) {
      it(`names an issued ${format} access token without its value`, async () => {
        const events: ImpersonationEvent[] = [];
        const stop = onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, (event) => events.push(event));
        try {
          const result = await exchange(tp, { subject_token: await subjectToken(tp), resource, ...actorParams(alice) });
          expect(result.status, JSON.stringify(result.body)).to.equal(200);
          const value = result.body['access_token'] as string;
          expect(events).to.have.length(1);
          expect(JSON.stringify(events[0])).to.not.include(value);
          expect(events[0]!.accessTokenId).to.equal(
            format === 'opaque' ? `sha256.${hash('sha256', value, 'base64url')}` : decodeJwt(value)['jti'],
          );
        } finally {
          stop();
        }
      });
    }
  });

  describe('actor tokens count only while oidc-provider itself would honour them', () => {
    it('refuses an opaque actor token whose grant was revoked, as userinfo does', async () => {
      const actor = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp);
      const stored = await tp.provider.AccessToken.find(actor);
      const grant = await tp.provider.Grant.find(stored!.grantId!);
      await grant!.destroy();
      const userinfo = await fetch(`${tp.base}/me`, { headers: { authorization: `Bearer ${actor}` } });
      expect(userinfo.status).to.equal(401);
      expectError(
        await exchange(tp, { subject_token: subject, resource: API, ...actorParams(actor) }),
        400,
        'invalid_request',
        /actor_token/,
      );
      // The subject token was not burned by the refusal.
      expect((await exchange(tp, { subject_token: subject, resource: API, ...actorParams(alice) })).status).to.equal(
        200,
      );
    });

    it('refuses an actor token of a user findAccount no longer knows (opaque and JWT)', async () => {
      const opaque = await userAccessToken(tp, 'dave');
      const jwt = await userAccessToken(tp, 'dave', { scope: 'openid', resource: ACTOR_API });
      expect(
        (await exchange(tp, { subject_token: await subjectToken(tp), resource: API, ...actorParams(opaque) })).status,
      ).to.equal(200);
      accounts.delete('dave');
      try {
        for (const actor of [opaque, jwt]) {
          const result = await exchange(tp, {
            subject_token: await subjectToken(tp),
            resource: API,
            ...actorParams(actor),
          });
          expectError(result, 400, 'invalid_request', /actor_token names a user that no longer exists/);
        }
      } finally {
        accounts.add('dave');
      }
    });

    it('refuses, by default, an actor token issued to another client than the exchanging one', async () => {
      const fromWeb = await userAccessToken(tp, 'alice', { client: CLIENTS.web });
      const bound = await subjectToken(tp, { userId: 'bob', actorId: 'alice' });
      expectError(
        await exchange(tp, { subject_token: bound, resource: API, ...actorParams(fromWeb) }),
        400,
        'invalid_request',
        /issued to a client whose tokens are not accepted/,
      );
      // The same token is an actor token at its own client.
      const result = await exchange(tp, { subject_token: bound, resource: API, ...actorParams(fromWeb) }, CLIENTS.web);
      expect(result.status, JSON.stringify(result.body)).to.equal(200);
    });

    it('accepts actor tokens of the clients named in actorClients', async () => {
      const other = await startProvider({ plugin: { actorClients: [CLIENTS.web.client_id] } });
      try {
        const fromWeb = await userAccessToken(other, 'alice', { client: CLIENTS.web });
        const result = await exchange(other, {
          subject_token: await subjectToken(other),
          resource: API,
          ...actorParams(fromWeb),
        });
        expect(result.status, JSON.stringify(result.body)).to.equal(200);
        expect(decodeJwt(result.body['access_token'] as string)['act']).to.deep.equal({ sub: 'alice' });
        const fromConsole = await userAccessToken(other, 'alice', { client: CLIENTS.console });
        expect(
          (
            await exchange(other, {
              subject_token: await subjectToken(other),
              resource: API,
              ...actorParams(fromConsole),
            })
          ).status,
        ).to.equal(200);
      } finally {
        await other.close();
      }
    });

    it('refuses an actorClients option that is not a list of client ids', async () => {
      for (const actorClients of ['support-web', [''], [1]]) {
        let thrown: unknown;
        try {
          await startProvider({ plugin: { actorClients: actorClients as string[] } });
        } catch (error) {
          thrown = error;
        }
        expect(String(thrown)).to.match(/actorClients/);
      }
    });
  });

  describe('client_secret_basic clients (spec 5.2)', () => {
    it('answers 401 invalid_client when the secret comes in the body, and keeps the subject token', async () => {
      const subject = await subjectToken(tp);
      const posted = await tokenRequest(
        tp,
        {
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: subject,
          subject_token_type: ACCESS_TOKEN,
          resource: API,
          client_secret: CLIENTS.web.client_secret,
        },
        { client_id: CLIENTS.web.client_id },
      );
      expectError(posted, 401, 'invalid_client');
      expect((await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.web)).status).to.equal(200);
    });
  });

  describe('the management scope is no OIDC scope of the provider', () => {
    it('is not advertised in scopes_supported', async () => {
      const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as {
        scopes_supported: string[];
      };
      expect(discovery.scopes_supported).to.include('openid');
      expect(discovery.scopes_supported).to.not.include(MANAGEMENT_SCOPE);
    });

    it('is removed from an authorization request: the sign-in completes and no token carries it', async () => {
      const token = await userAccessToken(tp, 'alice', { scope: `openid ${MANAGEMENT_SCOPE}` });
      const introspection = await introspect(tp, token);
      expect(introspection['active']).to.equal(true);
      expect(String(introspection['scope']).split(' ')).to.deep.equal(['openid']);
    });

    it('still reaches the Management API through client_credentials', async () => {
      const token = await m2mToken(tp);
      expect(decodeJwt(token)).to.include({ scope: MANAGEMENT_SCOPE, aud: MANAGEMENT });
    });
  });

  describe('the Management API matches its path exactly', () => {
    for (const path of ['/API/Subject-Tokens', '/api/subject-tokens/', '/Api/subject-tokens']) {
      it(`answers 404 at ${path}`, async () => {
        const response = await fetch(`${tp.base}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${await m2mToken(tp)}`, 'content-type': 'application/json' },
          body: JSON.stringify({ userId: 'bob' }),
        });
        expect(response.status).to.equal(404);
        expect(await response.text()).to.not.include('ist_');
      });
    }
  });

  describe("a custom authenticator's description", () => {
    it('gives a 401 with a safe WWW-Authenticate header for CR, LF and non-Latin-1 text', async () => {
      const custom = await startProvider({
        plugin: {
          authenticateManagementRequest: () => ({
            error: 'invalid_token',
            description: 'bad\r\nX-Injected: 1 — 令牌无效 "quoted"',
          }),
        },
      });
      try {
        const response = await fetch(`${custom.base}/api/subject-tokens`, {
          method: 'POST',
          headers: { authorization: 'Bearer anything', 'content-type': 'application/json' },
          body: JSON.stringify({ userId: 'bob' }),
        });
        expect(response.status).to.equal(401);
        expect(response.headers.get('x-injected')).to.equal(null);
        const challenge = response.headers.get('www-authenticate')!;
        expect(challenge).to.match(/^Bearer error="invalid_token", error_description="[\x20-\x7E]*"$/);
        expect(challenge).to.include('X-Injected: 1');
        const body = (await response.json()) as Record<string, string>;
        expect(body['error_description']).to.equal('bad\r\nX-Injected: 1 — 令牌无效 "quoted"');
      } finally {
        await custom.close();
      }
    });
  });

  describe('the token response', () => {
    it('always carries scope, empty when none was granted (spec 2.5)', async () => {
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
      expect(result.status).to.equal(200);
      expect(result.body['scope']).to.equal('');
    });
  });
});
