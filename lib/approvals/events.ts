import type { ImpersonationEvent } from '../audit/events.js';
import type { AccessGrant, ApprovalRequest } from './record.js';

/** What an event says of an access grant: who gave what to whom, until when; never the note, which is for people. */
export function grantEvent(grant: AccessGrant): ImpersonationEvent {
  const event: ImpersonationEvent = { accessGrantId: grant.id, subject: grant.subject, expiresAt: grant.expiresAt };
  if (grant.actor !== undefined) event.actor = grant.actor;
  if (grant.resource !== undefined) event.resource = grant.resource;
  if (grant.scope !== undefined) event.scope = grant.scope.join(' ');
  if (grant.approvalRequestId !== undefined) event.approvalRequestId = grant.approvalRequestId;
  return event;
}

/** What an event says of an approval request: who asks to act as whom, for what, and why (its context). */
export function requestEvent(request: ApprovalRequest): ImpersonationEvent {
  const event: ImpersonationEvent = {
    approvalRequestId: request.id,
    subject: request.subject,
    actor: request.actor,
    createdBy: request.requestedBy,
    context: request.context,
    expiresAt: request.expiresAt,
  };
  if (request.clientId !== undefined) event.clientId = request.clientId;
  if (request.resource !== undefined) event.resource = request.resource;
  if (request.scope !== undefined) event.scope = request.scope.join(' ');
  return event;
}
