import type Koa from 'koa';
import { publish } from '../events/publish.js';
import { EVENTS } from '../events/types.js';
import { closeSession } from '../sessions/close.js';
import type { ApprovalDependencies } from './deps.js';
import { nowSeconds } from './deps.js';
import { grantEvent } from './events.js';
import type { AccessGrant } from './record.js';

/**
 * Ends a grant, once, and then every impersonation session it allowed,
 * through the sessions' own close: an opaque token's Grant is revoked, and
 * the session enters the revocation feed, which stops its JWTs at resource
 * servers. The grant ends first, so that no exchange starts under it while
 * its sessions are being closed; then its end is marked, so that an exchange
 * that read the grant before and commits after is refused by its commit,
 * while one that committed before is found by the lookup that follows.
 * Ending again closes whatever a failed first attempt left open, and reports
 * nothing twice.
 */
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
