import { expect } from 'chai';
import type { ClientMetadata, Configuration } from 'oidc-provider';
import { instantiateAdapter } from '../../lib/adapters/contracts/entries.js';
import { createImpersonation } from '../../lib/index.js';
import { RESOURCE_INDICATORS } from '../support/keys.js';
import { MANAGEMENT, MANAGEMENT_SCOPE, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { decodeJwt, expectError, tokenRequest } from '../support/http.js';
import { scaled } from '../support/time.js';

const M2M = {
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
} as const satisfies Partial<ClientMetadata>;

function configure(configuration: Configuration): Configuration {
  return createImpersonation({ managementResource: MANAGEMENT }).configure({
    ...configuration,
    features: { resourceIndicators: RESOURCE_INDICATORS, ...configuration.features },
  });
}

describe('client metadata: impersonation_management_scope', () => {
  describe('at start-up, configure() refuses', () => {
    it('a static client that still lists a management scope in scope, naming it and the new property', () => {
      expect(() =>
        configure({ clients: [{ client_id: 'old-backend', client_secret: 's', ...M2M, scope: MANAGEMENT_SCOPE }] }),
      ).to.throw(
        TypeError,
        /client old-backend: scope lists subject-tokens:create, .* list it in impersonation_management_scope instead/,
      );
    });

    it('a management scope in the provider scopes', () => {
      expect(() => configure({ scopes: ['openid', READ_SCOPE] })).to.throw(
        TypeError,
        /scopes lists impersonations:read/,
      );
    });

    for (const [name, value] of [
      ['an unknown scope', 'subject-tokens:create admin'],
      ['an empty list', ''],
      ['a list that is not a string', ['subject-tokens:create']],
    ] as const) {
      it(`${name} in impersonation_management_scope`, () => {
        expect(() =>
          configure({ clients: [{ client_id: 'm2m', ...M2M, impersonation_management_scope: value }] }),
        ).to.throw(TypeError, /client m2m: impersonation_management_scope must be a space-separated list of/);
      });
    }

    it('impersonation_management_scope on a client without client_credentials', () => {
      expect(() =>
        configure({
          clients: [
            { client_id: 'spa', redirect_uris: ['https://a/cb'], impersonation_management_scope: MANAGEMENT_SCOPE },
          ],
        }),
      ).to.throw(TypeError, /client spa: impersonation_management_scope needs the client_credentials grant type/);
    });

    it('a deployment that declares the property itself', () => {
      expect(() => configure({ extraClientMetadata: { properties: ['impersonation_management_scope'] } })).to.throw(
        TypeError,
        /must not list impersonation_management_scope/,
      );
    });
  });

  it("keeps the deployment's own extra metadata and its validator", () => {
    const seen: string[] = [];
    const configuration = configure({
      extraClientMetadata: {
        properties: ['tenant'],
        validator: (_ctx, key, value) => {
          seen.push(`${key}=${String(value)}`);
        },
      },
    });
    const { properties, validator } = configuration.extraClientMetadata!;
    expect(properties).to.deep.equal(['tenant', 'impersonation_management_scope', 'token_exchange_delegation']);
    const metadata = { client_id: 'c', grant_types: ['client_credentials'], tenant: 'acme' } as ClientMetadata;
    validator!(undefined, 'tenant', 'acme', metadata);
    validator!(undefined, 'impersonation_management_scope', undefined, metadata);
    expect(seen).to.deep.equal(['tenant=acme']);
  });

  describe('clients the provider loads from its adapter (registered ones)', () => {
    let tp: TestProvider;
    before(async () => {
      tp = await startProvider();
      const clients = instantiateAdapter(tp.adapter, 'Client');
      await clients.upsert(
        'stored-old',
        { client_id: 'stored-old', client_secret: 'old-secret', ...M2M, scope: MANAGEMENT_SCOPE },
        3600,
      );
      await clients.upsert(
        'stored-new',
        {
          client_id: 'stored-new',
          client_secret: 'new-secret',
          ...M2M,
          impersonation_management_scope: `${MANAGEMENT_SCOPE} ${MANAGEMENT_SCOPE}`,
        },
        3600,
      );
    });
    after(() => tp?.close());

    it('refuses one still written the old way, saying what to change', async () => {
      const refused = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', scope: MANAGEMENT_SCOPE, resource: MANAGEMENT },
        { client_id: 'stored-old', client_secret: 'old-secret' },
      );
      expectError(refused, 400, 'invalid_client_metadata', /list it in impersonation_management_scope instead/);
    });

    it('hands one written the new way its management scope', async () => {
      const issued = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', scope: `${MANAGEMENT_SCOPE} ${READ_SCOPE}`, resource: MANAGEMENT },
        { client_id: 'stored-new', client_secret: 'new-secret' },
      );
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      expect(decodeJwt(issued.body['access_token'] as string)).to.include({ scope: MANAGEMENT_SCOPE, aud: MANAGEMENT });
    });
  });
  describe('dynamic client registration (RFC 7591)', () => {
    let tp: TestProvider;
    before(async () => {
      tp = await startProvider({
        configuration: {
          features: {
            devInteractions: { enabled: false },
            clientCredentials: { enabled: true },
            registration: { enabled: true },
            resourceIndicators: RESOURCE_INDICATORS,
          },
        },
      });
    });
    after(() => tp.close());

    function register(metadata: Record<string, unknown>) {
      return fetch(`${tp.base}/reg`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...M2M, ...metadata }),
        signal: AbortSignal.timeout(scaled(10_000)),
      });
    }

    it('refuses a client that names itself a Management API scope; registers one that does not', async () => {
      const refused = await register({ impersonation_management_scope: MANAGEMENT_SCOPE });
      expect(refused.status).to.equal(400);
      expect(await refused.json()).to.deep.equal({
        error: 'invalid_client_metadata',
        error_description: 'impersonation_management_scope cannot be set through client registration',
      });
      const registered = await register({});
      expect(registered.status).to.equal(201);
      const client = (await registered.json()) as { client_id: string; client_secret: string };
      const token = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', resource: MANAGEMENT, scope: MANAGEMENT_SCOPE },
        client,
      );
      expect(token.status).to.equal(400);
      expect(token.body['error']).to.equal('invalid_target');
    });
  });
});
