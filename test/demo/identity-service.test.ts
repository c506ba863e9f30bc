import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { exchange, quiet, requestImpersonation, REQUEST_TIMEOUT, signIn } from './helpers.js';

const ACTOR_MAX_AGE = 1;

describe("demo: the identity service's provider, mounted below /oidc of its parent app", function () {
  this.timeout(20_000);
  let demo: Demo;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, actorMaxAge: ACTOR_MAX_AGE });
  });

  after(async () => {
    await demo?.close();
  });

  it('lists none of the management scopes in discovery', async () => {
    const { managementScope, readScope, revokeScope } = demo.identity.impersonation.options;
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      const response = await fetch(`${demo.identity.issuer}${path}`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT) });
      const discovery = (await response.json()) as { scopes_supported: string[] };
      expect(discovery.scopes_supported, path).to.include('openid');
      expect(discovery.scopes_supported, path).to.not.include.any.members([managementScope, readScope, revokeScope]);
    }
  });

  it('answers both discovery documents of its issuer: OpenID Connect below /oidc, RFC 8414 with /oidc after the well-known path', async () => {
    const { managementScope, readScope, revokeScope } = demo.identity.impersonation.options;
    const urls = [
      `${demo.identity.issuer}/.well-known/openid-configuration`,
      `${demo.identity.baseUrl}/.well-known/oauth-authorization-server/oidc`,
    ];
    const documents: Array<Record<string, unknown>> = [];
    for (const url of urls) {
      const response = await fetch(url, { signal: AbortSignal.timeout(REQUEST_TIMEOUT) });
      expect(response.status, url).to.equal(200);
      const discovery = (await response.json()) as {
        issuer: string;
        token_endpoint: string;
        scopes_supported: string[];
      };
      expect(discovery.issuer, url).to.equal(demo.identity.issuer);
      expect(discovery.token_endpoint, url).to.equal(`${demo.identity.issuer}/token`);
      expect(discovery.scopes_supported, url).to.include('openid');
      expect(discovery.scopes_supported, url).to.not.include.any.members([managementScope, readScope, revokeScope]);
      documents.push(discovery);
    }
    expect(documents[1]).to.deep.equal(documents[0]);
  });

  it("tells a stale engineer's sign-in which max_age to sign in again with", async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const requested = await requestImpersonation(demo, alice, { userId: 'dave', reason: 'stale', ticketId: 'T-9' });
    expect(requested.status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, (ACTOR_MAX_AGE + 1.1) * 1000));
    const refused = await exchange(demo, requested.body['subjectToken'] as string, alice);
    expect(refused.status).to.equal(400);
    expect(refused.body).to.include({ error: 'insufficient_user_authentication', max_age: ACTOR_MAX_AGE });
  });

  it('gives the console no management scope, however it asks', async () => {
    const { managementScope, readScope, revokeScope } = demo.identity.impersonation.options;
    const alice = await signIn(demo, {
      login: 'alice',
      password: 'alice-password',
      scope: `openid profile ${managementScope} ${readScope} ${revokeScope}`,
    });
    const response = await fetch(`${demo.identity.issuer}/token/introspection`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: 'support-console', token: alice }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const introspection = (await response.json()) as { active: boolean; scope: string };
    expect(introspection.active).to.equal(true);
    expect(introspection.scope.split(' ').sort()).to.deep.equal(['openid', 'profile']);
  });
});

describe('demo: subjectTokensPerHour (SUBJECT_TOKENS_PER_HOUR)', function () {
  this.timeout(20_000);

  it("bounds the backend's subject tokens per hour: the second of two is refused with 429", async () => {
    const demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, subjectTokensPerHour: 1 });
    try {
      expect(demo.identity.impersonation.options.maxSubjectTokensPerClient).to.equal(1);
      const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
      const ask = { userId: 'dave', reason: 'bound', ticketId: 'T-10' };
      expect((await requestImpersonation(demo, alice, ask)).status).to.equal(200);
      const refused = await requestImpersonation(demo, alice, ask);
      expect(refused.status, JSON.stringify(refused.body)).to.equal(429);
    } finally {
      await demo.close();
    }
  });
});
