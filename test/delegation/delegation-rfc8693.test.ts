/**
 * Delegation as RFC 8693 has it, and as Keycloak and Spring Authorization
 * Server behave: a revoked subject token takes what was exchanged from it
 * along; each token is validated as the type its request names; an actor is
 * a party that still exists. Over HTTP against a real provider, on
 * TEST_ADAPTER's store.
 */
import { expect } from 'chai';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { createImpersonationVerifier, type ImpersonationVerifier } from '../../lib/resource-server/index.js';
import { CLIENTS, DOWNSTREAM_API, OPAQUE_API, USERS, startProvider, type TestProvider } from '../support/provider.js';
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
import { adminToken, SESSIONS } from '../support/impersonations.js';

const JWT = 'urn:ietf:params:oauth:token-type:jwt';

describe('delegation: RFC 8693 as other servers read it', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  let admin: string;
  /** Accounts findAccount knows; a test removes one to model a deleted user. */
  const accounts = new Set([...USERS, 'dave']);

  before(async () => {
    tp = await startProvider({
      plugin: { actorClients: [CLIENTS.console.client_id] },
      configuration: {
        findAccount(_ctx: KoaContextWithOIDC, sub: string) {
          if (!accounts.has(sub)) return undefined;
          return { accountId: sub, claims: () => ({ sub }) };
        },
      },
    });
    admin = await adminToken(tp);
  });
  after(() => tp.close());

  /** A delegation by the orders service: the reply as it comes. */
  function delegate(subjectToken: string, params: Record<string, string> = {}): Promise<Reply> {
    return exchange(tp, { subject_token: subjectToken, resource: DOWNSTREAM_API, ...params }, CLIENTS.orders);
  }

  function ok(reply: Reply): Record<string, unknown> {
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body;
  }

  /** bob's opaque access token for OPAQUE_API, which the orders service runs. */
  function bobsOpaqueToken(): Promise<string> {
    return userAccessToken(tp, 'bob', { resource: OPAQUE_API, scope: 'openid read write' });
  }

  async function revoke(token: string): Promise<void> {
    const revoked = await fetch(`${tp.base}/token/revocation`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token, client_id: CLIENTS.console.client_id }),
    });
    expect(revoked.status).to.equal(200);
  }

  /** What `check` answers once it holds, or its last answer after a few seconds (the end runs after the response). */
  async function eventually<T>(check: () => Promise<T>, holds: (value: T) => boolean): Promise<T> {
    let value = await check();
    for (let tries = 0; !holds(value) && tries < 50; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      value = await check();
    }
    return value;
  }

  describe('a revoked subject token takes what was exchanged from it along', () => {
    it('an opaque delegated token goes inactive at introspection, and its session ends', async () => {
      const subject = await bobsOpaqueToken();
      const delegated = ok(await delegate(subject, { resource: OPAQUE_API, scope: 'read' }))['access_token'] as string;
      const seen = await introspect(tp, delegated);
      expect(seen).to.include({ active: true, sub: 'bob' });

      await revoke(subject);
      expect(
        await eventually(
          () => introspect(tp, delegated),
          (answer) => answer['active'] === false,
        ),
      ).to.include({
        active: false,
      });
      const session = await eventually(
        () => apiRequest(tp, 'GET', `${SESSIONS}/${seen['impersonation_session'] as string}`, admin),
        (reply) => reply.body['state'] !== 'active',
      );
      expect(session.body).to.include({ state: 'ended', endReason: 'subject_token_revoked' });
    });

    it('a JWT delegated token is refused by the resource-server helper once the stop is on the feed', async () => {
      const verifier: ImpersonationVerifier = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: DOWNSTREAM_API,
        revocationsUri: `${tp.base}${SESSIONS}/revocations`,
        refreshInterval: 100,
        maxStaleness: 5000,
      });
      try {
        await verifier.ready();
        const subject = await bobsOpaqueToken();
        const delegated = ok(await delegate(subject))['access_token'] as string;
        expect(decodeJwt(delegated)).to.include({ sub: 'bob' });
        expect((await verifier.verify(delegated)).subject).to.equal('bob');

        await revoke(subject);
        const refused = await eventually(
          () =>
            verifier.verify(delegated).then(
              () => undefined,
              (error: { code?: string }) => error,
            ),
          (error) => error !== undefined,
        );
        expect(refused, 'the delegated JWT is still accepted').to.include({ code: 'session_revoked' });
      } finally {
        verifier.close();
      }
    });

    it('a delegation asked for from a revoked subject token is refused, and others are untouched', async () => {
      const revoked = await bobsOpaqueToken();
      const kept = await bobsOpaqueToken();
      const untouched = ok(await delegate(kept, { resource: OPAQUE_API, scope: 'read' }))['access_token'] as string;
      await revoke(revoked);
      expectError(await delegate(revoked, { resource: OPAQUE_API }), 400, 'invalid_request', /revoked/);
      expect(await introspect(tp, untouched)).to.include({ active: true });
    });
  });

  describe('each token validated as the type its request names (RFC 8693 2.1)', () => {
    it('refuses an opaque actor token sent as actor_token_type jwt, as an opaque subject token sent as jwt', async () => {
      const alice = await userAccessToken(tp, 'alice');
      expect(alice.split('.')).to.have.length(1);
      const subject = await userAccessToken(tp, 'bob', { resource: OPAQUE_API, scope: 'openid read' });
      expectError(
        await delegate(subject, { resource: OPAQUE_API, actor_token: alice, actor_token_type: JWT }),
        400,
        'invalid_request',
        /actor_token is not a JWT/,
      );
      expectError(
        await delegate(subject, { resource: OPAQUE_API, subject_token_type: JWT }),
        400,
        'invalid_request',
        /subject_token is not a JWT/,
      );
      // The same actor token, as the access token it is, acts.
      ok(await delegate(subject, { resource: OPAQUE_API, actor_token: alice, actor_token_type: ACCESS_TOKEN }));
    });
  });

  describe('an actor that still exists', () => {
    it('refuses an actor token of a user findAccount no longer knows, as impersonation refuses one', async () => {
      const dave = await userAccessToken(tp, 'dave');
      const subject = await bobsOpaqueToken();
      ok(await delegate(subject, { resource: OPAQUE_API, actor_token: dave, actor_token_type: ACCESS_TOKEN }));
      accounts.delete('dave');
      try {
        expectError(
          await delegate(subject, {
            resource: OPAQUE_API,
            scope: 'write',
            actor_token: dave,
            actor_token_type: ACCESS_TOKEN,
          }),
          400,
          'invalid_request',
          /actor_token names a user that no longer exists/,
        );
      } finally {
        accounts.add('dave');
      }
    });
  });
});
