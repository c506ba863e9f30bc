import type { Account } from 'oidc-provider';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { APPROVAL_DEFAULTS, APPROVAL_MAXIMA } from '../config/defaults.js';
import { definedMembers, type JsonObject } from '../json.js';

/** What a subject-token request needs: nothing (`none`), a grant in force (`grant`), or an approved request (`request`). */
export type ApprovalRequirement = 'none' | 'grant' | 'request';

/** What an approval's grant may be left open to; by default bound to client, caller and context. */
export type ApprovalWidening = 'clientId' | 'caller' | 'context';
const WIDENINGS: readonly ApprovalWidening[] = ['clientId', 'caller', 'context'];

export interface ApprovalPolicyInput {
  /** The customer the subject token would be for. */
  subject: string;
  account: Account;
  /** The support engineer who would act, when the request names one. */
  actor?: string | undefined;
  /** The Management API caller. */
  caller: { clientId: string };
  /** The client that would exchange the subject token, when the request names one. */
  clientId?: string | undefined;
  context: JsonObject;
  /** The ceiling the request asks for, when it names one. */
  resource?: string | undefined;
  scope?: string[] | undefined;
}

export interface ApprovalOptions {
  /** Resource indicator (absolute URI) of the customer's support-access API; the customer's access token is issued for it. */
  customerResource: string;
  /** Scope the customer's access token needs for that API. Default `support-access`. */
  customerScope?: string | undefined;
  /** Base path of the customer's API. Default `/api/support-access`. */
  customerPath?: string | undefined;
  /** Where a backend reads an approval request by id. Default `/api/approval-requests`. */
  requestsPath?: string | undefined;
  /** Decides per subject-token request what the customer must have allowed. Default: `none` for every request. */
  require?: ((input: ApprovalPolicyInput) => ApprovalRequirement | Promise<ApprovalRequirement>) | undefined;
  /** Longest grant a customer may give or approve, seconds. Default 30 days; at most 366 days. */
  maxGrantDuration?: number | undefined;
  /** How long an approval request waits for its answer, seconds. Default 900; at most 7 days. */
  requestTTL?: number | undefined;
  /** What an approval's grant is not bound to: `clientId`, `caller`, `context`. Default none. */
  widenApprovedGrants?: ApprovalWidening[] | undefined;
  /** Management API clients that may bypass the customer's approval with a reason (break-glass). Default none. */
  breakGlassClients?: string[] | undefined;
  /** Most grants in force per customer. Default 20. */
  maxGrantsPerCustomer?: number | undefined;
  /** Most approval requests waiting per customer. Default 20. */
  maxPendingPerCustomer?: number | undefined;
}

// Not Required<>: under a consumer's exactOptionalPropertyTypes it keeps the `| undefined` each option accepts.
export type ResolvedApprovalOptions = {
  readonly [Name in keyof ApprovalOptions]-?: Exclude<ApprovalOptions[Name], undefined>;
};

const DEFAULTS = {
  ...APPROVAL_DEFAULTS,
  require: (): ApprovalRequirement => 'none',
  widenApprovedGrants: [] as ApprovalWidening[],
  breakGlassClients: [] as string[],
};

const KNOWN = Object.keys({ customerResource: true, ...DEFAULTS } satisfies Record<keyof ApprovalOptions, unknown>);
const check: OptionChecks = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

/** Checks the `approvals` option once at start-up; `taken` are what the other options already use. */
export function resolveApprovalOptions(
  input: unknown,
  taken: { resources: readonly string[]; scopes: readonly string[]; paths: readonly string[] },
): ResolvedApprovalOptions {
  check.object('approvals', input);
  check.known(input, KNOWN, 'approvals.');
  const options = { ...DEFAULTS, ...definedMembers(input) } as unknown as Required<ApprovalOptions>;

  check.resourceIndicator('approvals.customerResource', options.customerResource);
  if (taken.resources.includes(options.customerResource))
    fail('approvals.customerResource', 'must differ from "managementResource"');
  check.scope('approvals.customerScope', options.customerScope);
  if (taken.scopes.includes(options.customerScope))
    fail('approvals.customerScope', 'must differ from the Management API scopes');
  for (const name of ['customerPath', 'requestsPath'] as const) {
    check.path(`approvals.${name}`, options[name]);
    if (taken.paths.includes(options[name])) fail(`approvals.${name}`, 'must differ from the other paths');
  }
  if (options.customerPath === options.requestsPath) fail('approvals.requestsPath', 'must differ from "customerPath"');
  if (typeof options.require !== 'function') fail('approvals.require', 'must be a function');
  for (const name of ['maxGrantDuration', 'requestTTL', 'maxGrantsPerCustomer', 'maxPendingPerCustomer'] as const) {
    check.integer(`approvals.${name}`, options[name], APPROVAL_MAXIMA[name]);
  }
  const breakGlassClients = check.clientIds('approvals.breakGlassClients', options.breakGlassClients);
  const widenings: unknown = options.widenApprovedGrants;
  if (!Array.isArray(widenings) || widenings.some((name: unknown) => !WIDENINGS.includes(name as ApprovalWidening)))
    fail('approvals.widenApprovedGrants', `must be an array of ${WIDENINGS.map((name) => `"${name}"`).join(', ')}`);
  return Object.freeze({
    ...options,
    widenApprovedGrants: Object.freeze([...new Set(options.widenApprovedGrants)]) as ApprovalWidening[],
    breakGlassClients,
  });
}
