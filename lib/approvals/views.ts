import type { JsonObject } from '../json.js';
import {
  grantStateOf,
  requestStateOf,
  type AccessGrant,
  type ApprovalRequest,
  type ApprovalState,
  type GrantState,
} from './record.js';

/** What the APIs show of an access grant. Times are RFC 3339; `scope` is space-separated, as OAuth writes it. */
export interface AccessGrantView {
  id: string;
  status: GrantState;
  /** The one actor it is for; `null`: any actor the deployment allows. */
  actor: string | null;
  resource?: string;
  scope?: string;
  note?: string;
  origin: AccessGrant['origin'];
  approvalRequestId?: string;
  createdAt: string;
  expiresAt: string;
  endedAt?: string;
}

/** What the APIs show of an approval request. */
export interface ApprovalRequestView {
  id: string;
  status: ApprovalState;
  subject: string;
  actor: string;
  clientId?: string;
  context: JsonObject;
  resource?: string;
  scope?: string;
  createdAt: string;
  expiresAt: string;
  answeredAt?: string;
  /** The grant an approval made, when the request was approved. */
  grant?: { id: string; expiresAt: string; scope?: string; resource?: string };
  denialReason?: string;
}

export function toGrantView(grant: AccessGrant, now = Date.now() / 1000): AccessGrantView {
  return {
    id: grant.id,
    status: grantStateOf(grant, now),
    actor: grant.actor ?? null,
    ...(grant.resource === undefined ? {} : { resource: grant.resource }),
    ...(grant.scope === undefined ? {} : { scope: grant.scope.join(' ') }),
    ...(grant.note === undefined ? {} : { note: grant.note }),
    origin: grant.origin,
    ...(grant.approvalRequestId === undefined ? {} : { approvalRequestId: grant.approvalRequestId }),
    createdAt: rfc3339(grant.createdAt),
    expiresAt: rfc3339(grant.expiresAt),
    ...(grant.ended ? { endedAt: rfc3339(grant.ended.at) } : {}),
  };
}

/** `grant`: the grant the request's approval made, when it is at hand. */
export function toRequestView(
  request: ApprovalRequest,
  grant?: AccessGrant,
  now = Date.now() / 1000,
): ApprovalRequestView {
  const { answer } = request;
  return {
    id: request.id,
    status: requestStateOf(request, now),
    subject: request.subject,
    actor: request.actor,
    ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
    context: request.context,
    ...(request.resource === undefined ? {} : { resource: request.resource }),
    ...(request.scope === undefined ? {} : { scope: request.scope.join(' ') }),
    createdAt: rfc3339(request.createdAt),
    expiresAt: rfc3339(request.expiresAt),
    ...(answer ? { answeredAt: rfc3339(answer.at) } : {}),
    ...(grant && answer?.grantId === grant.id
      ? {
          grant: {
            id: grant.id,
            expiresAt: rfc3339(grant.expiresAt),
            ...(grant.scope === undefined ? {} : { scope: grant.scope.join(' ') }),
            ...(grant.resource === undefined ? {} : { resource: grant.resource }),
          },
        }
      : {}),
    ...(answer?.decision === 'denied' && answer.reason !== undefined ? { denialReason: answer.reason } : {}),
  };
}

function rfc3339(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}
