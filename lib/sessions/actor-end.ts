import type { EventEmitter } from 'node:events';
import type Koa from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import { reportError } from '../report-error.js';
import { closeSession } from './close.js';
import type { EndReason } from './record.js';
import type { SessionStore } from './store.js';

/**
 * Ends every impersonation that an actor started from an oidc-provider session
 * when that session or its Grant ends: an RP-initiated logout (which revokes
 * the Grant and destroys the session), a Grant revoked at the revocation
 * endpoint, a session destroyed otherwise. oidc-provider emits these during
 * the request that causes them; the sessions are ended right after, and a
 * failure to do so is reported on the provider's `error` event, as any error
 * of its app.
 */
export function endWithActor(provider: Provider, sessions: SessionStore): void {
  const emitter = provider as unknown as EventEmitter;

  emitter.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
    const reason: EndReason = ctx?.oidc?.route === 'end_session_confirm' ? 'actor_logout' : 'actor_grant_revoked';
    report(endAll(provider, sessions, { grantId }, reason, ctx), ctx);
  });

  emitter.on('session.destroyed', (session: { uid?: unknown; accountId?: unknown }) => {
    const { uid } = session;
    // A session nobody signed in to started nothing; an anonymous caller can have one destroyed
    // (a sign-out form posted without a sign-in), and must not make the store write a mark.
    if (typeof uid !== 'string' || session.accountId === undefined) return;
    // oidc-provider also destroys a session's old entry when it rotates its id; the uid lives on then.
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
  // Marked first, if an exchange announced it: one in flight that read the actor token before the end is refused by its commit.
  // A mark that cannot be written does not keep the sessions found from being ended; its failure is reported.
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
