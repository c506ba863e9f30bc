import type { EventEmitter } from 'node:events';
import type { AccessToken, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { reportError } from '../report-error.js';
import { closeSession } from './close.js';
import type { SessionStore } from './store.js';

/**
 * Ends the delegations exchanged from an opaque access token when the token
 * is revoked (RFC 7009, at the provider's revocation endpoint; oidc-provider
 * emits `access_token.destroyed`): what was exchanged from it is revoked with
 * it, as Keycloak and Spring Authorization Server do. An opaque delegated
 * token loses its Grant; a JWT one enters the revocation feed, which the
 * resource-server helper honours. Marked first (when a delegation announced
 * the token), so that one being issued from it meets the mark at its commit. A failure is reported
 * on the provider's `error` event, as any error of its app.
 */
export function endWithSubjectToken(provider: Provider, sessions: SessionStore): void {
  const emitter = provider as unknown as EventEmitter;
  emitter.on('access_token.destroyed', (token: AccessToken) => {
    if (typeof token?.jti !== 'string') return;
    const origin = { subjectTokenId: publicTokenId('opaque', token.jti) };
    endAll(provider, sessions, origin).catch((error: unknown) => reportError(provider, error));
  });
}

async function endAll(provider: Provider, sessions: SessionStore, origin: { subjectTokenId: string }): Promise<void> {
  await sessions.markEnded(origin, true);
  const ids = await sessions.startedWith(origin);
  await Promise.all(
    ids.map(async (id) => {
      const record = await sessions.find(id);
      if (record) await closeSession(provider, sessions, record, { endReason: 'subject_token_revoked' }, undefined);
    }),
  );
}
