import { expect } from 'chai';
import Provider from 'oidc-provider';
import { createImpersonation, createMemoryAdapter, type ImpersonationOptions } from '../lib/index.js';
import { QUIET_CONFIGURATION as QUIET } from './support/keys.js';
import { MANAGEMENT, startProvider } from './support/provider.js';

describe('createImpersonation: options, configure() and install()', () => {
  describe('options are validated up front, naming the culprit', () => {
    const invalid: Array<[string, Partial<ImpersonationOptions>, RegExp]> = [
      ['a missing managementResource', { managementResource: undefined as never }, /managementResource/],
      ['a relative managementResource', { managementResource: '/api' }, /managementResource/],
      [
        'a managementResource with a fragment',
        { managementResource: 'https://id.example.com/api#x' },
        /managementResource/,
      ],
      ['two management scopes', { managementScope: 'a b' }, /managementScope/],
      ['a relative managementPath', { managementPath: 'api/subject-tokens' }, /managementPath/],
      ['an unknown managementTokenFormat', { managementTokenFormat: 'paseto' as never }, /managementTokenFormat/],
      ['a zero subjectTokenTTL', { subjectTokenTTL: 0 }, /subjectTokenTTL/],
      ['a fractional subjectTokenTTL', { subjectTokenTTL: 1.5 }, /subjectTokenTTL/],
      ['a subjectTokenTTL over an hour', { subjectTokenTTL: 3601 }, /subjectTokenTTL/],
      ['a negative accessTokenTTL', { accessTokenTTL: -5 }, /accessTokenTTL/],
      ['a string maxContextBytes', { maxContextBytes: '2kb' as never }, /maxContextBytes/],
      ['a zero customClaimsTimeout', { customClaimsTimeout: 0 }, /customClaimsTimeout/],
      ['a non-function hook', { getCustomJwtClaims: 'claims' as never }, /getCustomJwtClaims/],
      ['a non-function policy', { canExchange: true as never }, /canExchange/],
      ['non-string environment variables', { environmentVariables: { PORT: 3000 } as never }, /environmentVariables/],
    ];
    for (const [name, options, message] of invalid) {
      it(`refuses ${name}`, () => {
        expect(() => createImpersonation({ managementResource: MANAGEMENT, ...options })).to.throw(TypeError, message);
      });
    }

    it('refuses a non-object', () => {
      expect(() => createImpersonation(null as never)).to.throw(TypeError, /must be an object/);
    });

    it('fills in the documented defaults', () => {
      const { options } = createImpersonation({ managementResource: MANAGEMENT });
      expect(options).to.include({
        managementScope: 'subject-tokens:create',
        managementPath: '/api/subject-tokens',
        managementTokenTTL: 300,
        managementTokenFormat: 'jwt',
        subjectTokenTTL: 60,
        accessTokenTTL: 900,
        maxContextBytes: 2048,
        customClaimsTimeout: 2000,
      });
      expect(Object.isFrozen(options)).to.equal(true);
    });
  });

  describe('configure()', () => {
    it('adds resource indicators, its client metadata property and a shared memory adapter, keeping the rest', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const configuration = impersonation.configure({ scopes: ['openid', 'profile'], ttl: { AccessToken: 60 } });
      // The management scopes are the Management API resource's, never OIDC scopes of the provider.
      expect(configuration.scopes).to.deep.equal(['openid', 'profile']);
      expect(configuration.extraClientMetadata?.properties).to.deep.equal(['impersonation_management_scope']);
      expect(configuration.ttl).to.deep.equal({ AccessToken: 60 });
      expect(configuration.features?.resourceIndicators?.enabled).to.equal(true);
      expect(configuration.adapter).to.be.a('function');
      expect(configuration.extraTokenClaims).to.be.a('function');
    });

    it("keeps a deployment's adapter", () => {
      const adapter = createMemoryAdapter();
      const configuration = createImpersonation({ managementResource: MANAGEMENT }).configure({ adapter });
      expect(configuration.adapter).to.equal(adapter);
    });

    it('refuses a configuration that disables resource indicators', () => {
      expect(() =>
        createImpersonation({ managementResource: MANAGEMENT }).configure({
          features: { resourceIndicators: { enabled: false } },
        }),
      ).to.throw(TypeError, /resourceIndicators/);
    });
  });

  describe('install()', () => {
    it('refuses a provider that was not built from configure()', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', { ...QUIET, adapter: createMemoryAdapter() });
      expect(() => impersonation.install(provider)).to.throw(TypeError, /configure/);
    });

    it('refuses the former { app } option, saying what replaces it; managementApi() only after install()', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure({ ...QUIET }));
      expect(() => impersonation.managementApi()).to.throw(TypeError, /install\(provider\) before managementApi/);
      expect(() => impersonation.install(provider, { app: {} } as never)).to.throw(
        TypeError,
        /mountManagementApi: false.*app\.use\(impersonation\.managementApi\(\)\)/,
      );
      impersonation.install(provider, { mountManagementApi: false });
      expect(impersonation.managementApi()).to.be.a('function');
    });

    it('refuses an adapter without the atomic consumeOnce, rather than trusting find-then-consume', () => {
      class LegacyAdapter {
        async upsert() {}
        async find() {
          return undefined;
        }
        async findByUid() {
          return undefined;
        }
        async findByUserCode() {
          return undefined;
        }
        async consume() {}
        async destroy() {}
        async revokeByGrantId() {}
      }
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider(
        'http://127.0.0.1:1',
        impersonation.configure({ ...QUIET, adapter: LegacyAdapter }),
      );
      expect(() => impersonation.install(provider)).to.throw(TypeError, /consumeOnce/);
    });

    it('accepts an adapter factory function as well as a class', async () => {
      const Memory = createMemoryAdapter();
      const tp = await startProvider({ adapter: (name: string) => new Memory(name) });
      try {
        const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as Record<
          string,
          string[]
        >;
        expect(discovery['grant_types_supported']).to.include('urn:ietf:params:oauth:grant-type:token-exchange');
      } finally {
        await tp.close();
      }
    });

    it('mounts the Management API at managementPath', async () => {
      const tp = await startProvider({ plugin: { managementPath: '/internal/impersonation' } });
      try {
        const moved = await fetch(`${tp.base}/internal/impersonation`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        expect(moved.status).to.equal(401);
        const old = await fetch(`${tp.base}/api/subject-tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        expect(old.status).to.equal(404);
      } finally {
        await tp.close();
      }
    });
  });
});
