import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import type Koa from 'koa';
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import {
  createImpersonation,
  type Impersonation,
  type ImpersonationOptions,
  type InstallOptions,
  type MemoryAdapterClass,
} from '../../lib/index.js';
import { testAdapter } from './adapters.js';
import { TEST_JWKS } from './keys.js';
import type { AdapterSource } from '../../lib/adapters/contract.js';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
export const API = 'https://api.example.com';
export const OPAQUE_API = 'https://opaque.example.com';
export const ACTOR_API = 'https://actor.example.com';
/** JWT access tokens that expire after 2 s. */
export const SHORT_API = 'https://short.example.com';
/** A family of resource servers, one per tenant: any indicator under it is accepted, as a deployment may do. */
export const TENANT_API = 'https://tenants.example.com/';
export const MANAGEMENT = 'https://id.example.com/api';
export const MANAGEMENT_SCOPE = 'subject-tokens:create';
export const READ_SCOPE = 'impersonations:read';
export const REVOKE_SCOPE = 'impersonations:revoke';
export const REDIRECT_URI = 'http://127.0.0.1/callback';

export const CLIENTS = {
  console: { client_id: 'support-console' },
  mtls: { client_id: 'mtls-console' },
  web: { client_id: 'support-web', client_secret: 'support-web-secret' },
  backend: { client_id: 'impersonation-backend', client_secret: 'backend-secret' },
  /** The support team's administration: lists and revokes impersonations. */
  admin: { client_id: 'impersonation-admin', client_secret: 'admin-secret' },
  noScopeBackend: { client_id: 'plain-m2m', client_secret: 'plain-m2m-secret' },
  notAllowed: { client_id: 'no-exchange', client_secret: 'no-exchange-secret' },
} as const;

export const CLIENT_CERT_HEADER = 'x-client-cert';

export const USERS = ['alice', 'bob', 'carol', 'admin'];

export interface TestProvider {
  provider: Provider;
  issuer: string;
  /** Base URL of the HTTP server (token endpoint at `${base}/token`). */
  base: string;
  server: Server;
  adapter: AdapterSource;
  /** What the app reported as failures (5xx): kept here instead of Koa printing each stack. */
  appErrors: unknown[];
  close(): Promise<void>;
}

export interface TestProviderOptions {
  plugin?: Partial<ImpersonationOptions>;
  configuration?: Partial<Configuration>;
  adapter?: AdapterSource;
  /** Default: the base URL. Several processes acting as one provider share one. */
  issuer?: string;
  /**
   * Mounts the provider on a host of the test's own, calling `install` (the
   * plugin's install() on this provider) when it wants; the provider's own
   * server then serves nothing. Interactions are under the issuer's path.
   */
  mount?: (
    provider: Provider,
    install: (options?: InstallOptions) => void,
    impersonation: Impersonation,
  ) => void | Promise<void>;
}

/** A real provider with the plugin, listening on 127.0.0.1 on a free port. */
export async function startProvider(options: TestProviderOptions = {}): Promise<TestProvider> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const issuer = options.issuer ?? base;
  const adapter = options.adapter ?? (await testAdapter());

  const impersonation = createImpersonation({
    managementResource: MANAGEMENT,
    ...options.plugin,
  });
  const configuration = impersonation.configure({
    adapter,
    jwks: TEST_JWKS,
    clients: [
      {
        client_id: CLIENTS.console.client_id,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', TOKEN_EXCHANGE],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
      },
      {
        client_id: CLIENTS.mtls.client_id,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', TOKEN_EXCHANGE],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
        tls_client_certificate_bound_access_tokens: true,
      },
      {
        ...CLIENTS.web,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code', TOKEN_EXCHANGE],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
      },
      {
        ...CLIENTS.backend,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        impersonation_management_scope: MANAGEMENT_SCOPE,
      },
      {
        ...CLIENTS.admin,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        impersonation_management_scope: `${READ_SCOPE} ${REVOKE_SCOPE}`,
      },
      {
        ...CLIENTS.noScopeBackend,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
      },
      {
        ...CLIENTS.notAllowed,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: [REDIRECT_URI],
      },
    ],
    findAccount(_ctx: KoaContextWithOIDC, sub: string) {
      if (!USERS.includes(sub)) return undefined;
      return { accountId: sub, claims: () => ({ sub, name: sub }) };
    },
    scopes: ['openid', 'profile', 'offline_access'],
    claims: { openid: ['sub'], profile: ['name'] },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Stands in for a TLS-terminating proxy that forwards the client certificate.
      mTLS: {
        enabled: true,
        certificateBoundAccessTokens: true,
        getCertificate: (ctx) => {
          const header = ctx.get(CLIENT_CERT_HEADER);
          return header ? decodeURIComponent(header) : undefined;
        },
      },
      // The policies and the logout page are spelt out, as a deployment must, so oidc-provider prints no notice.
      introspection: {
        enabled: true,
        allowedPolicy: (ctx, client, token) =>
          client.clientAuthMethod !== 'none' || token.clientId === ctx.oidc.client?.clientId,
      },
      revocation: {
        enabled: true,
        allowedPolicy: (_ctx, client, token) => {
          if (token.clientId === client.clientId) return true;
          if (client.clientAuthMethod === 'none') return false;
          throw new errors.InvalidRequest('client is not authorized to revoke the presented token');
        },
      },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: (ctx, form) => {
          ctx.body = `<!DOCTYPE html><title>Sign out</title>${form}<button form="op.logoutForm" name="logout" value="yes">Sign out</button>`;
        },
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo(_ctx, resource) {
          switch (resource) {
            case API:
              return { scope: 'profile:read profile:write', accessTokenFormat: 'jwt', accessTokenTTL: 3600 };
            case OPAQUE_API:
              return { scope: 'read write', accessTokenFormat: 'opaque', accessTokenTTL: 120 };
            case ACTOR_API:
              return { scope: 'openid openidx profile:read', accessTokenFormat: 'jwt' };
            case SHORT_API:
              return { scope: 'openid', accessTokenFormat: 'jwt', accessTokenTTL: 3 };
            default:
              if (resource.startsWith(TENANT_API)) return { scope: 'read', accessTokenFormat: 'jwt' };
              throw new errors.InvalidTarget();
          }
        },
      },
    },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      Grant: 3600,
      Interaction: 600,
      Session: 3600,
      AuthorizationCode: 60,
      IdToken: 3600,
    },
    interactions: {
      url: (_ctx, interaction) => `${new URL(issuer).pathname.replace(/\/$/, '')}/interaction/${interaction.uid}`,
    },
    ...options.configuration,
  });

  const provider = new Provider(issuer, configuration);
  const appErrors: unknown[] = [];
  // Tests provoke outages on purpose; each asserts the answer, so the stack need not be printed.
  const keepErrors = () => (provider as Koa).on('error', (error: unknown) => appErrors.push(error));
  if (options.mount) {
    provider.use(loginRoutes(provider));
    await options.mount(provider, (installOptions) => impersonation.install(provider, installOptions), impersonation);
    keepErrors();
  } else {
    impersonation.install(provider);
    keepErrors();
    provider.use(loginRoutes(provider));
    server.on('request', provider.callback());
  }
  return {
    provider,
    issuer,
    base,
    server,
    adapter,
    appErrors,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A scripted login: POST /interaction/:uid/login with `login` (and `acr`, when given), granting what was asked. */
function loginRoutes(provider: Provider): Koa.Middleware {
  return async (ctx, next) => {
    const match = /^\/interaction\/([^/]+)\/login$/.exec(ctx.path);
    if (!match || ctx.method !== 'POST') return next();
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const login = String(ctx.query['login']);
    const acr = ctx.query['acr'];
    const grant = new provider.Grant({ accountId: login, clientId: String(details.params['client_id']) });
    grant.addOIDCScope(String(details.params['scope']));
    const resource = details.params['resource'];
    if (typeof resource === 'string') grant.addResourceScope(resource, String(details.params['scope']));
    const grantId = await grant.save();
    ctx.redirect(
      await provider.interactionResult(
        ctx.req,
        ctx.res,
        {
          login: { accountId: login, ...(typeof acr === 'string' ? { acr } : {}) },
          consent: { grantId },
        },
        { mergeWithLastSubmission: false },
      ),
    );
  };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export type { MemoryAdapterClass };
