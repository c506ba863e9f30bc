import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import { invalidRequest } from '../../errors.js';
import { assignTokenId } from '../../provider-internals.js';
import { stateOf, type SessionRecord } from '../../sessions/record.js';
import type { SessionStore } from '../../sessions/store.js';

/**
 * Issues one more token under a live delegation, for the same subject token,
 * client, resource, scope and `act` chain: nothing of the plugin's is
 * written, no trail row, no event (the session's own say who acts for whom,
 * where, until when), and an opaque token joins the session's Grant.
 * `session` was found active and unmarked by the caller (its record and its
 * end mark, SessionStore.liveDelegation, or its mark alone for a record
 * remembered by LiveDelegations); the one it was delegated from is read
 * here, record and mark: a stop that came before refuses it; one that comes
 * after has revoked the session's Grant, which an opaque token saved later
 * is dead without, or put the session on the feed, which stops its JWTs.
 * Resolves the token's value.
 */
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

/**
 * The session a subject token names must still be active: a stopped
 * impersonation delegates nothing. With `orMarked`, read once the delegation
 * is listed, its stop's mark counts too, though its record may not say so yet.
 * Resolves the session.
 */
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
