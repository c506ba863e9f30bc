import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { EVENTS, type ImpersonationEvent } from '../audit/events.js';
import { invalidRequest } from '../errors.js';
import type { ResolvedOptions } from '../options.js';
import { assignTokenId, newBackingGrant } from '../provider-internals.js';
import type { SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import { notify } from '../webhooks/notify.js';
import { confirmActorToken } from './actor.js';

export interface Commit {
  token: AccessToken;
  session: SessionRecord;
  /** The store key of the subject token to redeem. */
  subjectTokenKey: string;
  /** An opaque actor token and its Grant and sign-in, read again once the session is listed under them. */
  actorToken: { value: string; grantId: string; sessionUid?: string } | undefined;
  /** The customer's access grant read again, once the session is listed under it. */
  confirmCustomerGrant: () => Promise<void>;
  /** The success event, as the trail records it; built once the token is named. */
  event: () => ImpersonationEvent<typeof EVENTS.exchangeSucceeded>;
  /** Called once the trail holds the success row. */
  successRecorded: () => void;
}

export interface CommitStores {
  options: ResolvedOptions;
  store: SubjectTokenStore;
  sessions: SessionStore;
}

/**
 * Writes what the exchange issues and redeems the subject token, last; on any
 * failure, undoes what was written and rethrows, so that a refused exchange
 * leaves no live token, no listed session, and its subject token unburned.
 * Resolves the access token's value.
 */
export async function commit(
  ctx: KoaContextWithOIDC,
  { options, store, sessions }: CommitStores,
  { token, session, subjectTokenKey, actorToken, confirmCustomerGrant, event, successRecorded }: Commit,
): Promise<string> {
  const provider = ctx.oidc.provider;
  ctx.oidc.entity('AccessToken', token);
  const jti = assignTokenId(token); // sets token.format too: read it only after
  session.accessTokenId = publicTokenId(token.format, jti);
  try {
    const value = await save(provider, token, session, sessions);
    // The record of the issuance is durable before the subject token is
    // redeemed: a trail that cannot be written stops the exchange with
    // nothing burned. A lost race below is recorded as a refusal after it.
    // The actor's sign-in, and the customer's grant, are read again now that
    // the session is listed under them: a sign-out or an end that came before
    // this point found nothing to end, one that comes after finds the session
    // and ends it.
    await Promise.all([
      actorToken === undefined ? undefined : confirmActorToken(ctx, actorToken.value, actorToken),
      confirmCustomerGrant(),
      options.auditLog?.append(EVENTS.exchangeSucceeded, Object.freeze(event())).then(successRecorded),
    ]);
    // Single use is decided here, by one atomic operation, after everything else passed.
    if (!(await store.redeem(subjectTokenKey))) throw invalidRequest('subject_token was already used');
    // No token goes out without its notification enqueued: a store that
    // cannot take it fails the exchange, which undoes the session and token
    // below (the subject token stays spent). Enqueued only once the exchange
    // is certain to succeed, so no receiver hears of one that lost the race.
    await notify(provider, event());
    return value;
  } catch (error) {
    await discard(provider, token, session, sessions);
    throw error;
  }
}

/**
 * The session is recorded before the token exists; an opaque token is backed
 * by a Grant of its own, so introspection, userinfo and revocation treat it as
 * oidc-provider treats any token, and revoking the session revokes the Grant.
 */
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

/** Some of it may have been written: none of it may stay live or listed. */
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
