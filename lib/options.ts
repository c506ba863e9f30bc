import { checkTelemetryOptions, type TelemetryOptions } from './telemetry/options.js';
import type Koa from 'koa';
import type { Account } from 'oidc-provider';
import type { AdapterSource } from './adapters/contract.js';
import { resolveApprovalOptions, type ApprovalOptions, type ResolvedApprovalOptions } from './approvals/options.js';
import type { AuditSink } from './audit/sink.js';
import type { ExchangeDecision, PolicyDecision } from './config/decisions.js';
import { definedMembers, type JsonObject } from './json.js';
import {
  resolveDelegationOptions,
  type DelegationOptions,
  type ResolvedDelegationOptions,
} from './exchange/delegation/options.js';
import { optionChecks, type OptionChecks } from './config/checks.js';
import { IMPERSONATION_DEFAULTS, IMPERSONATION_MAXIMA } from './config/defaults.js';
import { invalidArgument } from './errors.js';
import { applyDecisionPoint, type AuthzenOptions, type ResolvedAuthzenOptions } from './policy/index.js';
import { resolveSsfOptions, type ResolvedSsfOptions, type SsfOptions } from './ssf/options.js';
import { resolveWebhookOptions, type ResolvedWebhookOptions, type WebhookOptions } from './webhooks/options.js';

export type { JsonObject, JsonPrimitive, JsonValue } from './json.js';
export { refusalReason, type ExchangeDecision, type PolicyDecision } from './config/decisions.js';

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

export interface ImpersonationOptions {
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
   * The customer in the loop: grants the customer gives, approval requests the
   * customer answers, break-glass (docs/customer-approval.md). Default: none,
   * and no subject-token request waits for a customer.
   */
  approvals?: ApprovalOptions | undefined;
  /**
   * Webhooks: notifications of impersonations starting and stopping, kept in
   * the plugin's store and delivered signed, at least once (docs/webhooks.md).
   * Default: none.
   */
  webhooks?: WebhookOptions | undefined;
  /**
   * An OpenID Shared Signals Framework 1.0 transmitter: CAEP session-revoked
   * Security Event Tokens for every impersonation session stopped, to streams
   * receivers manage themselves, pushed or polled through the outbox
   * (docs/ssf.md). Default: none.
   */
  ssf?: SsfOptions | undefined;
  /**
   * Whether this instance delivers what the outbox holds (webhooks, SSF SETs
   * pushed or queued for polling). The outbox is the store's, shared by every
   * instance on it: `false` keeps delivery off the instances that answer
   * token requests, while others on the same store deliver
   * (docs/webhooks.md, "Delivery"). Default `true`.
   */
  deliverOutbox?: boolean | undefined;
  /**
   * RFC 8693 delegation on the same grant (docs/token-exchange.md): a client
   * whose `token_exchange_delegation` metadata allows it exchanges a user's
   * access token for a narrower one that names it in `act`. Default: every
   * setting at its default; only clients with that metadata can delegate.
   */
  delegation?: DelegationOptions | undefined;
  /**
   * An OpenID AuthZEN Authorization API 1.0 decision point asked after the
   * hooks, for every impersonation, break-glass, exchange, delegation and
   * approval (docs/policy.md). It cannot answer: refused, 503. Default: none.
   */
  authzen?: AuthzenOptions | undefined;
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
type DefaultedOptions = Omit<
  ImpersonationOptions,
  UndefaultedOption | 'approvals' | 'webhooks' | 'ssf' | 'delegation' | 'authzen'
>;

// Not Required<>: under a consumer's exactOptionalPropertyTypes it keeps the `| undefined` each option accepts.
export type ResolvedOptions = { [Name in keyof DefaultedOptions]-?: Exclude<DefaultedOptions[Name], undefined> } & Pick<
  ImpersonationOptions,
  UndefaultedOption
> & {
    approvals?: ResolvedApprovalOptions;
    webhooks?: ResolvedWebhookOptions;
    ssf?: ResolvedSsfOptions;
    delegation: ResolvedDelegationOptions;
    authzen?: ResolvedAuthzenOptions;
  };

/** Every option, so that one misspelt is refused: the `satisfies` keeps the list and the interface alike. */
const OPTION_NAMES = Object.keys({
  managementResource: true,
  managementScope: true,
  readScope: true,
  revokeScope: true,
  managementPath: true,
  sessionsPath: true,
  managementTokenTTL: true,
  managementTokenFormat: true,
  authenticateManagementRequest: true,
  subjectTokenTTL: true,
  accessTokenTTL: true,
  maxContextBytes: true,
  canImpersonate: true,
  canExchange: true,
  actorClients: true,
  actorAuthentication: true,
  auditLog: true,
  store: true,
  telemetry: true,
  getCustomJwtClaims: true,
  customClaimsTimeout: true,
  environmentVariables: true,
  approvals: true,
  webhooks: true,
  ssf: true,
  deliverOutbox: true,
  delegation: true,
  authzen: true,
} satisfies Record<keyof ImpersonationOptions, true>);

const ACTOR_AUTHENTICATION_NAMES = Object.keys({ maxAge: true, acrValues: true } satisfies Record<
  keyof ActorAuthentication,
  true
>);

const check: OptionChecks = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

/** Checks every option once, at start-up, and names the one that is wrong. */
export function resolveOptions(input: ImpersonationOptions): ResolvedOptions {
  if (typeof input !== 'object' || input === null) {
    throw invalidArgument('createImpersonation', 'options', 'must be an object');
  }
  check.known(input, OPTION_NAMES);
  const options: ResolvedOptions = {
    ...IMPERSONATION_DEFAULTS,
    environmentVariables: {},
    actorClients: [],
    ...definedMembers(input),
  } as unknown as ResolvedOptions;

  check.resourceIndicator('managementResource', options.managementResource);
  for (const name of ['managementScope', 'readScope', 'revokeScope'] as const) check.scope(name, options[name]);
  if (managementScopes(options).size !== 3)
    fail('readScope', 'must differ from "revokeScope", and both from "managementScope"');
  for (const name of ['managementPath', 'sessionsPath'] as const) check.path(name, options[name]);
  if (options.sessionsPath === options.managementPath) fail('sessionsPath', 'must differ from "managementPath"');
  if (options.managementTokenFormat !== 'jwt' && options.managementTokenFormat !== 'opaque') {
    fail('managementTokenFormat', 'must be "jwt" or "opaque"');
  }
  for (const name of [
    'managementTokenTTL',
    'subjectTokenTTL',
    'accessTokenTTL',
    'maxContextBytes',
    'customClaimsTimeout',
  ] as const) {
    check.integer(name, options[name], IMPERSONATION_MAXIMA[name]);
  }
  for (const name of [
    'authenticateManagementRequest',
    'canImpersonate',
    'canExchange',
    'getCustomJwtClaims',
  ] as const) {
    check.optionalFunction(name, options[name]);
  }
  const actorClients = check.clientIds('actorClients', options.actorClients);
  if (options.auditLog !== undefined && typeof (options.auditLog as { append?: unknown })?.append !== 'function') {
    fail('auditLog', 'must have an append(name, event) method');
  }
  if (options.store !== undefined && typeof options.store !== 'function') {
    fail('store', "must be an adapter class or factory, as oidc-provider's adapter option takes");
  }
  checkTelemetryOptions(options.telemetry);
  const freshness = options.actorAuthentication;
  if (freshness !== undefined) {
    check.object('actorAuthentication', freshness);
    check.known(freshness, ACTOR_AUTHENTICATION_NAMES, 'actorAuthentication.');
    if (freshness.maxAge !== undefined) {
      check.integer('actorAuthentication.maxAge', freshness.maxAge, IMPERSONATION_MAXIMA['actorAuthentication.maxAge']);
    }
    if (
      freshness.acrValues !== undefined &&
      (!Array.isArray(freshness.acrValues) ||
        !freshness.acrValues.length ||
        freshness.acrValues.some((value) => typeof value !== 'string' || !/^[\x21-\x7E]+$/.test(value)))
    ) {
      fail('actorAuthentication.acrValues', 'must be a non-empty array of acr values');
    }
    if (freshness.maxAge === undefined && freshness.acrValues === undefined)
      fail('actorAuthentication', 'needs "maxAge" or "acrValues"');
  }
  const env = options.environmentVariables;
  if (typeof env !== 'object' || env === null || Object.values(env).some((value) => typeof value !== 'string')) {
    fail('environmentVariables', 'must be an object of strings');
  }
  if (typeof options.deliverOutbox !== 'boolean') fail('deliverOutbox', 'must be true or false');
  const approvals =
    options.approvals === undefined
      ? undefined
      : resolveApprovalOptions(options.approvals, {
          resources: [options.managementResource],
          scopes: [...managementScopes(options)],
          paths: [options.managementPath, options.sessionsPath],
        });
  const webhooks = options.webhooks === undefined ? undefined : resolveWebhookOptions(options.webhooks);
  const ssf =
    options.ssf === undefined
      ? undefined
      : resolveSsfOptions(options.ssf, {
          scopes: [...managementScopes(options)],
          paths: [
            options.managementPath,
            options.sessionsPath,
            ...(approvals ? [approvals.requestsPath, approvals.customerPath] : []),
          ],
        });
  const delegation = resolveDelegationOptions((input as ImpersonationOptions).delegation);
  return Object.freeze({
    ...options,
    ...applyDecisionPoint(input.authzen, options, delegation),
    ...(approvals ? { approvals } : {}),
    ...(webhooks ? { webhooks } : {}),
    ...(ssf ? { ssf } : {}),
    actorClients,
    environmentVariables: Object.freeze({ ...env }),
  });
}

/** The scopes of the Management API (the SSF receivers' included, once resolved): none of them is an OIDC scope. */
export function managementScopes(
  options: Pick<ResolvedOptions, 'managementScope' | 'readScope' | 'revokeScope'> & {
    ssf?: { scope?: unknown } | undefined;
  },
): ReadonlySet<string> {
  const scopes = new Set([options.managementScope, options.readScope, options.revokeScope]);
  if (typeof options.ssf?.scope === 'string' && isResolvedSsf(options.ssf)) {
    for (const scope of options.ssf.readScopes) scopes.add(scope);
  }
  return scopes;
}

/** Resolved SSF options carry `retentionSeconds`; the input's `scope` is not checked yet and stays out. */
function isResolvedSsf(ssf: object): ssf is ResolvedSsfOptions {
  return 'retentionSeconds' in ssf;
}
