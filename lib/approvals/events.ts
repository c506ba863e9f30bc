import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import { definedMembers } from '../json.js';
import type { AccessGrant, ApprovalRequest } from './record.js';

type GrantEventName = typeof EVENTS.accessGrantCreated | typeof EVENTS.accessGrantEnded;
type RequestEventName = typeof EVENTS.approvalRequested | typeof EVENTS.approvalDenied | typeof EVENTS.approvalExpired;

/** What an event says of an access grant: who gave what to whom, until when; never the note, which is for people. */
export function grantEvent<Name extends GrantEventName>(name: Name, grant: AccessGrant): ImpersonationEvent<Name> {
  return {
    name,
    accessGrantId: grant.id,
    subject: grant.subject,
    expiresAt: grant.expiresAt,
    ...definedMembers({ ...ceilingOf(grant), approvalRequestId: grant.approvalRequestId }),
  } satisfies ImpersonationEvent<GrantEventName> as ImpersonationEvent<Name>;
}

/** What an event says of an approval request: who asks to act as whom, for what, and why (its context). */
export function requestEvent<Name extends RequestEventName>(
  name: Name,
  request: ApprovalRequest,
): ImpersonationEvent<Name> {
  return {
    name,
    approvalRequestId: request.id,
    subject: request.subject,
    actor: request.actor,
    createdBy: request.requestedBy,
    context: request.context,
    expiresAt: request.expiresAt,
    ...definedMembers({ clientId: request.clientId, ...ceilingOf(request) }),
  } satisfies ImpersonationEvent<RequestEventName> as ImpersonationEvent<Name>;
}

/** What an event says of the ceiling a grant or a request names: the actor (a grant's may be anyone), resource and scope. */
function ceilingOf(named: AccessGrant | ApprovalRequest): { actor?: string; resource?: string; scope?: string } {
  return definedMembers({ actor: named.actor, resource: named.resource, scope: named.scope?.join(' ') });
}

/** The approval of a request, naming the grant it became. */
export function approvalEvent(
  request: ApprovalRequest,
  accessGrantId: string,
): ImpersonationEvent<typeof EVENTS.approvalApproved> {
  return { ...requestEvent(EVENTS.approvalRequested, request), name: EVENTS.approvalApproved, accessGrantId };
}
