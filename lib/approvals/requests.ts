import type Koa from 'koa';
import { EVENTS } from '../event-types.js';
import { publish } from '../events/publish.js';
import { unknownRecord } from '../errors.js';
import { storeCall } from '../store-call.js';
import type { ApprovalDependencies } from './deps.js';
import { requestEvent } from './events.js';
import { isApprovalRequestId, requestStateOf, type ApprovalRequest } from './record.js';
import { approvalRequestView, type ApprovalRequestView } from './view.js';

/** A request found past its expiry is answered `expired` through the same once-only answer (Invariant 36). */
export async function settleExpiry(
  { bus, approvals }: ApprovalDependencies,
  request: ApprovalRequest,
  ctx: Koa.Context | undefined,
): Promise<ApprovalRequest> {
  if (request.answer || requestStateOf(request) !== 'expired') return request;
  const expired = { at: request.expiresAt, decision: 'expired' } as const;
  const { record, changedNow } = await storeCall(() => approvals.answer(request, expired));
  if (changedNow) await publish(bus, requestEvent(EVENTS.approvalExpired, record), ctx);
  return record;
}

/** The request as shown, with the grant it became when it was approved. */
export async function viewOf(deps: ApprovalDependencies, request: ApprovalRequest): Promise<ApprovalRequestView> {
  const grantId = request.answer?.decision === 'approved' ? request.answer.grantId : undefined;
  const grant = grantId === undefined ? undefined : await storeCall(() => deps.approvals.findGrant(grantId));
  return approvalRequestView(request, grant);
}

/** A request as `accept` allows it to be seen, any other answered exactly as an unknown id; its expiry recorded when it is past. */
export async function findSettledAs(
  deps: ApprovalDependencies,
  id: string,
  accept: (request: ApprovalRequest) => boolean,
  ctx: Koa.Context | undefined,
): Promise<ApprovalRequest> {
  const request = isApprovalRequestId(id) ? await storeCall(() => deps.approvals.findRequest(id)) : undefined;
  if (!request || !accept(request)) throw unknownRecord('not_found', 'no approval request has this id');
  return settleExpiry(deps, request, ctx);
}
