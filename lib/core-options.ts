import type { TelemetryOptions } from './telemetry/options.js';
import type Koa from 'koa';
import type { Account } from 'oidc-provider';
import type { AdapterSource } from './adapters/contracts/entries.js';
import type { AuditSink } from './audit/sink.js';
import type { ExchangeDecision, PolicyDecision } from './config/decisions.js';
import type { JsonObject } from './json.js';

export interface ManagementCaller {
  /** The client of the machine-to-machine token that called the Management API. */
  clientId: string;
}

/** What a management authenticator decides: a caller, or why not (401 or 403). */
export type ManagementAuthResult =
  ManagementCaller | { error: 'invalid_token' | 'insufficient_scope'; description?: string | undefined };

export interface ActorAuthentication {
  maxAge?: number | undefined;
  acrValues?: string[] | undefined;
}

export interface CreationPolicyInput {
  subject: string;
  account: Account;
  caller: ManagementCaller;
  context: JsonObject;
  /** The person who will act (`actorId` of the request), when the request names one. */
  actor?: string | undefined;
  /** The client that will redeem the subject token (`clientId` of the request), when the request names one. */
  clientId?: string | undefined;
  /** Present when the caller bypasses the customer's approval (break-glass), with its reason. */
  breakGlass?: { reason: string } | undefined;
}

export interface ExchangePolicyInput {
  clientId: string;
  subject: string;
  /** The actor's account id, when an actor token was sent. */
  actor?: string | undefined;
  resource: string;
  scope: string[];
  context: JsonObject;
}

export interface CustomJwtClaimsInput {
  /** The claims the access token is about to carry (read-only view). */
  token: Readonly<Record<string, unknown>>;
  context: {
    grant: {
      type: 'urn:ietf:params:oauth:grant-type:token-exchange';
      /** The `context` sent when the subject token was created. */
      subjectTokenContext: JsonObject;
    };
    client: { id: string };
    user: { id: string };
    actor?: { id: string } | undefined;
  };
  environmentVariables: Readonly<Record<string, string>>;
}

export type CustomJwtClaimsFunction = (
  input: CustomJwtClaimsInput,
) => Record<string, unknown> | Promise<Record<string, unknown>>;

/** The options of `createImpersonation` that are no feature's slice: what the token endpoint and the Management API read. */
export interface CoreOptions {
  /** Resource indicator (absolute URI) of the Management API; M2M tokens must be issued for it. */
  managementResource: string;
  /** Scope that allows creating subject tokens. Default `subject-tokens:create`. */
  managementScope?: string | undefined;
  /** Scope that allows listing and reading impersonation sessions. Default `impersonations:read`. */
  readScope?: string | undefined;
  /** Scope that allows revoking sessions and withdrawing subject tokens. Default `impersonations:revoke`. */
  revokeScope?: string | undefined;
  /** Path of the subject-token endpoint. Default `/api/subject-tokens`. */
  managementPath?: string | undefined;
  /** Path of the impersonation sessions (and, below it, `/revocations`). Default `/api/impersonations`. */
  sessionsPath?: string | undefined;
  /** Lifetime of M2M tokens for the Management API, seconds. Default 300. */
  managementTokenTTL?: number | undefined;
  /** Format of M2M tokens for the Management API. Default `jwt`. */
  managementTokenFormat?: 'jwt' | 'opaque' | undefined;
  /** Replaces the built-in M2M bearer-token check; `required.scope` is the scope the endpoint needs. */
  authenticateManagementRequest?:
    | ((ctx: Koa.Context, required: { scope: string }) => ManagementAuthResult | Promise<ManagementAuthResult>)
    | undefined;
  /** Subject-token lifetime, seconds. Default 60; at most 3600. */
  subjectTokenTTL?: number | undefined;
  /** Cap on the impersonation access token's lifetime, seconds; the resource server's TTL wins if lower. Default 900. */
  accessTokenTTL?: number | undefined;
  /** Largest creation `context`, in bytes of its JSON. Default 2048. */
  maxContextBytes?: number | undefined;
  /** Creation-time policy: may this user be impersonated at all? */
  canImpersonate?: ((input: CreationPolicyInput) => PolicyDecision | Promise<PolicyDecision>) | undefined;
  /** Exchange-time policy: may this client and actor impersonate this subject now? */
  canExchange?: ((input: ExchangePolicyInput) => ExchangeDecision | Promise<ExchangeDecision>) | undefined;
  /**
   * Clients, besides the exchanging one, whose users' access tokens are
   * accepted as actor tokens (e.g. the support application's other front
   * end). Default: none, so an actor token must come from the exchanging client.
   */
  actorClients?: string[] | undefined;
  /**
   * How recent and strong the actor's sign-in must be (step-up, RFC 9470):
   * `maxAge` seconds since it, and an `acr` among `acrValues`. Checked against
   * the session behind an opaque actor token, or a JWT's `auth_time` and `acr`.
   * A stale or weak sign-in gets `insufficient_user_authentication`. Default: none.
   */
  actorAuthentication?: ActorAuthentication | undefined;
  /**
   * A durable trail (e.g. `createPostgresAuditLog()`), awaited: no subject
   * token and no impersonation token is handed out before its record is.
   */
  auditLog?: AuditSink | undefined;
  /**
   * Where subject tokens and impersonation sessions are kept, when not in the
   * provider's own adapter: an adapter class or factory with `consumeOnce` and
   * sorted indexes (`createMemoryAdapter()`, `createRedisAdapter()`). With it,
   * the provider keeps any adapter of its own. Default: the provider's adapter.
   */
  store?: AdapterSource | undefined;
  /**
   * OpenTelemetry spans and metrics (docs/operations.md). Default: the
   * providers registered with `@opentelemetry/api` when it is installed, none
   * when it is not; `false` turns them off; `{ tracerProvider, meterProvider }` names others.
   */
  telemetry?: TelemetryOptions | undefined;
  /** Adds claims to the issued access token (spec 2.7). */
  getCustomJwtClaims?: CustomJwtClaimsFunction | undefined;
  /** How long `getCustomJwtClaims` may take, milliseconds. Default 2000. */
  customClaimsTimeout?: number | undefined;
  /** Passed to `getCustomJwtClaims` as `environmentVariables`. Default `{}`. */
  environmentVariables?: Record<string, string> | undefined;
  /**
   * Whether this instance delivers what the outbox holds (webhooks, SSF SETs
   * pushed or queued for polling). The outbox is the store's, shared by every
   * instance on it: `false` keeps delivery off the instances that answer
   * token requests, while others on the same store deliver
   * (docs/webhooks.md, "Delivery"). Default `true`.
   */
  deliverOutbox?: boolean | undefined;
}

/** The options without a default: absent unless given. */
type UndefaultedOption =
  | 'authenticateManagementRequest'
  | 'canImpersonate'
  | 'canExchange'
  | 'getCustomJwtClaims'
  | 'actorAuthentication'
  | 'auditLog'
  | 'store'
  | 'telemetry';

/** The options with a default: each one filled in. */
type DefaultedOptions = Omit<CoreOptions, UndefaultedOption>;

/**
 * The core options once resolved; `ResolvedOptions` (`options.ts`) adds each feature's slice.
 * Not Required<>: under a consumer's exactOptionalPropertyTypes it keeps the `| undefined` each option accepts.
 */
export type ResolvedCoreOptions = {
  [Name in keyof DefaultedOptions]-?: Exclude<DefaultedOptions[Name], undefined>;
} & Pick<CoreOptions, UndefaultedOption>;
