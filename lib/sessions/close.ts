import type Koa from 'koa';
import { publish } from '../events/publish.js';
import type { EventBus } from '../events/subscriber.js';
import { EVENTS, type EndReason, type ImpersonationEvent } from '../event-types.js';
import { definedMembers } from '../json.js';
import { stateOf, type SessionRecord } from './record.js';
import type { Origin, SessionStore } from './store.js';

type CloseRequest = { revokedBy: string; reason?: string | undefined } | { endReason: EndReason };

/** Stops a session (Invariant 31); with `record` false the trail does not record the stop. */
export async function closeSession(
  bus: EventBus,
  sessions: SessionStore,
  record: SessionRecord,
  request: CloseRequest,
  ctx: Koa.Context | undefined,
  { record: recorded = true }: { record?: boolean } = {},
): Promise<SessionRecord> {
  if (stateOf(record) !== 'active') return record;
  // Invariant 32: mark, delegations, then itself.
  await sessions.markEnded({ parentSessionId: record.id });
  await closeStartedWith(bus, sessions, { parentSessionId: record.id }, 'parent_session_stopped', ctx);
  if (record.grantId !== undefined) {
    const { AccessToken, Grant } = bus.provider;
    await Promise.all([AccessToken.revokeByGrantId(record.grantId), Grant.adapter.destroy(record.grantId)]);
  }
  const at = Math.floor(Date.now() / 1000);
  const reason = 'revokedBy' in request && request.reason ? { reason: request.reason } : {};
  const { record: closed, closedNow } = await sessions.close(
    record,
    'revokedBy' in request
      ? { revoked: { at, by: request.revokedBy, ...reason } }
      : { ended: { at, reason: request.endReason } },
  );
  if (!closedNow) return closed;

  const stopped = {
    ...definedMembers({ parentSessionId: record.parentSessionId }),
    sessionId: record.id,
    subject: record.subject,
    ...definedMembers({ actor: record.actor }),
    clientId: record.clientId,
    resource: record.resource,
    scope: record.scope.join(' '),
    context: record.context,
    subjectTokenId: record.subjectTokenId,
    accessTokenId: record.accessTokenId,
    expiresAt: record.expiresAt,
  };
  const event: ImpersonationEvent<typeof EVENTS.sessionRevoked | typeof EVENTS.sessionEnded> =
    'revokedBy' in request
      ? { name: EVENTS.sessionRevoked, ...stopped, revokedBy: request.revokedBy, ...reason }
      : {
          name: EVENTS.sessionEnded,
          ...stopped,
          endReason: request.endReason,
          ...definedMembers({ accessGrantId: record.accessGrantId }),
        };
  // The stop stands without its record or notification; webhooks never hear of a delegation's (docs/webhooks.md).
  await publish(bus, event, ctx, { record: recorded, delegation: record.type === 'delegation' });
  return closed;
}

/** Stops every session started from `origin` (Invariant 32: delegations with their parent), for `endReason`. */
export async function closeStartedWith(
  bus: EventBus,
  sessions: SessionStore,
  origin: Origin,
  endReason: EndReason,
  ctx: Koa.Context | undefined,
): Promise<void> {
  const ids = await sessions.startedWith(origin);
  await Promise.all(
    ids.map(async (id) => {
      const session = await sessions.find(id);
      // A session is never stopped as its own delegation.
      if (session && !Object.values(origin).includes(session.id)) {
        await closeSession(bus, sessions, session, { endReason }, ctx);
      }
    }),
  );
}
