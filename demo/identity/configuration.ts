/**
 * The identity service's configuration: the plugin's options (who may be
 * impersonated, what an exchange may grant, the claims it adds) and
 * oidc-provider's (clients, scopes, lifetimes, features).
 */
import { errors, type Configuration } from 'oidc-provider';
import {
  createImpersonation,
  EVENTS,
  TOKEN_EXCHANGE_GRANT,
  type AuditSink,
  type Impersonation,
} from '../../lib/index.js';
import type { DemoKeys } from '../keys.js';
import {
  API_RESOURCE,
  API_SCOPES,
  CLIENTS,
  ORDERS_AUTH_ISSUER,
  ORDERS_RESOURCE,
  ORDERS_SCOPES,
  type DemoSecrets,
} from '../seed.js';
import type { DemoAccounts } from './accounts.js';
import { agentPolicy } from './agent-policy.js';
import type { SupportPolicy } from './support-policy.js';
import { logoutPage, providerErrorPage, signedOutPage } from './views.js';

/** The clients that get no consent screen, and the only ones the demo resource API issues tokens to. */
export const FIRST_PARTY: ReadonlySet<string> = new Set([CLIENTS.console, CLIENTS.web]);

const DEFAULT_ACTOR_MAX_AGE = 300;
/** The longest support access a customer may give or approve: a week. */
const MAX_GRANT_DURATION = 7 * 24 * 3600;

export interface ImpersonationSettings {
  managementResource: string;
  /** Who may act for whom (support-policy.ts). */
  policy: SupportPolicy;
  /** The users, for which ID-JAGs agents may have (agent-policy.ts). */
  accounts: DemoAccounts;
  /** Subject-token lifetime, seconds. Default: the plugin's. */
  subjectTokenTTL?: number;
  /** Subject tokens the backend may create per hour. Default: the plugin's (10,000). */
  subjectTokensPerHour?: number;
  auditLog: AuditSink;
  /** How recent the engineer's sign-in must be for an exchange, seconds. Default 300. */
  actorMaxAge?: number;
  /** Resource indicator of the customer's support-access API (where customers give and answer). */
  customerResource: string;
  /** How long a request waits for the customer's answer, seconds. Default: the plugin's (900). */
  approvalRequestTTL?: number;
  /** Where the backend receives webhooks for the customers' notifications, and the secret that signs them. */
  notifications?: { url: string; secret: string };
  /** The origin the Management API (and the SSF stream API with it) is served at: the parent app's root. */
  apiOrigin: string;
}

/** The SSF scopes a demo receiver may obtain: the plugin's stream scope and the CAEP Interoperability Profile's. */
const SSF_RECEIVER_SCOPES = 'ssf:streams ssf.manage ssf.read';

export function demoImpersonation(settings: ImpersonationSettings): Impersonation {
  return createImpersonation({
    managementResource: settings.managementResource,
    ...(settings.subjectTokenTTL === undefined ? {} : { subjectTokenTTL: settings.subjectTokenTTL }),
    ...(settings.subjectTokensPerHour === undefined
      ? {}
      : { maxSubjectTokensPerClient: settings.subjectTokensPerHour }),
    // Protected accounts, the ticket, the agent's organisation and tier (support-policy.ts, docs/policy.md).
    canImpersonate: settings.policy.canImpersonate,
    // The sample function of the spec (2.7).
    auditLog: settings.auditLog,
    // Impersonation needs a recent sign-in of the engineer (step-up, RFC 9470).
    actorAuthentication: { maxAge: settings.actorMaxAge ?? DEFAULT_ACTOR_MAX_AGE },
    // The agent's organisation again, their tier's scope ceiling, and changes only in an impersonation
    // asked for them: any other is narrowed to reading.
    canExchange: settings.policy.canExchange,
    approvals: {
      customerResource: settings.customerResource,
      // What each customer asks for (seed.ts): bob has his say, dave lets support in without asking.
      require: ({ account }) => (account['approval'] === 'grant' ? 'grant' : 'none'),
      maxGrantDuration: MAX_GRANT_DURATION,
      ...(settings.approvalRequestTTL === undefined ? {} : { requestTTL: settings.approvalRequestTTL }),
      // Only the on-call team's own client may bypass a customer, never the console's backend.
      breakGlassClients: [CLIENTS.emergency],
    },
    // Each impersonation started and stopped, to the backend, which tells the customer.
    ...(settings.notifications
      ? {
          webhooks: {
            subscriptions: [
              {
                id: 'customer-notifications',
                url: settings.notifications.url,
                events: [EVENTS.exchangeSucceeded, EVENTS.sessionRevoked, EVENTS.sessionEnded],
                secret: settings.notifications.secret,
              },
            ],
          },
        }
      : {}),
    // ID-JAGs for agents that hold a customer's sign-in, to act at the orders application (agent-policy.ts).
    idJagIssuance: { canIssue: agentPolicy(settings.accounts) },
    // The SSF transmitter: every stopped impersonation as a CAEP session-revoked SET (docs/ssf.md).
    ssf: {
      // The stream API is the parent app's, at the origin's root, not below the issuer's /oidc.
      baseUrl: settings.apiOrigin,
      // Receivers on this machine (the resource API, yours under test) may be pushed to over plain http.
      pushAllowList: ['localhost', '127.0.0.1', '::1'],
      // A verification may be asked for every second: the demo's receivers use it as a heartbeat.
      minVerificationInterval: 1,
      // Every resource API of the demo polls a stream of its own, and one stopped without a clean exit
      // (as tests and Ctrl+C often stop it) leaves its stream behind on a store that outlives it.
      maxStreams: 1000,
      maxStreamsPerReceiver: 500,
      pollInterval: 250,
    },
    getCustomJwtClaims: ({ context }) => {
      if (context.grant.type !== TOKEN_EXCHANGE_GRANT) return {};
      const { ticketId, reason, supportEngineerId } = context.grant.subjectTokenContext;
      return {
        impersonation_context: { ticket_id: ticketId, reason, support_engineer: supportEngineerId },
      };
    },
  });
}

export interface ProviderSettings {
  impersonation: Impersonation;
  policy: SupportPolicy;
  accounts: DemoAccounts;
  secrets: DemoSecrets;
  keys: DemoKeys;
  /** The backends whose consoles and sign-ins this identity service serves: redirect URIs and CORS origins. */
  backendOrigins: readonly string[];
}

/** oidc-provider's configuration, before the plugin's `configure()` adds to it. */
export function providerConfiguration(settings: ProviderSettings): Configuration {
  const { impersonation, secrets, keys, backendOrigins } = settings;
  const at = (suffix: string) => backendOrigins.map((origin) => `${origin}${suffix}`);
  return {
    clients: [
      {
        client_id: CLIENTS.console,
        client_name: 'Support console',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', TOKEN_EXCHANGE_GRANT],
        response_types: ['code'],
        redirect_uris: at('/callback'),
        post_logout_redirect_uris: at('/'),
      },
      {
        client_id: CLIENTS.web,
        client_name: 'Support web',
        client_secret: secrets.webClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code', TOKEN_EXCHANGE_GRANT],
        response_types: ['code'],
        redirect_uris: at('/web/callback'),
      },
      {
        client_id: CLIENTS.account,
        client_name: 'Your account',
        client_secret: secrets.accountClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        // The refresh token renews the customer's token for the support-access API while their page is open.
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: at('/account/callback'),
      },
      {
        client_id: CLIENTS.backend,
        client_name: 'Impersonation backend',
        client_secret: secrets.backendClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        // Creates subject tokens; lists and stops impersonations for the console.
        impersonation_management_scope: [
          impersonation.options.managementScope,
          impersonation.options.readScope,
          impersonation.options.revokeScope,
        ].join(' '),
      },
      {
        client_id: CLIENTS.emergency,
        client_name: 'Emergency access (on call)',
        client_secret: secrets.emergencyClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        // Creates subject tokens only; named in approvals.breakGlassClients.
        impersonation_management_scope: impersonation.options.managementScope,
      },
      {
        client_id: CLIENTS.resourceApi,
        client_name: 'Resource API (calls the orders service)',
        client_secret: secrets.resourceApiClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: [TOKEN_EXCHANGE_GRANT],
        response_types: [],
        redirect_uris: [],
        // Exchanges the tokens sent to the resource API for delegated ones (docs/token-exchange.md#delegation).
        token_exchange_delegation: API_RESOURCE,
      },
      {
        client_id: CLIENTS.ordersAgent,
        client_name: 'Orders assistant (an agent)',
        client_secret: secrets.ordersAgentClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        // Signs the customer in for their ID token (and, asked with offline_access, a refresh token), then
        // exchanges either for ID-JAGs to the orders application.
        grant_types: ['authorization_code', 'refresh_token', TOKEN_EXCHANGE_GRANT],
        response_types: ['code'],
        redirect_uris: at('/agent/callback'),
        id_jag_audiences: ORDERS_AUTH_ISSUER,
      },
      // SSF receivers (docs/ssf.md): each manages and polls its own streams with a client_credentials token.
      ...[
        { id: CLIENTS.caepReceiver, name: 'CAEP receiver (yours)', secret: secrets.caepReceiverClientSecret },
        {
          id: CLIENTS.resourceApiReceiver,
          name: 'Resource API (SSF receiver)',
          secret: secrets.resourceApiReceiverClientSecret,
        },
        {
          id: CLIENTS.ordersAuthReceiver,
          name: 'Orders authorization server (SSF receiver)',
          secret: secrets.ordersAuthReceiverClientSecret,
        },
      ].map(({ id, name, secret }) => ({
        client_id: id,
        client_name: name,
        client_secret: secret,
        token_endpoint_auth_method: 'client_secret_basic' as const,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        impersonation_management_scope: SSF_RECEIVER_SCOPES,
      })),
    ],
    scopes: ['openid', 'offline_access', 'profile'],
    claims: { openid: ['sub'], profile: ['name', 'roles'] },
    findAccount: (_ctx, id) => settings.accounts.find(id),
    cookies: { keys: keys.cookieKeys },
    jwks: keys.jwks,
    pkce: { required: () => true },
    ttl: {
      // An impersonation lasts no longer than the acting agent's tier allows (support-policy.ts).
      AccessToken: (ctx, token) =>
        token.gty === TOKEN_EXCHANGE_GRANT
          ? Math.min(token.resourceServer?.accessTokenTTL ?? 3600, settings.policy.sessionCeiling(ctx))
          : (token.resourceServer?.accessTokenTTL ?? 3600),
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Grant: 8 * 3600,
      Session: 8 * 3600,
      RefreshToken: 8 * 3600,
    },
    clientBasedCORS: (_ctx, origin, client) => client.clientId === CLIENTS.console && backendOrigins.includes(origin),
    renderError: (ctx, out) => {
      ctx.type = 'html';
      ctx.body = providerErrorPage(out.error, out.error_description);
    },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: (ctx, form) => {
          ctx.type = 'html';
          ctx.body = logoutPage(ctx.host, form);
        },
        postLogoutSuccessSource: (ctx) => {
          ctx.type = 'html';
          ctx.body = signedOutPage();
        },
      },
      clientCredentials: { enabled: true },
      // The backend learns which application an engineer's token was issued to, and binds the subject token to it.
      introspection: {
        enabled: true,
        // Spelt out (oidc-provider's default): a public client may introspect only its own tokens.
        allowedPolicy: (ctx, client, token) =>
          client.clientAuthMethod !== 'none' || token.clientId === ctx.oidc.client?.clientId,
      },
      resourceIndicators: {
        enabled: true,
        // Without a resource the access token is for userinfo: the actor token of the flow.
        defaultResource: () => undefined,
        useGrantedResource: () => false,
        getResourceServerInfo: (_ctx, resource, client) => {
          if (resource === API_RESOURCE && FIRST_PARTY.has(client.clientId)) {
            return {
              scope: API_SCOPES.join(' '),
              audience: API_RESOURCE,
              accessTokenFormat: 'jwt',
              accessTokenTTL: 600,
              jwt: { sign: { alg: 'RS256' } },
            };
          }
          if (resource === ORDERS_RESOURCE && client.clientId === CLIENTS.resourceApi) {
            return {
              scope: ORDERS_SCOPES.join(' '),
              audience: ORDERS_RESOURCE,
              accessTokenFormat: 'jwt',
              accessTokenTTL: 300,
              jwt: { sign: { alg: 'RS256' } },
            };
          }
          throw new errors.InvalidTarget();
        },
      },
    },
  };
}
