import { definedMembers, type JsonObject } from '../json.js';
import { rfc3339 } from '../sessions/record.js';
import {
  grantStateOf,
  requestStateOf,
  type AccessCeiling,
  type AccessGrant,
  type ApprovalRequest,
  type ApprovalState,
  type GrantState,
} from './record.js';

/** What the customer and support are shown of an access grant. Times RFC 3339. */
export type AccessGrantView = Omit<AccessGrant, 'requestedBy' | 'createdAt' | 'expiresAt' | 'ended'> & {
  state: GrantState;
  createdAt: string;
  expiresAt: string;
  endedAt?: string;
  endedBy?: 'customer' | 'expiry';
};

/** The grant an approved request became, as the request shows it. */
export type ApprovedGrantView = Pick<AccessGrantView, 'id' | 'expiresAt' | 'resource' | 'scope'>;

/** What a backend (its creator) and the customer are shown of an approval request. Times RFC 3339. */
export interface ApprovalRequestView extends AccessCeiling {
  id: string;
  status: ApprovalState;
  subject: string;
  actor: string;
  clientId?: string;
  context: JsonObject;
  createdAt: string;
  expiresAt: string;
  answeredAt?: string;
  grant?: ApprovedGrantView;
  denialReason?: string;
}

export function accessGrantView(grant: AccessGrant): AccessGrantView {
  return {
    id: grant.id,
    subject: grant.subject,
    ...definedMembers({ actor: grant.actor, ...ceilingOf(grant), note: grant.note }),
    origin: grant.origin,
    ...definedMembers({ approvalRequestId: grant.approvalRequestId, clientId: grant.clientId, context: grant.context }),
    state: grantStateOf(grant),
    createdAt: rfc3339(grant.createdAt),
    expiresAt: rfc3339(grant.expiresAt),
    ...(grant.ended ? { endedAt: rfc3339(grant.ended.at), endedBy: grant.ended.by } : {}),
  };
}

/** `grant`: the grant an approved request became, while it is still kept. */
export function approvalRequestView(request: ApprovalRequest, grant?: AccessGrant): ApprovalRequestView {
  const { answer } = request;
  return {
    id: request.id,
    status: requestStateOf(request),
    subject: request.subject,
    actor: request.actor,
    ...definedMembers({ clientId: request.clientId }),
    context: request.context,
    ...ceilingOf(request),
    createdAt: rfc3339(request.createdAt),
    expiresAt: rfc3339(request.expiresAt),
    ...(answer ? { answeredAt: rfc3339(answer.at) } : {}),
    ...(answer?.decision === 'approved' && grant && grant.id === answer.grantId
      ? { grant: { id: grant.id, expiresAt: rfc3339(grant.expiresAt), ...ceilingOf(grant) } }
      : {}),
    ...(answer?.decision === 'denied' && answer.reason !== undefined ? { denialReason: answer.reason } : {}),
  };
}

function ceilingOf(record: AccessCeiling): AccessCeiling {
  return definedMembers({ resource: record.resource, scope: record.scope && [...record.scope] });
}
