import type Koa from 'koa';
import { publish } from '../events/publish.js';
import { EVENTS } from '../event-types.js';
import { closeSession } from '../sessions/close.js';
import type { ApprovalDependencies } from './deps.js';
import { nowSeconds } from './deps.js';
import { grantEvent } from './events.js';
import type { AccessGrant } from './record.js';

/** Ends a grant once, then its sessions (Invariant 34); ending again finishes a failed attempt. */
export async function endGrantAndSessions(
  { provider, approvals, sessions }: ApprovalDependencies,
  grant: AccessGrant,
  ctx: Koa.Context | undefined,
): Promise<AccessGrant> {
  const { record, changedNow } = await approvals.endGrant(grant, { at: nowSeconds(), by: 'customer' });
  if (changedNow) {
    await publish(provider, grantEvent(EVENTS.accessGrantEnded, record), ctx);
  }
  await sessions.markEnded({ accessGrantId: grant.id });
  const ids = await sessions.startedWith({ accessGrantId: grant.id });
  await Promise.all(
    ids.map(async (id) => {
      const session = await sessions.find(id);
      if (session) {
        await closeSession(provider, sessions, session, { endReason: 'access_grant_ended' }, ctx);
      }
    }),
  );
  return record;
}
