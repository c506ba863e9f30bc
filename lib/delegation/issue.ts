import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { EVENTS } from '../audit/events.js';
import type { AuditSink } from '../audit/sink.js';
import { invalidRequest } from '../errors.js';
import { assignTokenId, newBackingGrant } from '../provider-internals.js';
import { stateOf, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import type { DelegationSucceeded } from './report.js';

export interface Issuance {
  token: AccessToken;
  session: SessionRecord;
  /** The success event, built once the session names its token. */
  event: () => DelegationSucceeded;
}

/**
 * Writes the session, then the token, then the trail's row; on any failure
 * undoes what was written and rethrows, so that a refused delegation leaves
 * no live token and no listed session. The session it was delegated from is
 * read again once this one is listed under it: a stop that came before found
 * nothing to stop, one that comes after finds this one and stops it too.
 * Resolves the token's value.
 */
export async function issueDelegated(
  ctx: KoaContextWithOIDC,
  sessions: SessionStore,
  auditLog: AuditSink | undefined,
  { token, session, event }: Issuance,
): Promise<string> {
  const provider = ctx.oidc.provider;
  ctx.oidc.entity('AccessToken', token);
  const jti = assignTokenId(token); // sets token.format too: read it only after
  session.accessTokenId = publicTokenId(token.format, jti);
  try {
    const value = await save(provider, token, session, sessions);
    // Read once the session is listed: a stop whose lookup of delegations came before the listing
    // marked the parent ended first (see closeSession), so the mark is seen here.
    await Promise.all([
      session.parentSessionId === undefined ? undefined : confirmActive(sessions, session.parentSessionId, true),
      auditLog?.append(EVENTS.delegationSucceeded, Object.freeze(event())),
    ]);
    return value;
  } catch (error) {
    await discard(provider, token, session, sessions);
    throw error;
  }
}

/**
 * The session a subject token names must still be active: a stopped
 * impersonation delegates nothing. With `orMarked`, read once the delegation
 * is listed, its stop's mark counts too, though its record may not say so yet.
 * Resolves the session's record.
 */
export async function confirmActive(sessions: SessionStore, id: string, orMarked = false): Promise<SessionRecord> {
  const [parent, marked] = await Promise.all([
    sessions.find(id),
    orMarked ? sessions.hasEnded({ parentSessionId: id }) : false,
  ]);
  if (!parent || stateOf(parent) !== 'active' || marked) {
    throw invalidRequest('subject_token belongs to a session that was stopped');
  }
  return parent;
}

/** As for impersonation: an opaque token is backed by a Grant of its own, which stopping the session revokes. */
async function save(
  provider: Provider,
  token: AccessToken,
  session: SessionRecord,
  sessions: SessionStore,
): Promise<string> {
  if (token.format !== 'opaque') {
    const [value] = await Promise.all([token.save(), sessions.save(session)]);
    return value;
  }
  const grant = newBackingGrant(provider, {
    jti: randomBytes(32).toString('base64url'),
    accountId: session.subject,
    clientId: session.clientId,
    resource: session.resource,
    scope: session.scope,
    expiresIn: session.expiresAt - session.createdAt,
  });
  session.grantId = grant.jti;
  token.grantId = grant.jti;
  await Promise.all([grant.save(), sessions.save(session)]);
  return token.save();
}

async function discard(
  provider: Provider,
  token: AccessToken,
  session: SessionRecord,
  sessions: SessionStore,
): Promise<void> {
  await Promise.all([
    token.format === 'opaque' ? token.destroy() : undefined,
    session.grantId === undefined ? undefined : provider.Grant.adapter.destroy(session.grantId),
    sessions.discard(session),
  ]).catch(() => {
    // The store is failing; all of it expires on its own and nobody ever received the token.
  });
}
