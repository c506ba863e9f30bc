// A customer's own grants and requests; another customer's are answered as unknown ids; refusals are domain errors.
import type Koa from 'koa';
import { publish, publishRecorded } from '../events/publish.js';
import { EVENTS } from '../event-types.js';
import {
  conflictingState,
  deniedByPolicy,
  invalidInput,
  limitReached,
  serviceUnavailable,
  unknownRecord,
  type DomainError,
} from '../errors.js';
import { definedMembers } from '../json.js';
import { storeCall } from '../store-call.js';
import { assertApprovalAllowed } from '../policy/compose.js';
import { closeStartedWith } from '../sessions/close.js';
import { approvalSettings, nowSeconds, type ApprovalDependencies } from './deps.js';
import { approvalEvent, grantEvent, requestEvent } from './events.js';
import { fieldsOf, readDuration, readIdentifier, readResource, readScopeList, readText } from './input.js';
import {
  grantStateOf,
  isAccessGrantId,
  newAccessGrantId,
  requestStateOf,
  type AccessGrant,
  type ApprovalDecision,
  type ApprovalRequest,
} from './record.js';
import { findSettledAs, viewOf } from './requests.js';
import { accessGrantView } from './view.js';

/** The customer's grants in force, latest expiry first. */
export async function listGrants(deps: ApprovalDependencies, customer: string) {
  const settings = approvalSettings(deps.options, 'listGrants');
  const grants = await storeCall(() => deps.approvals.activeGrants(customer, settings.maxGrantsPerCustomer));
  return { items: grants.map((grant) => accessGrantView(grant)) };
}

/** Gives a standing grant (`duration` seconds up to `maxGrantDuration`); Invariant 35: none in force without its row. */
export async function giveGrant(deps: ApprovalDependencies, customer: string, input: unknown, ctx?: Koa.Context) {
  const settings = approvalSettings(deps.options, 'giveGrant');
  const fields = fieldsOf(input, ['duration', 'scope', 'resource', 'actorId', 'note']);
  const duration = readDuration(fields['duration'], settings.maxGrantDuration);
  const scope = readScopeList(fields['scope'], 'scope');
  const resource = readResource(fields['resource'], 'resource');
  const actor = readIdentifier(fields['actorId'], 'actorId');
  const note = readText(fields['note'], 'note');
  // Ahead of time as on a request: the decision point has its say before anything is written.
  await assertApprovalAllowed(deps.options.authzen, { customer, actor, scope }, deniedByPolicy);

  const grant = newGrant(customer, duration, {
    ...definedMembers({ actor, resource, scope, note }),
    origin: 'customer',
  });
  await reservePlace(deps, grant, settings.maxGrantsPerCustomer);
  await putInForce(deps, grant, ctx);
  return accessGrantView(grant);
}

/** Ends one of the customer's grants once, then its sessions (Invariant 34); ending again finishes a failed attempt. */
export async function endAccessGrant(deps: ApprovalDependencies, customer: string, grantId: string, ctx?: Koa.Context) {
  approvalSettings(deps.options, 'endAccessGrant');
  const grant = isAccessGrantId(grantId) ? await storeCall(() => deps.approvals.findGrant(grantId)) : undefined;
  if (!grant || grant.subject !== customer) throw unknownRecord('not_found', 'no access grant has this id');
  if (grantStateOf(grant) === 'expired') return;
  await storeCall(async () => {
    const { record, changedNow } = await deps.approvals.endGrant(grant, { at: nowSeconds(), by: 'customer' });
    if (changedNow) await publish(deps.bus, grantEvent(EVENTS.accessGrantEnded, record), ctx);
    await deps.sessions.markEnded({ accessGrantId: grant.id });
    await closeStartedWith(deps.bus, deps.sessions, { accessGrantId: grant.id }, 'access_grant_ended', ctx);
  });
}

/** The customer's requests waiting for an answer, latest expiry first. */
export async function listPendingRequests(deps: ApprovalDependencies, customer: string) {
  const settings = approvalSettings(deps.options, 'listPendingRequests');
  const requests = await storeCall(() => deps.approvals.pendingRequests(customer, settings.maxPendingPerCustomer));
  return { items: await Promise.all(requests.map((request) => viewOf(deps, request))) };
}

/** Approves a request: a grant bound to what the customer read, unless `widenApprovedGrants` (Invariant 36). */
export async function approveRequest(
  deps: ApprovalDependencies,
  customer: string,
  requestId: string,
  input: unknown,
  ctx?: Koa.Context,
) {
  const settings = approvalSettings(deps.options, 'approveRequest');
  const fields = fieldsOf(input, ['duration', 'scope']);
  const duration = readDuration(fields['duration'], settings.maxGrantDuration);
  const chosen = readScopeList(fields['scope'], 'scope');
  const request = await openRequest(deps, customer, requestId, ctx);
  const asked = request.scope;
  // The names asked are listed, never those sent: what a customer pastes may be anything.
  if (chosen && asked && chosen.some((name) => !asked.includes(name)))
    throw invalidInput(`scope may only narrow the scope asked: ${asked.join(' ')}`);
  const scope = chosen ?? request.scope;
  // The deployment's decision point, when it has one, has its say before the answer is written.
  const approval = { customer, actor: request.actor, clientId: request.clientId, scope, context: request.context };
  await assertApprovalAllowed(deps.options.authzen, approval, deniedByPolicy);

  const open = new Set(settings.widenApprovedGrants);
  const grant = newGrant(customer, duration, {
    actor: request.actor,
    ...definedMembers({ resource: request.resource, scope: scope && [...scope] }),
    origin: 'approval',
    approvalRequestId: request.id,
    ...(request.clientId === undefined || open.has('clientId') ? {} : { clientId: request.clientId }),
    ...(open.has('caller') ? {} : { requestedBy: request.requestedBy }),
    ...(open.has('context') ? {} : { context: request.context }),
  });
  // The place first: a customer at their bound gets a 429 and the request stays pending.
  await reservePlace(deps, grant, settings.maxGrantsPerCustomer);
  const answer = { at: grant.createdAt, decision: 'approved', grantId: grant.id } as const;
  const answered = await answerOnce(deps, request, answer).catch(async (error: unknown) => {
    await deps.approvals.releaseGrant(grant).catch(() => {});
    throw error;
  });
  await publish(deps.bus, approvalEvent(answered, grant.id), ctx);
  await putInForce(deps, grant, ctx);
  return { request: await viewOf(deps, answered), grant: accessGrantView(grant) };
}

/** Denies a request: `{ reason? }`, shown to the backend that asked. */
export async function denyRequest(
  deps: ApprovalDependencies,
  customer: string,
  requestId: string,
  input: unknown = {},
  ctx?: Koa.Context,
) {
  approvalSettings(deps.options, 'denyRequest');
  const reason = readText(fieldsOf(input, ['reason'])['reason'], 'reason');
  const request = await openRequest(deps, customer, requestId, ctx);
  const answer = { at: nowSeconds(), decision: 'denied', ...definedMembers({ reason }) } as const;
  const answered = await answerOnce(deps, request, answer);
  const event = requestEvent(EVENTS.approvalDenied, answered);
  if (reason !== undefined) event.reason = reason;
  await publish(deps.bus, event, ctx);
  return { request: await viewOf(deps, answered) };
}

/** One of the customer's requests still waiting; an answered or expired one is a 409 saying which. */
async function openRequest(deps: ApprovalDependencies, customer: string, requestId: string, ctx?: Koa.Context) {
  const settled = await findSettledAs(deps, requestId, (request) => request.subject === customer, ctx);
  const state = requestStateOf(settled);
  if (state !== 'pending') throw closed(state);
  return settled;
}

/** Writes the answer, unless another answer (or the expiry) won: then a 409 saying which. */
async function answerOnce(
  deps: ApprovalDependencies,
  request: ApprovalRequest,
  answer: NonNullable<ApprovalRequest['answer']>,
): Promise<ApprovalRequest> {
  const { record, changedNow } = await storeCall(() => deps.approvals.answer(request, answer));
  if (!changedNow) {
    // The winner may still be writing its answer: then it reads as answered, or as expired when it is.
    const state = requestStateOf(record);
    throw closed(state === 'pending' ? 'approved' : state);
  }
  return record;
}

function closed(decision: ApprovalDecision): DomainError<'conflict'> {
  return decision === 'expired'
    ? conflictingState('request_expired', 'the approval request expired before it was answered')
    : conflictingState('already_answered', 'the approval request was answered already');
}

/** Takes the grant's place within its customer's bounds, counted and taken in one store operation; 429 past either. */
async function reservePlace(deps: ApprovalDependencies, grant: AccessGrant, maxGrantsPerCustomer: number) {
  const bounds = {
    inForce: maxGrantsPerCustomer,
    givenPerDay: GRANTS_PER_DAY_PER_GRANT_IN_FORCE * maxGrantsPerCustomer,
  };
  const outcome = await storeCall(() => deps.approvals.reserveGrant(grant, bounds));
  if (outcome !== 'reserved') {
    throw limitReached(
      'too_many_grants',
      outcome === 'too_many_in_force'
        ? 'the customer has as many access grants in force as the deployment allows; end one first'
        : 'the customer gave as many access grants in the last 24 hours as the deployment allows',
    );
  }
}

function newGrant(
  customer: string,
  duration: number,
  given: Omit<AccessGrant, 'id' | 'subject' | 'createdAt' | 'expiresAt'>,
) {
  const createdAt = nowSeconds();
  return { id: newAccessGrantId(), subject: customer, ...given, createdAt, expiresAt: createdAt + duration };
}

/** Grants a customer may give in 24 hours per grant in force, so short-grant loops cannot fill shared stores. */
const GRANTS_PER_DAY_PER_GRANT_IN_FORCE = 5;

/** Invariant 35: none in force without its row. */
async function putInForce(deps: ApprovalDependencies, grant: AccessGrant, ctx: Koa.Context | undefined): Promise<void> {
  await storeCall(() => deps.approvals.saveGrant(grant));
  try {
    await publishRecorded(deps.bus, [grantEvent(EVENTS.accessGrantCreated, grant)], ctx);
  } catch (error) {
    await deps.approvals.endGrant(grant, { at: nowSeconds(), by: 'customer' }).catch(() => {});
    throw serviceUnavailable('the audit trail cannot be written; no access grant was given', error);
  }
}
