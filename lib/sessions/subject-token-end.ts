import type { EventEmitter } from 'node:events';
import type { AccessToken, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { reportError } from '../report-error.js';
import { closeSession } from './close.js';
import type { SessionStore } from './store.js';

/** Ends the delegations exchanged from an opaque token revoked at the revocation endpoint (marked first, Invariant 23). */
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
