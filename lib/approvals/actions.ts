import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import { badRequest, misconfigured, notFound, requestClosed, tooManyGrants } from '../errors.js';
import { storeCall } from '../management/http.js';
import type { ResolvedOptions } from '../options.js';
import type { SessionStore } from '../sessions/store.js';
import type { ResolvedApprovalOptions } from './options.js';
import {
  grantStateOf,
  isAccessGrantId,
  isApprovalRequestId,
  newAccessGrantId,
  requestStateOf,
  type AccessGrant,
  type ApprovalRequest,
} from './record.js';
import type { ApprovalStore } from './store.js';
import { toGrantView, toRequestView, type AccessGrantView, type ApprovalRequestView } from './views.js';

/** What the customer's actions work with. */
export interface ApprovalDeps {
  provider: Provider;
  options: ResolvedOptions;
  approvals: ApprovalStore;
  sessions: SessionStore;
  ctx?: Koa.Context;
}

/** The customer's grants in force. */
export async function listGrants(deps: ApprovalDeps, customer: string): Promise<AccessGrantView[]> {
  const { maxGrantsPerCustomer } = settings(deps);
  const grants = await storeCall(() => deps.approvals.activeGrants(customer, maxGrantsPerCustomer));
  return grants.map((grant) => toGrantView(grant));
}

/** A standing grant the customer gives ahead of time. */
export async function giveGrant(
  deps: ApprovalDeps,
  customer: string,
  input: { duration: number; scope?: string[]; resource?: string; actorId?: string; note?: string },
): Promise<AccessGrantView> {
  assertDuration(settings(deps), input.duration);
  await assertRoomForGrant(deps, customer);
  const now = nowInSeconds();
  const grant: AccessGrant = {
    id: newAccessGrantId(),
    subject: customer,
    ...(input.actorId === undefined ? {} : { actor: input.actorId }),
    ...(input.resource === undefined ? {} : { resource: input.resource }),
    ...(input.scope === undefined ? {} : { scope: [...input.scope] }),
    ...(input.note === undefined ? {} : { note: input.note }),
    origin: 'customer',
    createdAt: now,
    expiresAt: now + input.duration,
  };
  await storeCall(() => deps.approvals.saveGrant(grant));
  return toGrantView(grant, now);
}

/** Ends one of the customer's grants; ending one that is no longer in force changes nothing. */
export async function endAccessGrant(deps: ApprovalDeps, customer: string, grantId: string): Promise<void> {
  const grant = await customersGrant(deps, customer, grantId);
  if (grantStateOf(grant) !== 'active') return;
  await storeCall(() => deps.approvals.endGrant(grant, { at: nowInSeconds(), by: 'customer' }));
}

/** The customer's approval requests waiting for an answer. */
export async function listPendingRequests(deps: ApprovalDeps, customer: string): Promise<ApprovalRequestView[]> {
  const { maxPendingPerCustomer } = settings(deps);
  const requests = await storeCall(() => deps.approvals.pendingRequests(customer, maxPendingPerCustomer));
  return requests.map((request) => toRequestView(request));
}

/**
 * Approves a request: a grant for the request's actor and resource, for the
 * duration the customer picks and within the scope the request asked (any
 * scope when it asked none). The grant is made first and the request answered
 * after, once: when another answer got there first, the grant is ended again.
 */
export async function approveRequest(
  deps: ApprovalDeps,
  customer: string,
  requestId: string,
  input: { duration: number; scope?: string[] },
): Promise<{ request: ApprovalRequestView; grant: AccessGrantView }> {
  assertDuration(settings(deps), input.duration);
  const request = await openRequest(deps, customer, requestId);
  if (input.scope && request.scope) {
    const asked = new Set(request.scope);
    const wider = input.scope.filter((name) => !asked.has(name));
    if (wider.length) throw badRequest(`scope must stay within the scope the request asked: ${wider.join(' ')}`);
  }
  await assertRoomForGrant(deps, customer);

  const now = nowInSeconds();
  const scope = input.scope ?? request.scope;
  const grant: AccessGrant = {
    id: newAccessGrantId(),
    subject: customer,
    actor: request.actor,
    ...(request.resource === undefined ? {} : { resource: request.resource }),
    ...(scope === undefined ? {} : { scope: [...scope] }),
    origin: 'approval',
    approvalRequestId: request.id,
    createdAt: now,
    expiresAt: now + input.duration,
  };
  await storeCall(() => deps.approvals.saveGrant(grant));
  let outcome;
  try {
    outcome = await storeCall(() =>
      deps.approvals.answer(request, { at: now, decision: 'approved', grantId: grant.id }),
    );
  } catch (error) {
    // Without its answer the grant would open the account behind a request still shown as waiting.
    await deps.approvals.endGrant(grant, { at: now, by: 'customer' }).catch(() => {});
    throw error;
  }
  if (!outcome.changedNow) {
    await storeCall(() => deps.approvals.endGrant(grant, { at: nowInSeconds(), by: 'customer' }));
    throw answeredAlready(outcome.record);
  }
  return { request: toRequestView(outcome.record, grant, now), grant: toGrantView(grant, now) };
}

/** Denies a request, with the customer's reason when they give one. */
export async function denyRequest(
  deps: ApprovalDeps,
  customer: string,
  requestId: string,
  input: { reason?: string },
): Promise<{ request: ApprovalRequestView }> {
  const request = await openRequest(deps, customer, requestId);
  const now = nowInSeconds();
  const outcome = await storeCall(() =>
    deps.approvals.answer(request, {
      at: now,
      decision: 'denied',
      ...(input.reason === undefined ? {} : { reason: input.reason }),
    }),
  );
  if (!outcome.changedNow) throw answeredAlready(outcome.record);
  return { request: toRequestView(outcome.record, undefined, now) };
}

function settings(deps: ApprovalDeps): ResolvedApprovalOptions {
  if (!deps.options.approvals) throw misconfigured('the customer approval actions need the approvals option');
  return deps.options.approvals;
}

function assertDuration(approvals: ResolvedApprovalOptions, duration: number): void {
  if (!Number.isSafeInteger(duration) || duration < 1 || duration > approvals.maxGrantDuration) {
    throw badRequest(`duration must be an integer number of seconds from 1 to ${approvals.maxGrantDuration}`);
  }
}

async function assertRoomForGrant(deps: ApprovalDeps, customer: string): Promise<void> {
  const { maxGrantsPerCustomer } = settings(deps);
  const inForce = await storeCall(() => deps.approvals.activeGrants(customer, maxGrantsPerCustomer));
  if (inForce.length >= maxGrantsPerCustomer) {
    throw tooManyGrants(`a customer may hold at most ${maxGrantsPerCustomer} grants in force; end one first`);
  }
}

/** The customer's grant; another customer's is as unknown as an id no grant has. */
async function customersGrant(deps: ApprovalDeps, customer: string, grantId: string): Promise<AccessGrant> {
  const grant = isAccessGrantId(grantId) ? await storeCall(() => deps.approvals.findGrant(grantId)) : undefined;
  if (!grant || grant.subject !== customer) throw notFound('not_found', 'no access grant has this id');
  return grant;
}

/**
 * The customer's request, still waiting for an answer. One found waiting past
 * its expiry is answered `expired` now, so that its expiry is recorded once.
 */
async function openRequest(deps: ApprovalDeps, customer: string, requestId: string): Promise<ApprovalRequest> {
  const request = isApprovalRequestId(requestId)
    ? await storeCall(() => deps.approvals.findRequest(requestId))
    : undefined;
  if (!request || request.subject !== customer) throw notFound('not_found', 'no approval request has this id');
  if (request.answer) throw answeredAlready(request);
  if (requestStateOf(request) === 'expired') {
    const outcome = await storeCall(() => deps.approvals.answer(request, { at: nowInSeconds(), decision: 'expired' }));
    throw answeredAlready(outcome.record);
  }
  return request;
}

/** The 409 of a request answered before this answer: expired, or answered by another call. */
function answeredAlready(request: ApprovalRequest) {
  return request.answer?.decision === 'expired' || (!request.answer && requestStateOf(request) === 'expired')
    ? requestClosed('request_expired', 'the approval request expired before it was answered')
    : requestClosed('already_answered', 'the approval request was answered already');
}

function nowInSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
