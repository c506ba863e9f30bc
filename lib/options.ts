import { checkTelemetryOptions } from './telemetry/options.js';
import { resolveApprovalOptions, type ApprovalOptions, type ResolvedApprovalOptions } from './approvals/options.js';
import type { ActorAuthentication, CoreOptions, ResolvedCoreOptions } from './core-options.js';
import { definedMembers } from './json.js';
import {
  resolveDelegationOptions,
  type DelegationOptions,
  type ResolvedDelegationOptions,
} from './exchange/delegation-options.js';
import { optionChecks, type OptionChecks } from './config/checks.js';
import { ACTOR_AUTHENTICATION_MAXIMA, IMPERSONATION_DEFAULTS, IMPERSONATION_MAXIMA } from './config/defaults.js';
import { invalidArgument } from './errors.js';
import {
  resolveIdJagIssuanceOptions,
  resolveIdJagOptions,
  type IdJagIssuanceOptions,
  type IdJagOptions,
  type ResolvedIdJagIssuanceOptions,
  type ResolvedIdJagOptions,
} from './exchange/id-jag-options.js';
import {
  applyDecisionPoint,
  askedAfter,
  delegationEvaluation,
  issueEvaluation,
  redeemEvaluation,
} from './policy/compose.js';
import type { AuthzenOptions, ResolvedAuthzenOptions } from './policy/options.js';
import { resolveSsfOptions, type ResolvedSsfOptions, type SsfOptions } from './ssf/options.js';
import { resolveWebhookOptions, type ResolvedWebhookOptions, type WebhookOptions } from './webhooks/options.js';

/** The options of `createImpersonation`: the core ones, and each feature's slice. */
export interface ImpersonationOptions extends CoreOptions {
  /** The customer in the loop: grants, approval requests, break-glass (docs/customer-approval.md). Default: none. */
  approvals?: ApprovalOptions | undefined;
  /** Webhooks of impersonations starting and stopping, delivered signed, at least once (docs/webhooks.md). Default: none. */
  webhooks?: WebhookOptions | undefined;
  /** An OpenID SSF 1.0 transmitter of CAEP session-revoked SETs (docs/ssf.md). Default: none. */
  ssf?: SsfOptions | undefined;
  /** RFC 8693 delegation for clients whose `token_exchange_delegation` metadata allows it (docs/token-exchange.md). */
  delegation?: DelegationOptions | undefined;
  /** An AuthZEN 1.0 decision point asked after the hooks; when it cannot answer, refused with 503 (docs/policy.md). Default: none. */
  authzen?: AuthzenOptions | undefined;
  /** Redeems ID-JAGs of the trusted issuers it lists (jwt-bearer grant; docs/cross-app-access.md). Default: none. */
  idJag?: IdJagOptions | undefined;
  /** Issues ID-JAGs for the audiences a client's `id_jag_audiences` lists (token exchange; docs/cross-app-access.md). Default: none. */
  idJagIssuance?: IdJagIssuanceOptions | undefined;
}

/** Every option once resolved: the core ones, and each feature's slice as the feature resolved it. */
export type ResolvedOptions = ResolvedCoreOptions & {
  approvals?: ResolvedApprovalOptions;
  webhooks?: ResolvedWebhookOptions;
  ssf?: ResolvedSsfOptions;
  delegation: ResolvedDelegationOptions;
  authzen?: ResolvedAuthzenOptions;
  idJag?: ResolvedIdJagOptions;
  idJagIssuance?: ResolvedIdJagIssuanceOptions;
};

/** Every option, so that one misspelt is refused: the `satisfies` keeps the list and the interface alike. */
const OPTION_NAMES = Object.keys({
  ...IMPERSONATION_DEFAULTS,
  managementResource: true,
  authenticateManagementRequest: true,
  canImpersonate: true,
  canExchange: true,
  actorClients: true,
  actorAuthentication: true,
  auditLog: true,
  store: true,
  telemetry: true,
  getCustomJwtClaims: true,
  environmentVariables: true,
  approvals: true,
  webhooks: true,
  ssf: true,
  delegation: true,
  authzen: true,
  idJag: true,
  idJagIssuance: true,
} satisfies Record<keyof ImpersonationOptions, unknown>);

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
  // The input's `ssf` is not resolved yet: its scope is checked with it.
  const coreScopes = [...new Set([options.managementScope, options.readScope, options.revokeScope])];
  if (coreScopes.length !== 3) fail('readScope', 'must differ from "revokeScope", and both from "managementScope"');
  for (const name of ['managementPath', 'sessionsPath'] as const) check.path(name, options[name]);
  if (options.sessionsPath === options.managementPath) fail('sessionsPath', 'must differ from "managementPath"');
  if (options.managementTokenFormat !== 'jwt' && options.managementTokenFormat !== 'opaque')
    fail('managementTokenFormat', 'must be "jwt" or "opaque"');
  for (const [name, max] of Object.entries(IMPERSONATION_MAXIMA))
    check.integer(name, options[name as keyof typeof IMPERSONATION_MAXIMA], max);
  for (const name of ['authenticateManagementRequest', 'canImpersonate', 'canExchange', 'getCustomJwtClaims'] as const)
    check.optionalFunction(name, options[name]);
  const actorClients = check.clientIds('actorClients', options.actorClients);
  if (options.auditLog !== undefined && typeof (options.auditLog as { append?: unknown })?.append !== 'function')
    fail('auditLog', 'must have an append(name, event) method');
  if (options.store !== undefined && typeof options.store !== 'function')
    fail('store', "must be an adapter class or factory, as oidc-provider's adapter option takes");
  checkTelemetryOptions(options.telemetry);
  const freshness = options.actorAuthentication;
  if (freshness !== undefined) {
    check.object('actorAuthentication', freshness);
    check.known(freshness, ACTOR_AUTHENTICATION_NAMES, 'actorAuthentication.');
    if (freshness.maxAge !== undefined)
      check.integer('actorAuthentication.maxAge', freshness.maxAge, ACTOR_AUTHENTICATION_MAXIMA.maxAge);
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
          scopes: coreScopes,
          paths: [options.managementPath, options.sessionsPath],
        });
  const webhooks = options.webhooks === undefined ? undefined : resolveWebhookOptions(options.webhooks);
  const ssf =
    options.ssf === undefined
      ? undefined
      : resolveSsfOptions(options.ssf, {
          scopes: coreScopes,
          paths: [
            options.managementPath,
            options.sessionsPath,
            ...(approvals ? [approvals.requestsPath, approvals.customerPath] : []),
          ],
        });
  const ownIdJag = input.idJag === undefined ? undefined : resolveIdJagOptions(input.idJag);
  const ownIssuance = input.idJagIssuance === undefined ? undefined : resolveIdJagIssuanceOptions(input.idJagIssuance);
  const decisionPoint = applyDecisionPoint(input.authzen, options);
  const ownDelegation = resolveDelegationOptions(input.delegation);
  const { authzen } = decisionPoint;
  // `canDelegate`, `canIssue`, `canRedeem`, each with the decision point (when there is one) asked after it.
  const delegation = authzen
    ? Object.freeze({
        ...ownDelegation,
        canDelegate: askedAfter(authzen, ownDelegation.canDelegate, delegationEvaluation),
      })
    : ownDelegation;
  const idJagIssuance =
    ownIssuance && authzen
      ? Object.freeze({ ...ownIssuance, canIssue: askedAfter(authzen, ownIssuance.canIssue, issueEvaluation) })
      : ownIssuance;
  const idJag =
    ownIdJag && authzen
      ? Object.freeze({ ...ownIdJag, canRedeem: askedAfter(authzen, ownIdJag.canRedeem, redeemEvaluation) })
      : ownIdJag;
  return Object.freeze({
    ...options,
    ...decisionPoint,
    delegation,
    ...definedMembers({ approvals, webhooks, ssf, idJag, idJagIssuance }),
    actorClients,
    environmentVariables: Object.freeze({ ...env }),
  });
}

/** The scopes of the Management API, the SSF receivers' included: none of them is an OIDC scope. */
export function managementScopes(
  options: Pick<ResolvedOptions, 'managementScope' | 'readScope' | 'revokeScope' | 'ssf'>,
): ReadonlySet<string> {
  return new Set([options.managementScope, options.readScope, options.revokeScope, ...(options.ssf?.readScopes ?? [])]);
}
