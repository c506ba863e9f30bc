import { DecisionPointUnavailable, managementUnavailable, policyUnavailable } from '../errors.js';
import type { JsonObject } from '../json.js';
import type { ExchangeDecision } from '../config/decisions.js';
import type { ExchangePolicyInput, ResolvedCoreOptions } from '../core-options.js';
import { evaluateAccess, type AccessEvaluation, type PolicyAction } from './evaluation.js';
import { resolveAuthzenOptions, type AuthzenOptions, type ResolvedAuthzenOptions } from './options.js';

/** What the decision point is told of a delegation, declared here so the policy does not import the pipeline. */
interface DelegationAsked {
  clientId: string;
  subject: string;
  actor: string;
  actorType: 'client' | 'user';
  resource: string;
  scope: string[];
  subjectTokenType: string;
  parentSessionId?: string | undefined;
  accessGrantId?: string | undefined;
}

/** What the decision point is told of an ID-JAG's issue (`IdJagIssueInput`), declared here likewise. */
interface IssueAsked {
  clientId: string;
  subject: string;
  actor?: string | undefined;
  audience: string;
  resource: string[];
  scope: string[];
}

/** What the decision point is told of an ID-JAG's redemption (`IdJagRedeemInput`), declared here likewise. */
type RedeemAsked = Pick<IssueAsked, 'clientId' | 'subject' | 'actor' | 'scope'> & { issuer: string; resource: string };

/** The `authzen` option composed into the policy hooks at start-up (`canDelegate`, `canIssue`, `canRedeem` where their options are). */
export function applyDecisionPoint(
  input: AuthzenOptions | undefined,
  hooks: Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>,
): Partial<Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>> & { authzen?: ResolvedAuthzenOptions } {
  const authzen = resolveAuthzenOptions(input);
  // Without a decision point the hooks stay as given (absent ones absent).
  if (!authzen) return {};
  return {
    canImpersonate: async (input) => {
      const own = hooks.canImpersonate ? await hooks.canImpersonate(input) : true;
      if (own !== true) return own;
      const action: PolicyAction = input.breakGlass ? 'break-glass' : 'impersonate';
      const asked = evaluation(userOr(input.actor, input.caller.clientId), action, input.subject, {
        caller: input.caller.clientId,
        client: input.clientId,
        ...ticketAndReason(input.context),
        ...(input.breakGlass ? { reason: input.breakGlass.reason } : {}),
        request_context: input.context,
      });
      return ask(authzen, asked, managementRefusal);
    },
    canExchange: askedAfter(authzen, hooks.canExchange, exchangeEvaluation),
    authzen,
  };
}

/** A hook that may narrow the scopes (absent, it allows), then the decision point asked of those it let through. */
export function askedAfter<Input extends { scope: string[] }>(
  authzen: ResolvedAuthzenOptions,
  own: ((input: Input) => ExchangeDecision | Promise<ExchangeDecision>) | undefined,
  evaluate: (input: Input) => AccessEvaluation,
): (input: Input) => Promise<ExchangeDecision> {
  return async (input) => {
    const decision = own ? await own(input) : true;
    const scopes = grantedBy(decision, input.scope);
    if (!scopes) return decision;
    const verdict = await ask(authzen, evaluate({ ...input, scope: scopes }), tokenEndpointRefusal);
    return verdict === true ? decision : verdict;
  };
}

/** The customer's approval or grant asked of the decision point before it goes into force; rejects with 403 or 503. */
export async function assertApprovalAllowed(
  authzen: ResolvedAuthzenOptions | undefined,
  input: {
    customer: string;
    actor?: string | undefined;
    clientId?: string | undefined;
    scope?: readonly string[] | undefined;
    context?: JsonObject | undefined;
  },
  refuse: (reason: string) => Error,
): Promise<void> {
  if (!authzen) return;
  const context = {
    actor: input.actor,
    client: input.clientId,
    scopes: input.scope ? [...input.scope] : undefined,
    ...ticketAndReason(input.context),
    request_context: input.context,
  };
  const customer = { type: 'user', id: input.customer } as const;
  const verdict = await ask(authzen, evaluation(customer, 'approve', input.customer, context), managementRefusal);
  if (verdict !== true) throw refuse(verdict.reason);
}

/** The scopes a hook's answer lets through, or `undefined` when it refused. */
function grantedBy(decision: ExchangeDecision, requested: string[]): string[] | undefined {
  if (decision === true) return requested;
  if (typeof decision === 'object' && decision !== null && 'scope' in decision && Array.isArray(decision.scope)) {
    return requested.filter((name) => decision.scope.includes(name));
  }
  return undefined;
}

const REFUSED: Record<PolicyAction, string> = {
  impersonate: 'the policy decision point refused this impersonation',
  'break-glass': 'the policy decision point refused this break-glass access',
  exchange: 'the policy decision point refused this impersonation',
  delegate: 'the policy decision point refused this delegation',
  approve: 'the policy decision point refused this approval',
  'issue-id-jag': 'the policy decision point refused this ID-JAG',
  'redeem-id-jag': 'the policy decision point refused this redemption',
};

async function ask(
  authzen: ResolvedAuthzenOptions,
  evaluation: AccessEvaluation,
  unavailable: (error: DecisionPointUnavailable) => Error,
): Promise<true | { reason: string }> {
  const decision = await evaluateAccess(authzen, evaluation).catch((error: unknown) => {
    throw error instanceof DecisionPointUnavailable ? unavailable(error) : error;
  });
  return decision.allowed ? true : { reason: decision.reason ?? REFUSED[evaluation.action.name] };
}

// No cause: the answer says all there is, and Koa's default handler prints no stack for it.
const managementRefusal = (error: DecisionPointUnavailable) =>
  managementUnavailable(`${error.message}; nothing was issued`);
const tokenEndpointRefusal = (error: DecisionPointUnavailable) =>
  policyUnavailable(`${error.message}; nothing was issued, retry shortly`);

function exchangeEvaluation(input: ExchangePolicyInput): AccessEvaluation {
  return evaluation(userOr(input.actor, input.clientId), 'exchange', input.subject, {
    client: input.clientId,
    resource_server: input.resource,
    scopes: input.scope,
    ...ticketAndReason(input.context),
    request_context: input.context,
  });
}

export function delegationEvaluation(input: DelegationAsked): AccessEvaluation {
  return evaluation({ type: input.actorType, id: input.actor }, 'delegate', input.subject, {
    client: input.clientId,
    resource_server: input.resource,
    scopes: input.scope,
    subject_token_type: input.subjectTokenType,
    parent_session: input.parentSessionId,
    access_grant: input.accessGrantId,
  });
}

/** The requesting client asks for an ID-JAG of the user to the other authorization server (`audience`). */
export function issueEvaluation(input: IssueAsked): AccessEvaluation {
  return evaluation({ type: 'client', id: input.clientId }, 'issue-id-jag', input.subject, {
    client: input.clientId,
    actor: input.actor,
    audience: input.audience,
    resources: input.resource,
    scopes: input.scope,
  });
}

/** The client redeems another server's (`issuer`) ID-JAG of the user, the account here, for a token of the resource. */
export function redeemEvaluation(input: RedeemAsked): AccessEvaluation {
  return evaluation({ type: 'client', id: input.clientId }, 'redeem-id-jag', input.subject, {
    client: input.clientId,
    actor: input.actor,
    issuer: input.issuer,
    resource_server: input.resource,
    scopes: input.scope,
  });
}

/** `who` asks to `action` on the user `subject`. */
function evaluation(
  who: AccessEvaluation['subject'],
  action: PolicyAction,
  subject: string,
  context: AccessEvaluation['context'],
): AccessEvaluation {
  return { subject: who, action: { name: action }, resource: { type: 'user', id: subject }, context };
}

/** The person who acts, else the client. */
function userOr(actor: string | undefined, clientId: string): AccessEvaluation['subject'] {
  return actor === undefined ? { type: 'client', id: clientId } : { type: 'user', id: actor };
}

/** The ticket and reason of a request context, when it names them (`ticketId` or `ticket`, `reason`). */
function ticketAndReason(context: JsonObject | undefined): JsonObject {
  const ticket = context?.['ticketId'] ?? context?.['ticket'];
  const reason = context?.['reason'];
  return {
    ...(typeof ticket === 'string' ? { ticket } : {}),
    ...(typeof reason === 'string' ? { reason } : {}),
  };
}
