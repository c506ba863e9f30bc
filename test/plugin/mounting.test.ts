import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import Provider, { type Configuration } from 'oidc-provider';
import { FIXTURE_JWKS } from '../../fixtures/keys.js';
import { createImpersonation } from '../../lib/index.js';
import { RESOURCE_INDICATORS } from '../support/keys.js';
import { mountCallback, mountComposedNow, mounted as mountedWith, PREFIX, type Mount } from '../support/mount.js';
import {
  ACCESS_TOKEN,
  API,
  CLIENTS,
  MANAGEMENT,
  MANAGEMENT_SCOPE,
  READ_SCOPE,
  REVOKE_SCOPE,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  decodeJwt,
  exchange,
  expectError,
  introspect,
  managementRequest,
  subjectToken,
  tokenRequest,
  userAccessToken,
} from '../support/http.js';

const MAX_AGE = 1;
const ACR = 'urn:example:mfa';
const STEP_UP = { actorAuthentication: { maxAge: MAX_AGE, acrValues: [ACR] } };

const mounted = (mount: Mount, order: 'install, then mount' | 'mount, then install') =>
  mountedWith(mount, order, STEP_UP);

/** Every property the plugin needs from the provider, checked on one host. */
function holdsOnThisHost(host: () => { tp: TestProvider }): void {
  it('lists none of the management scopes in discovery', async () => {
    const { tp } = host();
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      const discovery = (await (await fetch(`${tp.base}${path}`)).json()) as { scopes_supported: string[] };
      expect(discovery.scopes_supported, path).to.include('openid');
      expect(discovery.scopes_supported, path).to.not.include.any.members([MANAGEMENT_SCOPE, READ_SCOPE, REVOKE_SCOPE]);
    }
  });

  it("adds max_age and acr_values to a stale actor sign-in's refusal", async () => {
    const { tp } = host();
    const actor = await userAccessToken(tp, 'alice');
    await new Promise((resolve) => setTimeout(resolve, (MAX_AGE + 1.1) * 1000));
    const refused = await exchange(tp, {
      subject_token: await subjectToken(tp),
      resource: API,
      actor_token: actor,
      actor_token_type: ACCESS_TOKEN,
    });
    expectError(refused, 400, 'insufficient_user_authentication');
    expect(refused.body).to.deep.equal({
      error: 'insufficient_user_authentication',
      error_description: `the actor signed in more than ${MAX_AGE} seconds ago; sign in again (max_age=${MAX_AGE})`,
      max_age: MAX_AGE,
      acr_values: ACR,
    });
  });

  it('gives an end user who asks for the management scopes a token without them', async () => {
    const { tp } = host();
    const token = await userAccessToken(tp, 'alice', {
      scope: `openid ${MANAGEMENT_SCOPE} ${READ_SCOPE} ${REVOKE_SCOPE}`,
    });
    const introspection = await introspect(tp, token);
    expect(introspection['active']).to.equal(true);
    expect(introspection['scope']).to.equal('openid');
    // Nor can it name the Management API as its resource.
    let refused: unknown;
    try {
      await userAccessToken(tp, 'alice', { scope: `openid ${MANAGEMENT_SCOPE}`, resource: MANAGEMENT });
    } catch (error) {
      refused = error;
    }
    expect(String(refused)).to.match(/invalid_target/);
  });

  it('hands management scopes through client_credentials only to the clients whose metadata lists them', async () => {
    const { tp } = host();
    const all = `${MANAGEMENT_SCOPE} ${READ_SCOPE} ${REVOKE_SCOPE}`;
    const backend = await tokenRequest(
      tp,
      { grant_type: 'client_credentials', scope: all, resource: MANAGEMENT },
      CLIENTS.backend,
    );
    expect(backend.status).to.equal(200);
    expect(decodeJwt(backend.body['access_token'] as string)).to.include({ scope: MANAGEMENT_SCOPE, aud: MANAGEMENT });
    const admin = await tokenRequest(
      tp,
      { grant_type: 'client_credentials', scope: all, resource: MANAGEMENT },
      CLIENTS.admin,
    );
    expect(admin.body['scope']).to.equal(`${READ_SCOPE} ${REVOKE_SCOPE}`);
    const plain = await tokenRequest(
      tp,
      { grant_type: 'client_credentials', scope: all, resource: MANAGEMENT },
      CLIENTS.noScopeBackend,
    );
    expectError(plain, 400, 'invalid_target');
    // And the Management API answers below the provider's mount path.
    const created = await managementRequest(tp, { userId: 'bob' }, backend.body['access_token'] as string);
    expect(created.status).to.equal(201);
  });
}

describe('the plugin, whatever the order of install() and mounting', function () {
  this.timeout(30_000);

  describe('a provider mounted the way koa-mount does, install() first', () => {
    let host: Awaited<ReturnType<typeof mounted>>;
    before(async () => {
      host = await mounted((prefix, provider) => mountComposedNow(prefix, provider), 'install, then mount');
    });
    after(() => host?.tp.close());
    holdsOnThisHost(() => host);
  });

  describe('a provider behind provider.callback() (Express, Fastify, plain Node), install() first', () => {
    let host: Awaited<ReturnType<typeof mounted>>;
    before(async () => {
      host = await mounted(mountCallback, 'install, then mount');
    });
    after(() => host?.tp.close());
    holdsOnThisHost(() => host);
  });

  describe('a provider mounted the way koa-mount does, install() after', () => {
    let host: Awaited<ReturnType<typeof mounted>>;
    before(async () => {
      host = await mounted((prefix, provider) => mountComposedNow(prefix, provider), 'mount, then install');
    });
    after(() => host?.tp.close());

    it('keeps discovery and end-user tokens free of the management scopes', async () => {
      const { tp } = host;
      const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as {
        scopes_supported: string[];
      };
      expect(discovery.scopes_supported).to.not.include.any.members([MANAGEMENT_SCOPE, READ_SCOPE, REVOKE_SCOPE]);
      const token = await userAccessToken(tp, 'alice', { scope: `openid ${MANAGEMENT_SCOPE}` });
      expect((await introspect(tp, token))['scope']).to.equal('openid');
    });

    it("refuses the Management API's token with a description that says what to change", async () => {
      // koa-mount leaves no trace install() could see; the first request through the mount is refused.
      expect(host.installError).to.equal(undefined);
      const refused = await tokenRequest(
        host.tp,
        { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
        CLIENTS.backend,
      );
      expect(refused.status).to.equal(500);
      expect(refused.body['error']).to.equal('server_error');
      expect(refused.body['error_description']).to.match(/install\(\) right after new Provider\(\)/);
      expect(refused.body['error_description']).to.match(/mountManagementApi: false/);
    });

    it('refuses an exchange the same way', async () => {
      const refused = await exchange(host.tp, { subject_token: 'ist_anything', resource: API });
      expect(refused.status).to.equal(500);
      expect(refused.body['error_description']).to.match(/install\(\) right after new Provider\(\)/);
    });
  });

  describe('a provider behind provider.callback(), install() after', () => {
    it('throws from install(), saying what to change', async () => {
      const host = await mounted(mountCallback, 'mount, then install');
      try {
        expect(String(host.installError)).to.match(/TypeError: impersonation.install\(\) ran after/);
        expect(String(host.installError)).to.match(/mountManagementApi: false/);
      } finally {
        await host.tp.close();
      }
    });
  });

  describe('install(provider, { mountManagementApi: false }) after mounting, the parent serving managementApi()', () => {
    let host: Awaited<ReturnType<typeof mounted>>;
    let parentApi: TestProvider;
    before(async () => {
      const server: Server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const parent = new Koa();
      const tp = await startProvider({
        issuer: `${origin}${PREFIX}`,
        plugin: STEP_UP,
        mount: (provider, install, impersonation) => {
          parent.use(mountCallback(PREFIX, provider));
          install({ mountManagementApi: false });
          parent.use(impersonation.managementApi());
        },
      });
      server.on('request', parent.callback());
      const close = tp.close;
      const closeAll = async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await close();
      };
      host = { tp: { ...tp, base: `${origin}${PREFIX}`, close: closeAll }, origin };
      // The Management API is the parent's, at the origin's /api; the token endpoint stays below /oidc.
      parentApi = { ...host.tp, base: origin };
    });
    after(() => host?.tp.close());

    holdsOnThisHostWithApiAt(
      () => host,
      () => parentApi,
    );
  });
});

/** As holdsOnThisHost, for a host whose Management API is served by the parent app. */
function holdsOnThisHostWithApiAt(host: () => { tp: TestProvider }, api: () => TestProvider): void {
  it('lists none of the management scopes in discovery, and serves the Management API from the parent', async () => {
    const { tp } = host();
    const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
    };
    expect(discovery.scopes_supported).to.not.include.any.members([MANAGEMENT_SCOPE, READ_SCOPE, REVOKE_SCOPE]);
    const m2m = await tokenRequest(
      tp,
      { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
      CLIENTS.backend,
    );
    expect(m2m.status).to.equal(200);
    const created = await managementRequest(api(), { userId: 'bob' }, m2m.body['access_token'] as string);
    expect(created.status).to.equal(201);
    expect((await managementRequest(tp, { userId: 'bob' }, m2m.body['access_token'] as string)).status).to.equal(404);
  });

  it("adds max_age and acr_values to a stale actor sign-in's refusal", async () => {
    const { tp } = host();
    const actor = await userAccessToken(tp, 'alice');
    await new Promise((resolve) => setTimeout(resolve, (MAX_AGE + 1.1) * 1000));
    const m2m = await tokenRequest(
      tp,
      { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
      CLIENTS.backend,
    );
    const created = await managementRequest(api(), { userId: 'bob' }, m2m.body['access_token'] as string);
    const refused = await exchange(tp, {
      subject_token: created.body['subjectToken'] as string,
      resource: API,
      actor_token: actor,
      actor_token_type: ACCESS_TOKEN,
    });
    expect(refused.body).to.include({ error: 'insufficient_user_authentication', max_age: MAX_AGE, acr_values: ACR });
  });
}

describe("docs/adding-to-your-deployment.md's provider below a mount path", () => {
  /** The section's first block, which builds the provider every host below it mounts. */
  function sectionProvider(): string {
    const page = readFileSync(new URL('../../../docs/adding-to-your-deployment.md', import.meta.url), 'utf8');
    const block = /^## Mounting the provider\n[\s\S]*?^```js\n([\s\S]*?)^```$/m.exec(page);
    if (!block) throw new Error('the "Mounting the provider" section has no js block');
    return block[1]!;
  }

  it('is built as written: the interactions.url it sets is in effect, and oidc-provider warns of no development interactions', () => {
    // A reader's configuration, as oidc-provider defaults it: its development interactions on.
    const configuration: Configuration = { jwks: FIXTURE_JWKS, features: { resourceIndicators: RESOURCE_INDICATORS } };
    const impersonation = createImpersonation({ managementResource: MANAGEMENT });
    const code = sectionProvider().replace(/^import Provider from 'oidc-provider';$/m, '');
    // The docs' own code, run as a reader copies it.
    const build = new Function('Provider', 'impersonation', 'configuration', `${code}\nreturn provider;`) as (
      ...args: unknown[]
    ) => Provider;
    const warnings: string[] = [];
    const warn = console.warn;
    console.warn = (...args: unknown[]) => warnings.push(args.join(' '));
    let provider: Provider;
    try {
      provider = build(Provider, impersonation, configuration);
    } finally {
      console.warn = warn;
    }
    expect(provider.issuer).to.equal('https://id.example.com/oidc');
    expect(warnings.filter((warning) => /devInteractions|interactions\.url/.test(warning))).to.deep.equal([]);
  });
});
