import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import { publish } from '../events/publish.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import type { EndReason, SessionRecord } from './record.js';
import { stateOf } from './record.js';
import type { SessionStore } from './store.js';

export type CloseRequest = { revokedBy: string; reason?: string } | { endReason: EndReason };

/** Stops a session (Invariant 31); with `record` false the trail does not record the stop. */
export async function closeSession(
  provider: Provider,
  sessions: SessionStore,
  record: SessionRecord,
  request: CloseRequest,
  ctx: Koa.Context | undefined,
  { record: recorded = true }: { record?: boolean } = {},
): Promise<SessionRecord> {
  if (stateOf(record) !== 'active') return record;
  // Invariant 32: mark, delegations, then itself.
  await sessions.markEnded({ parentSessionId: record.id });
  await closeDelegations(provider, sessions, record, ctx);
  if (record.grantId !== undefined) {
    await Promise.all([
      provider.AccessToken.revokeByGrantId(record.grantId),
      provider.Grant.adapter.destroy(record.grantId),
    ]);
  }
  const at = Math.floor(Date.now() / 1000);
  const { record: closed, closedNow } = await sessions.close(
    record,
    'revokedBy' in request
      ? { revoked: { at, by: request.revokedBy, ...(request.reason ? { reason: request.reason } : {}) } }
      : { ended: { at, reason: request.endReason } },
  );
  if (!closedNow) return closed;

  const stopped = {
    ...(record.parentSessionId === undefined ? {} : { parentSessionId: record.parentSessionId }),
    sessionId: record.id,
    subject: record.subject,
    ...(record.actor === undefined ? {} : { actor: record.actor }),
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
      ? {
          name: EVENTS.sessionRevoked,
          ...stopped,
          revokedBy: request.revokedBy,
          ...(request.reason ? { reason: request.reason } : {}),
        }
      : {
          name: EVENTS.sessionEnded,
          ...stopped,
          endReason: request.endReason,
          ...(record.accessGrantId === undefined ? {} : { accessGrantId: record.accessGrantId }),
        };
  // The stop stands without its record or notification; webhooks never hear of a delegation's (docs/webhooks.md).
  await publish(provider, event, ctx, { record: recorded, delegation: record.type === 'delegation' });
  return closed;
}

/** Every delegation whose subject token belonged to this session ends with it, and theirs with them. */
async function closeDelegations(
  provider: Provider,
  sessions: SessionStore,
  parent: SessionRecord,
  ctx: Koa.Context | undefined,
): Promise<void> {
  const ids = await sessions.startedWith({ parentSessionId: parent.id });
  await Promise.all(
    ids.map(async (id) => {
      const child = await sessions.find(id);
      if (child && child.id !== parent.id) {
        await closeSession(provider, sessions, child, { endReason: 'parent_session_stopped' }, ctx);
      }
    }),
  );
}
