import type Koa from 'koa';
import { publish } from '../events/publish.js';
import { EVENTS } from '../event-types.js';
import { closeStartedWith } from '../sessions/close.js';
import type { ApprovalDependencies } from './deps.js';
import { nowSeconds } from './deps.js';
import { grantEvent } from './events.js';
import type { AccessGrant } from './record.js';

/** Ends a grant once, then its sessions (Invariant 34); ending again finishes a failed attempt. */
export async function endGrantAndSessions(
  { bus, approvals, sessions }: ApprovalDependencies,
  grant: AccessGrant,
  ctx: Koa.Context | undefined,
): Promise<AccessGrant> {
  const { record, changedNow } = await approvals.endGrant(grant, { at: nowSeconds(), by: 'customer' });
  if (changedNow) {
    await publish(bus, grantEvent(EVENTS.accessGrantEnded, record), ctx);
  }
  await sessions.markEnded({ accessGrantId: grant.id });
  await closeStartedWith(bus, sessions, { accessGrantId: grant.id }, 'access_grant_ended', ctx);
  return record;
}
