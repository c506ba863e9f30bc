import type { EventEmitter } from 'node:events';
import type Koa from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import { reportError } from '../report-error.js';
import { closeSession } from './close.js';
import type { EndReason } from './record.js';
import type { SessionStore } from './store.js';

/** Ends the impersonations an actor started from an oidc-provider session when it or its Grant ends. */
export function endWithActor(provider: Provider, sessions: SessionStore): void {
  const emitter = provider as unknown as EventEmitter;

  emitter.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
    const reason: EndReason = ctx?.oidc?.route === 'end_session_confirm' ? 'actor_logout' : 'actor_grant_revoked';
    report(endAll(provider, sessions, { grantId }, reason, ctx), ctx);
  });

  emitter.on('session.destroyed', (session: { uid?: unknown; accountId?: unknown }) => {
    const { uid } = session;
    // An anonymous caller can have an unsigned-in session destroyed: it must not make the store write a mark.
    if (typeof uid !== 'string' || session.accountId === undefined) return;
    // oidc-provider destroys a rotated session's old entry; its uid lives on.
    report(
      provider.Session.findByUid(uid).then((alive) =>
        alive ? undefined : endAll(provider, sessions, { sessionUid: uid }, 'actor_logout', undefined),
      ),
      undefined,
    );
  });

  function report(work: Promise<unknown>, ctx: Koa.Context | undefined): void {
    work.catch((error: unknown) => reportError(provider, error, ctx));
  }
}

async function endAll(
  provider: Provider,
  sessions: SessionStore,
  actor: { grantId: string } | { sessionUid: string },
  reason: EndReason,
  ctx: Koa.Context | undefined,
): Promise<void> {
  // Invariant 23: marked if announced; a failed mark is reported and the sessions still end.
  let markFailure: { error: unknown } | undefined;
  await sessions.markEnded(actor, true).catch((error: unknown) => {
    markFailure = { error };
  });
  const ids = await sessions.startedWith(actor);
  await Promise.all(
    ids.map(async (id) => {
      const record = await sessions.find(id);
      if (record) await closeSession(provider, sessions, record, { endReason: reason }, ctx);
    }),
  );
  if (markFailure) throw markFailure.error;
}
