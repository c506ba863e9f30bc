import type { TelemetryOptions } from './telemetry/options.js';
import type Koa from 'koa';
import type { Account, AdapterConstructor, AdapterFactory } from 'oidc-provider';
import type { ExchangeDecision, PolicyDecision } from './config/decisions.js';
import type { ImpersonationEvent, ImpersonationEventName } from './event-types.js';
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

/** An oidc-provider adapter: a class (`new Adapter(name)`) or a factory (`Adapter(name)`). */
export type AdapterSource = AdapterConstructor | AdapterFactory;

/** A durable record of impersonation events, awaited: a token is handed out only after its record was appended. */
export interface AuditSink {
  append(name: ImpersonationEventName, event: ImpersonationEvent): Promise<void>;
  /** When present, `GET {sessionsPath}/events` answers from it (newest first, paged). */
  query?(filter: AuditQueryFilter): Promise<{ items: unknown[]; nextCursor: string | null }>;
}

export interface AuditQueryFilter {
  subject?: string | undefined;
  actor?: string | undefined;
  /** Only rows of these events (for a customer's view: accesses and stops, whatever else follows them). */
  events?: readonly ImpersonationEventName[] | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

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
  /** Subject tokens one Management API client may create per hour; beyond, 429 with `Retry-After`. Default 10,000. */
  maxSubjectTokensPerClient?: number | undefined;
  /** Creation-time policy: may this user be impersonated at all? */
  canImpersonate?: ((input: CreationPolicyInput) => PolicyDecision | Promise<PolicyDecision>) | undefined;
  /** Exchange-time policy: may this client and actor impersonate this subject now? */
  canExchange?: ((input: ExchangePolicyInput) => ExchangeDecision | Promise<ExchangeDecision>) | undefined;
  /** Clients, besides the exchanging one, whose users' access tokens are accepted as actor tokens. Default: none. */
  actorClients?: string[] | undefined;
  /** How recent and strong the actor's sign-in must be (RFC 9470 step-up): `maxAge` seconds, `acr` among `acrValues`. Default: none. */
  actorAuthentication?: ActorAuthentication | undefined;
  /** A durable trail (e.g. `createPostgresAuditLog()`), awaited: no token is handed out before its record. */
  auditLog?: AuditSink | undefined;
  /** Where subject tokens and sessions are kept (an adapter with `consumeOnce` and sorted indexes). Default: the provider's adapter. */
  store?: AdapterSource | undefined;
  /** OpenTelemetry spans and metrics: default the `@opentelemetry/api` globals when installed; `false` turns them off. */
  telemetry?: TelemetryOptions | undefined;
  /** Adds claims to the issued access token (spec 2.7). */
  getCustomJwtClaims?: CustomJwtClaimsFunction | undefined;
  /** How long `getCustomJwtClaims` may take, milliseconds. Default 2000. */
  customClaimsTimeout?: number | undefined;
  /** Passed to `getCustomJwtClaims` as `environmentVariables`. Default `{}`. */
  environmentVariables?: Record<string, string> | undefined;
  /** Whether this instance delivers what the store's shared outbox holds (webhooks, SSF). Default `true`. */
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

/** The core options once resolved; not Required<>, which loses `| undefined` under exactOptionalPropertyTypes. */
export type ResolvedCoreOptions = {
  [Name in keyof DefaultedOptions]-?: Exclude<DefaultedOptions[Name], undefined>;
} & Pick<CoreOptions, UndefaultedOption>;
