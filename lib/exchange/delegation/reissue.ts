import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import { invalidRequest } from '../../errors.js';
import { assignTokenId } from '../../provider-internals.js';
import { stateOf, type SessionRecord } from '../../sessions/record.js';
import type { SessionStore } from '../../sessions/store.js';

/** One more token under a live delegation: nothing of the plugin's written (Invariant 26); resolves its value. */
export async function reissueDelegated(
  ctx: KoaContextWithOIDC,
  sessions: SessionStore,
  token: AccessToken,
  session: SessionRecord,
): Promise<string> {
  ctx.oidc.entity('AccessToken', token);
  assignTokenId(token);
  // The delegation's key names the token format: a session whose tokens are opaque has their Grant.
  if (token.format === 'opaque') token.grantId = session.grantId!;
  if (session.parentSessionId !== undefined) await confirmActive(sessions, session.parentSessionId, true);
  return token.save();
}

/** The session a subject token names, still active; with `orMarked`, its stop's mark counts too. */
export async function confirmActive(sessions: SessionStore, id: string, orMarked = false): Promise<SessionRecord> {
  const [parent, marked] = await Promise.all([
    sessions.find(id),
    orMarked ? sessions.hasEnded({ parentSessionId: id }) : false,
  ]);
  return assertActive(parent, marked);
}

/** `session`, read already, unless it is gone, no longer active, or `marked` ended. */
export function assertActive(session: SessionRecord | undefined, marked = false): SessionRecord {
  if (!session || stateOf(session) !== 'active' || marked) {
    throw invalidRequest('subject_token belongs to a session that was stopped');
  }
  return session;
}
