import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { EVENTS, type ImpersonationEvent } from '../audit/events.js';
import { journalOf } from '../audit/journal.js';
import { exchangeTooSlow, invalidGrant, invalidRequest } from '../errors.js';
import type { ResolvedOptions } from '../options.js';
import { assignTokenId, newBackingGrant } from '../provider-internals.js';
import type { SessionRecord } from '../sessions/record.js';
import { isAccessGrantMark, type SessionStore } from '../sessions/store.js';
import type { CommitOutcome } from '../adapters/contract.js';
import { SUBJECT_TOKEN_MODEL } from '../subject-tokens/store.js';
import { notificationOf } from '../webhooks/notify.js';

/**
 * How long an exchange may run between its first read and its commit. The
 * marks that origins ended (a sign-out, a customer's grant ended) outlive it,
 * so that every exchange that read an origin before its end meets the mark.
 */
export const EXCHANGE_DEADLINE_MS = 120_000;

export interface Commit {
  token: AccessToken;
  session: SessionRecord;
  /** The store key of the subject token to redeem. */
  subjectTokenKey: string;
  /** When the exchange began reading (ms since the epoch). */
  startedAt: number;
  /** The success event, as the trail records it; built once the token is named. */
  event: () => ImpersonationEvent<typeof EVENTS.exchangeSucceeded>;
  /** Called once the trail holds the success row. */
  successRecorded: () => void;
}

export interface CommitStores {
  options: ResolvedOptions;
  sessions: SessionStore;
}

/**
 * Issues the token and commits the exchange. What the provider's adapter
 * keeps (an opaque token and the Grant behind it) and the trail's row (unless
 * the trail is in the store's database) are written first: either failing
 * stops the exchange with nothing burned and nothing listed. Then one store
 * operation redeems the subject token, lists the session, appends the
 * exchange's notifications and, in the store's database, the trail's row,
 * unless the actor's sign-in or the customer's grant was marked ended since
 * the exchange read them; a lost race or a refusal there writes nothing of
 * ours, and the provider's token and Grant are withdrawn.
 * Resolves the access token's value.
 */
export async function commit(
  ctx: KoaContextWithOIDC,
  { options, sessions }: CommitStores,
  { token, session, subjectTokenKey, startedAt, event, successRecorded }: Commit,
): Promise<string> {
  const provider = ctx.oidc.provider;
  ctx.oidc.entity('AccessToken', token);
  const jti = assignTokenId(token); // sets token.format too: read it only after
  session.accessTokenId = publicTokenId(token.format, jti);
  // The trail's row: in the commit's own transaction when the trail is in the store's database,
  // otherwise appended first (group commit).
  const journal = journalOf(options.auditLog);
  const inCommit = journal !== undefined && sessions.sharesDatabase(journal.database);
  // The notifications go in the commit too: none for an exchange that does not happen, and
  // no token without its notifications.
  const notification = notificationOf(provider, event());
  let value: string;
  let committed: CommitOutcome & { outcome: 'committed' };
  try {
    // The record of the issuance is durable before the subject token is
    // redeemed, or with it: a trail that cannot be written stops the exchange
    // with nothing burned. Appended first, a lost race below is recorded as a
    // refusal after it; in the commit, it leaves no row.
    [value] = await Promise.all([
      issue(provider, token, session),
      inCommit
        ? journal.ready()
        : options.auditLog?.append(EVENTS.exchangeSucceeded, Object.freeze(event())).then(successRecorded),
    ]);
    // Checked last before the commit: an exchange that ran past the deadline may have read an
    // origin whose end mark is gone already.
    if (Date.now() - startedAt > EXCHANGE_DEADLINE_MS) throw exchangeTooSlow(EXCHANGE_DEADLINE_MS);
    const outcome = await sessions.commit(
      session,
      { model: SUBJECT_TOKEN_MODEL, id: subjectTokenKey },
      {
        ...(inCommit
          ? {
              journal: {
                appendFunction: journal.appendFunction,
                rows: journal.rows(EVENTS.exchangeSucceeded, event()),
              },
            }
          : {}),
        ...(notification ? { outbox: notification } : {}),
      },
    );
    if (outcome.outcome === 'consumed') throw invalidRequest('subject_token was already used');
    if (outcome.outcome === 'guarded') {
      throw isAccessGrantMark(outcome.guard)
        ? invalidGrant("the customer's access grant ended")
        : invalidRequest('actor_token was revoked, or its sign-in ended, during the exchange');
    }
    committed = outcome;
  } catch (error) {
    await withdraw(provider, token, session);
    throw error;
  }
  // Committed: from here on nothing may fail the exchange, whose token is its own now.
  if (inCommit) {
    successRecorded();
    await journal.committed(committed.journaled ?? []);
  }
  try {
    notification?.dropped(committed.dropped ?? []);
  } catch (error) {
    // A listener of the drop event threw: reported as any error of the provider's app.
    (provider as unknown as NodeJS.EventEmitter).emit('error', error, ctx);
  }
  return value;
}

/**
 * The token, and for an opaque one the Grant behind it, so that
 * introspection, userinfo and revocation treat it as oidc-provider treats any
 * token, and closing the session revokes the Grant. Both written at once:
 * neither reads the other.
 */
async function issue(provider: Provider, token: AccessToken, session: SessionRecord): Promise<string> {
  if (token.format !== 'opaque') return token.save();
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
  const [value] = await Promise.all([token.save(), grant.save()]);
  return value;
}

/** What the provider's adapter may hold of an exchange that did not commit: none of it may stay live. */
async function withdraw(provider: Provider, token: AccessToken, session: SessionRecord): Promise<void> {
  if (token.format !== 'opaque') return;
  await Promise.all([
    token.destroy(),
    session.grantId === undefined ? undefined : provider.Grant.adapter.destroy(session.grantId),
  ]).catch(() => {
    // The store is failing; both expire on their own and nobody ever received the token.
  });
}
