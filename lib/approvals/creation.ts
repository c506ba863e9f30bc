import type Koa from 'koa';
import { EVENTS } from '../event-types.js';
import { publish } from '../events/publish.js';
import { invalidCall, invalidInput, limitReached } from '../errors.js';
import { canonicalJson, definedMembers } from '../json.js';
import { storeCall } from '../store-call.js';
import { approvalSettings, nowSeconds, type ApprovalDependencies } from './deps.js';
import { requestEvent } from './events.js';
import type { ApprovalPolicyInput, ApprovalRequirement, ResolvedApprovalOptions } from './options.js';
import { newApprovalRequestId, type AccessGrant, type ApprovalRequest } from './record.js';

/** Issued as without approvals, under a grant in force, or not yet: the customer has the request to answer. */
type CreationApproval =
  { kind: 'none' } | { kind: 'grant'; grant: AccessGrant } | { kind: 'pending'; request: ApprovalRequest };

/** An ask that names who would act, as a customer's approval needs. */
type ActorAsk = ApprovalPolicyInput & { actor: string };

const REQUIREMENTS: ReadonlySet<unknown> = new Set<ApprovalRequirement>(['none', 'grant', 'request']);

/** Asks `approvals.require`, then looks for a covering grant; else the customer gets an approval request. */
export async function approvalForCreation(
  deps: ApprovalDependencies,
  ask: ApprovalPolicyInput,
  ctx: Koa.Context | undefined,
): Promise<CreationApproval> {
  const settings = approvalSettings(deps.options, 'approvalForCreation');
  // The policy gets a copy of the scopes, which the grants are then compared with.
  const requirement = await settings.require({ ...ask, ...definedMembers({ scope: ask.scope && [...ask.scope] }) });
  // A policy that answers something else is a bug of the deployment: refused, never read as "none".
  if (!REQUIREMENTS.has(requirement))
    throw invalidCall('approvals.require', 'must answer "none", "grant" or "request"');
  if (requirement === 'none') return { kind: 'none' };
  // A customer approves a person and the application they act through, never "whoever the backend sends".
  const missing = [
    ...(ask.actor === undefined ? ['actorId'] : []),
    ...(ask.clientId === undefined && !settings.widenApprovedGrants.includes('clientId') ? ['clientId'] : []),
  ];
  const verb = missing.length > 1 ? 'are' : 'is';
  if (missing.length) throw invalidInput(`${missing.join(' and ')} ${verb} required when the customer must approve`);
  const actor = ask.actor!;

  const inForce = await storeCall(() => deps.approvals.activeGrants(ask.subject, settings.maxGrantsPerCustomer));
  const covering = inForce.filter((grant) => covers(grant, { ...ask, actor }, requirement));
  // A grant for this very actor before one for anyone: ending the narrower grant ends what it allowed.
  const grant = covering.find((candidate) => candidate.actor === actor) ?? covering[0];
  if (grant) return { kind: 'grant', grant };
  return { kind: 'pending', request: await pendingRequest(deps, settings, { ...ask, actor }, ctx) };
}

/** Whether a grant in force allows this request (its actor, resource, scopes, and an approval's bindings). */
function covers(grant: AccessGrant, ask: ActorAsk, requirement: ApprovalRequirement): boolean {
  if (requirement === 'request' && (grant.origin !== 'approval' || grant.actor !== ask.actor)) return false;
  if (grant.actor !== undefined && grant.actor !== ask.actor) return false;
  if (ask.resource !== undefined && grant.resource !== undefined && grant.resource !== ask.resource) return false;
  if (grant.clientId !== undefined && grant.clientId !== ask.clientId) return false;
  if (grant.requestedBy !== undefined && grant.requestedBy !== ask.caller.clientId) return false;
  if (grant.context !== undefined && canonicalJson(grant.context) !== canonicalJson(ask.context)) return false;
  const allowed = grant.scope && new Set(grant.scope);
  return !allowed || !ask.scope || ask.scope.every((name) => allowed.has(name));
}

/**
 * The request waiting for the customer: the one this caller already made for
 * this actor (asking again makes no duplicate), or a new one while
 * the customer has fewer than `maxPendingPerCustomer` waiting, counted and
 * listed in one store operation. Two asks racing may both create
 * one; the cap bounds what any number of asks can leave.
 */
async function pendingRequest(
  deps: ApprovalDependencies,
  settings: ResolvedApprovalOptions,
  ask: ActorAsk,
  ctx: Koa.Context | undefined,
): Promise<ApprovalRequest> {
  const waiting = await storeCall(() => deps.approvals.pendingRequests(ask.subject, settings.maxPendingPerCustomer));
  // One request per caller and actor: asked again, it is answered as it was asked (its client, ceiling
  // and ticket), which is all an approval of it covers; what else was asked waits for the answer.
  const same = waiting.find((request) => request.actor === ask.actor && request.requestedBy === ask.caller.clientId);
  if (same) return same;
  const createdAt = nowSeconds();
  const request: ApprovalRequest = {
    id: newApprovalRequestId(),
    subject: ask.subject,
    actor: ask.actor,
    requestedBy: ask.caller.clientId,
    context: ask.context,
    ...definedMembers({ clientId: ask.clientId, resource: ask.resource, scope: ask.scope && [...ask.scope] }),
    createdAt,
    expiresAt: createdAt + settings.requestTTL,
  };
  const { maxSubjectTokensPerClient } = deps.options;
  const saved = await storeCall(() =>
    deps.approvals.saveRequest(request, settings.maxPendingPerCustomer, maxSubjectTokensPerClient),
  );
  if (saved === 'client') {
    throw limitReached(
      'too_many_requests',
      `this client has as many approval requests kept as allowed (${maxSubjectTokensPerClient}); retry once older ones expire`,
    );
  }
  if (saved === 'customer') {
    throw limitReached(
      'too_many_pending_requests',
      'the customer has as many approval requests waiting as the deployment allows; retry once one is answered or expired',
    );
  }
  await publish(deps.bus, requestEvent(EVENTS.approvalRequested, request), ctx);
  return request;
}
