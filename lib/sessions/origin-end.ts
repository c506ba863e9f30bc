import type { EventEmitter } from 'node:events';
import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import type { EndReason } from '../event-types.js';
import type { EventBus } from '../events/subscriber.js';
import { reportError } from '../report-error.js';
import { closeStartedWith } from './close.js';
import type { SessionStore } from './store.js';

/** Ends the sessions an actor's oidc-provider session or Grant started as it ends, and those of an opaque token revoked. */
export function endWithOrigins(bus: EventBus, sessions: SessionStore): void {
  const { provider } = bus;
  const emitter = provider as unknown as EventEmitter;

  emitter.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
    const reason: EndReason = ctx?.oidc?.route === 'end_session_confirm' ? 'actor_logout' : 'actor_grant_revoked';
    endAll(bus, sessions, { grantId }, reason, ctx).catch((error: unknown) => reportError(provider, error, ctx));
  });

  emitter.on('session.destroyed', (session: { uid?: unknown; accountId?: unknown }) => {
    const { uid } = session;
    // An anonymous caller can have an unsigned-in session destroyed: it must not make the store write a mark.
    if (typeof uid !== 'string' || session.accountId === undefined) return;
    // oidc-provider destroys a rotated session's old entry; its uid lives on.
    provider.Session.findByUid(uid)
      .then((alive) => (alive ? undefined : endAll(bus, sessions, { sessionUid: uid }, 'actor_logout', undefined)))
      .catch((error: unknown) => reportError(provider, error, undefined));
  });

  // The delegations exchanged from an opaque token revoked at the revocation endpoint (marked first, Invariant 23).
  emitter.on('access_token.destroyed', (token: AccessToken) => {
    if (typeof token?.jti !== 'string') return;
    const origin = { subjectTokenId: publicTokenId('opaque', token.jti) };
    sessions
      .markEnded(origin, true)
      .then(() => closeStartedWith(bus, sessions, origin, 'subject_token_revoked', undefined))
      .catch((error: unknown) => reportError(provider, error));
  });
}

async function endAll(
  bus: EventBus,
  sessions: SessionStore,
  actor: { grantId: string } | { sessionUid: string },
  reason: EndReason,
  ctx: KoaContextWithOIDC | undefined,
): Promise<void> {
  // Invariant 23: marked if announced; a failed mark is reported and the sessions still end.
  let markFailure: { error: unknown } | undefined;
  await sessions.markEnded(actor, true).catch((error: unknown) => {
    markFailure = { error };
  });
  await closeStartedWith(bus, sessions, actor, reason, ctx);
  if (markFailure) throw markFailure.error;
}
