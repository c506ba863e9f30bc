import { expect } from 'chai';
import express from 'express';
import Koa from 'koa';
import Provider from 'oidc-provider';
import {
  createImpersonation,
  createMemoryAdapter,
  type ApprovalOptions,
  type ImpersonationOptions,
} from '../../lib/index.js';
import { MINIMAL_CONFIGURATION, QUIET_CONFIGURATION as QUIET, RESOURCE_INDICATORS } from '../support/keys.js';
import { MANAGEMENT, startProvider } from '../support/provider.js';

/** What install() says of an app, or anything else that is no plain object of options, in their place. */
const APP_IN_PLACE_OF_OPTIONS =
  /^impersonation\.install: argument "installOptions" must be a plain object of install options, not an app; to serve the Management API from a host app, call install\(provider, \{ mountManagementApi: false \}\), then app\.use\(impersonation\.managementApi\(\)\) on a Koa app or app\.use\(impersonation\.managementApiHandler\(\)\) on Express or Fastify$/;

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

    it('refuses an unknown option, naming it and the option it is closest to', () => {
      const unknown: Array<[Record<string, unknown>, RegExp]> = [
        [
          { subjectTokenTtl: 120 },
          /^createImpersonation: option "subjectTokenTtl" is unknown; did you mean "subjectTokenTTL"\?$/,
        ],
        [
          { managmentResource: MANAGEMENT },
          /^createImpersonation: option "managmentResource" is unknown; did you mean "managementResource"\?$/,
        ],
        [
          { canExhcange: () => true },
          /^createImpersonation: option "canExhcange" is unknown; did you mean "canExchange"\?$/,
        ],
        [{ ttl: 60 }, /^createImpersonation: option "ttl" is unknown$/],
        [{ subjectTokenTtl: undefined }, /option "subjectTokenTtl" is unknown/],
        [
          { actorAuthentication: { maxage: 60 } },
          /^createImpersonation: option "actorAuthentication\.maxage" is unknown; did you mean "actorAuthentication\.maxAge"\?$/,
        ],
      ];
      for (const [options, message] of unknown) {
        expect(() => createImpersonation({ managementResource: MANAGEMENT, ...options }), message.source).to.throw(
          TypeError,
          message,
        );
      }
    });

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
        deliverOutbox: true,
      });
      expect(Object.isFrozen(options)).to.equal(true);
    });
  });

  describe('an option given as undefined is the option not given (`managementPath: process.env[...]`)', () => {
    /** Every option but the required one, each given as undefined: the type lists them all. */
    const everyOptionUndefined: { [Name in Exclude<keyof ImpersonationOptions, 'managementResource'>]-?: undefined } = {
      managementScope: undefined,
      readScope: undefined,
      revokeScope: undefined,
      managementPath: undefined,
      sessionsPath: undefined,
      idJagIssuance: undefined,
      telemetry: undefined,
      managementTokenTTL: undefined,
      managementTokenFormat: undefined,
      authenticateManagementRequest: undefined,
      subjectTokenTTL: undefined,
      accessTokenTTL: undefined,
      idJag: undefined,
      maxContextBytes: undefined,
      maxSubjectTokensPerClient: undefined,
      canImpersonate: undefined,
      canExchange: undefined,
      actorClients: undefined,
      actorAuthentication: undefined,
      auditLog: undefined,
      store: undefined,
      getCustomJwtClaims: undefined,
      customClaimsTimeout: undefined,
      environmentVariables: undefined,
      approvals: undefined,
      webhooks: undefined,
      ssf: undefined,
      deliverOutbox: undefined,
      delegation: undefined,
      authzen: undefined,
    };
    const customerResource = 'https://id.example.com/support-access';
    const everyApprovalOptionUndefined: { [Name in Exclude<keyof ApprovalOptions, 'customerResource'>]-?: undefined } =
      {
        customerScope: undefined,
        customerPath: undefined,
        requestsPath: undefined,
        require: undefined,
        maxGrantDuration: undefined,
        requestTTL: undefined,
        widenApprovedGrants: undefined,
        breakGlassClients: undefined,
        maxGrantsPerCustomer: undefined,
        maxPendingPerCustomer: undefined,
      };

    it('resolves every option given as undefined to its default, as if it were absent', () => {
      const { options } = createImpersonation({ managementResource: MANAGEMENT, ...everyOptionUndefined });
      expect(options).to.deep.equal(createImpersonation({ managementResource: MANAGEMENT }).options);
    });

    it('does the same inside actorAuthentication and approvals, still refusing a step-up that asks for nothing', () => {
      const { options } = createImpersonation({
        managementResource: MANAGEMENT,
        actorAuthentication: { maxAge: undefined, acrValues: ['urn:mfa'] },
        approvals: { customerResource, ...everyApprovalOptionUndefined },
      });
      expect(options.actorAuthentication).to.deep.equal({ maxAge: undefined, acrValues: ['urn:mfa'] });
      expect(options.approvals).to.deep.equal(
        createImpersonation({ managementResource: MANAGEMENT, approvals: { customerResource } }).options.approvals,
      );
      expect(() =>
        createImpersonation({
          managementResource: MANAGEMENT,
          actorAuthentication: { maxAge: undefined, acrValues: undefined },
        }),
      ).to.throw(TypeError, /^createImpersonation: option "actorAuthentication" needs "maxAge" or "acrValues"$/);
    });

    it('install(provider, { mountManagementApi: undefined }) mounts the Management API, as its default says', async () => {
      const tp = await startProvider({ mount: (_provider, install) => install({ mountManagementApi: undefined }) });
      try {
        tp.server.on('request', tp.provider.callback());
        const unauthenticated = await fetch(`${tp.base}/api/subject-tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        expect(unauthenticated.status).to.equal(401);
      } finally {
        await tp.close();
      }
    });
  });

  describe('configure()', () => {
    it('adds resource indicators, its client metadata property and a shared memory adapter, keeping the rest', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const configuration = impersonation.configure({
        scopes: ['openid', 'profile'],
        ttl: { AccessToken: 60 },
        features: { resourceIndicators: RESOURCE_INDICATORS },
      });
      // The management scopes are the Management API resource's, never OIDC scopes of the provider.
      expect(configuration.scopes).to.deep.equal(['openid', 'profile']);
      expect(configuration.extraClientMetadata?.properties).to.deep.equal([
        'impersonation_management_scope',
        'token_exchange_delegation',
      ]);
      expect(configuration.ttl).to.deep.equal({ AccessToken: 60 });
      expect(configuration.features?.resourceIndicators?.enabled).to.equal(true);
      expect(configuration.adapter).to.be.a('function');
      expect(configuration.extraTokenClaims).to.be.a('function');
    });

    it("keeps a deployment's adapter", () => {
      const adapter = createMemoryAdapter();
      const configuration = createImpersonation({ managementResource: MANAGEMENT }).configure({
        adapter,
        features: { resourceIndicators: RESOURCE_INDICATORS },
      });
      expect(configuration.adapter).to.equal(adapter);
    });

    it('refuses a configuration without getResourceServerInfo, with which no exchange could ever succeed', () => {
      for (const resourceIndicators of [undefined, { enabled: true }, { getResourceServerInfo: 'https://api' }]) {
        expect(() =>
          createImpersonation({ managementResource: MANAGEMENT }).configure({
            ...QUIET,
            features: { ...QUIET.features, ...(resourceIndicators && { resourceIndicators }) },
          } as never),
        ).to.throw(
          TypeError,
          /^impersonation\.configure: option "features\.resourceIndicators\.getResourceServerInfo" must be a function .*every token exchange is refused with invalid_target$/,
        );
      }
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

    it('serves managementApi() only after install()', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
      expect(() => impersonation.managementApi()).to.throw(TypeError, /install\(provider\) before managementApi/);
      impersonation.install(provider, { mountManagementApi: false });
      expect(impersonation.managementApi()).to.be.a('function');
    });

    it('refuses an Express app in place of its options, saying what to pass instead', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
      const app = express();
      expect(() => impersonation.install(provider, app as never)).to.throw(TypeError, APP_IN_PLACE_OF_OPTIONS);
      // Refused before anything changed: the right call still works.
      impersonation.install(provider, { mountManagementApi: false });
      expect(impersonation.managementApiHandler()).to.be.a('function');
    });

    it('refuses a Koa app, or any other object that is no plain object, in place of its options, with the same message', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
      for (const [name, notOptions] of [
        ['a Koa app', new Koa()],
        ['a Map', new Map([['mountManagementApi', false]])],
        ['an array', []],
        ['a string', 'mountManagementApi'],
        ['null', null],
      ] as const) {
        expect(() => impersonation.install(provider, notOptions as never), name).to.throw(
          TypeError,
          APP_IN_PLACE_OF_OPTIONS,
        );
      }
      // An object without a prototype is still options.
      impersonation.install(provider, Object.assign(Object.create(null) as object, { mountManagementApi: false }));
      expect(impersonation.managementApi()).to.be.a('function');
    });

    it('refuses an unknown install option, and a mountManagementApi that is not a boolean', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
      expect(() => impersonation.install(provider, { mountManagementAPI: false } as never)).to.throw(
        TypeError,
        /^impersonation\.install: option "mountManagementAPI" is unknown; did you mean "mountManagementApi"\?$/,
      );
      expect(() => impersonation.install(provider, { mountManagementApi: 'false' } as never)).to.throw(
        TypeError,
        /^impersonation\.install: option "mountManagementApi" must be true or false$/,
      );
    });

    it('refuses a second install() on a provider, by the same plugin or another', () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const other = createImpersonation({ managementResource: MANAGEMENT });
      const provider = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
      expect(() => other.install(provider)).to.throw(
        TypeError,
        /^impersonation\.install: the provider was built from the configure\(\) of another createImpersonation\(\)/,
      );
      impersonation.install(provider);
      for (const plugin of [impersonation, other]) {
        expect(() => plugin.install(provider)).to.throw(
          TypeError,
          /^impersonation\.install: the plugin is installed on this provider already: call install\(\) once per provider$/,
        );
        expect(() => plugin.install(provider, { mountManagementApi: false })).to.throw(
          TypeError,
          /installed on this provider already/,
        );
      }
    });

    it("refuses a configuration that went through configure() already, this plugin's or another's", () => {
      const impersonation = createImpersonation({ managementResource: MANAGEMENT });
      const configured = impersonation.configure(MINIMAL_CONFIGURATION);
      for (const plugin of [impersonation, createImpersonation({ managementResource: MANAGEMENT })]) {
        expect(() => plugin.configure({ ...configured })).to.throw(
          TypeError,
          /^impersonation\.configure: the configuration went through configure\(\) already, .*one impersonation plugin$/,
        );
      }
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
        impersonation.configure({ ...MINIMAL_CONFIGURATION, adapter: LegacyAdapter }),
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
