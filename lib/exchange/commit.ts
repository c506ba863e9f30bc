import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { shareCommit } from '../events/commit.js';
import type { EVENTS, ImpersonationEvent } from '../events/types.js';
import { quotaRefusal, type DelegationCharge } from '../capacity.js';
import { exchangeTooSlow, invalidGrant, invalidRequest } from '../errors.js';
import type { ResolvedCoreOptions as ResolvedOptions } from '../core-options.js';
import { assignTokenId, newBackingGrant } from '../provider-internals.js';
import type { SessionRecord } from '../sessions/record.js';
import { closeSession } from '../sessions/close.js';
import { endedOrigin, type SessionStore } from '../sessions/store.js';
import { reportError } from '../report-error.js';
import type { CommitOutcome } from '../adapters/contracts/commit.js';
import { SUBJECT_TOKEN_MODEL } from '../subject-tokens/store.js';

/**
 * How long an exchange may run between its first read and its commit. The
 * marks that origins ended (a sign-out, a customer's grant ended) outlive it,
 * so that every exchange that read an origin before its end meets the mark.
 */
export const EXCHANGE_DEADLINE_MS = 120_000;

export interface Commit {
  token: AccessToken;
  session: SessionRecord;
  /** The store key of the subject token to redeem: an impersonation's; a delegation redeems none. */
  subjectTokenKey?: string | undefined;
  /** What a delegation's session is charged to (lib/capacity.ts): listed only within those shares. */
  quotas?: readonly DelegationCharge[] | undefined;
  /** When the exchange began reading (ms since the epoch). */
  startedAt: number;
  /** The success event, as the trail records it; built once the token is named. */
  event: () => ExchangeEvent;
  /** Whether the trail records the success (a delegation of a user's own token stays off it). */
  onTrail: boolean;
  /** Whether the success goes to the webhooks' outbox (an impersonation's; a delegation's does not). */
  notify: boolean;
  /** Announces, then reads again, what a user may end meanwhile (SessionStore.announce); beside the token's writes. */
  confirm?: (() => Promise<void>) | undefined;
}

export type ExchangeEvent = ImpersonationEvent<typeof EVENTS.exchangeSucceeded | typeof EVENTS.delegationSucceeded>;

export interface CommitStores {
  options: ResolvedOptions;
  sessions: SessionStore;
}

/**
 * Issues the token and commits the exchange, impersonation and delegation
 * alike. What the provider's adapter keeps (an opaque token and the Grant
 * behind it) is written first: failing, it stops the exchange with nothing
 * burned and nothing listed. Then one store operation redeems the subject
 * token (an impersonation's), charges the session to its principals' quotas
 * (a delegation's), lists the session, appends the exchange's notifications
 * and, in the store's database, the trail's row, unless an origin the
 * exchange was allowed by (the actor's sign-in, the customer's grant, the
 * session delegated from, the subject token) was marked ended since the
 * exchange read it; a lost race or a refusal there writes nothing of ours,
 * and the provider's token and Grant are withdrawn: they are in the
 * provider's adapter, which no operation of the plugin's store can span.
 * A trail outside the store's database gets the success row once the commit
 * happened; if it cannot take it, the session is ended, the token never
 * leaves and the subject token is given back. Resolves the access token's value.
 */
export async function commit(
  ctx: KoaContextWithOIDC,
  { sessions }: CommitStores,
  { token, session, subjectTokenKey, quotas, startedAt, event, onTrail, notify, confirm }: Commit,
): Promise<string> {
  const provider = ctx.oidc.provider;
  ctx.oidc.entity('AccessToken', token);
  const jti = assignTokenId(token); // sets token.format too: read it only after
  session.accessTokenId = publicTokenId(token.format, jti);
  // What the event's subscribers write with the commit (lib/events/commit.ts), and after it.
  const participation = shareCommit(
    provider,
    event(),
    { sharesDatabase: (database) => sessions.sharesDatabase(database) },
    { record: onTrail, delegation: !notify },
  );
  const redeem = subjectTokenKey === undefined ? undefined : { model: SUBJECT_TOKEN_MODEL, id: subjectTokenKey };
  let value: string;
  let committed: CommitOutcome & { outcome: 'committed' };
  try {
    const issuing = issue(provider, token, session);
    value = (await Promise.all([issuing, participation.prepare(), confirm?.()]))[0];
    // Checked last before the commit: an exchange that ran past the deadline may have read an
    // origin whose end mark is gone already.
    if (Date.now() - startedAt > EXCHANGE_DEADLINE_MS) throw exchangeTooSlow(EXCHANGE_DEADLINE_MS);
    const outcome = await sessions.commit(session, redeem, {
      ...(quotas?.length ? { quotas } : {}),
      ...participation.write,
    });
    if (outcome.outcome !== 'committed') throw refusalOf(outcome, quotas ?? []);
    committed = outcome;
  } catch (error) {
    await withdraw(provider, token, session);
    throw error;
  }
  const heard = participation.committed(committed, ctx);
  if (heard) {
    try {
      await heard;
    } catch (error) {
      // No token without its record: the session ends, its token is never delivered, and its
      // subject token is given back (nothing burned); the trail that just failed is not asked again.
      await closeSession(provider, sessions, session, { endReason: 'not_recorded' }, ctx, { record: false })
        .then(() => redeem && sessions.release(redeem, session.id))
        .catch((failure: unknown) => reportError(provider, failure, ctx));
      throw error;
    }
  }
  return value;
}

/** Why the store did not commit, as the client is told. */
function refusalOf(outcome: Exclude<CommitOutcome, { outcome: 'committed' }>, quotas: readonly DelegationCharge[]) {
  if (outcome.outcome === 'consumed') return invalidRequest('subject_token was already used');
  if (outcome.outcome === 'spent') return quotaRefusal(quotas, outcome.key);
  switch (endedOrigin(outcome.guard)) {
    case 'accessGrant':
      return invalidGrant("the customer's access grant ended");
    case 'parentSession':
      return invalidRequest('subject_token belongs to a session that was stopped');
    case 'subjectToken':
      return invalidRequest('subject_token was revoked during the exchange');
    default:
      return invalidRequest('actor_token was revoked, or its sign-in ended, during the exchange');
  }
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
