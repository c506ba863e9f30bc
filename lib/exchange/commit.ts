import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { publicTokenId } from '../access-token.js';
import { shareCommit } from '../events/commit.js';
import type { EventBus } from '../events/subscriber.js';
import type { EVENTS, ImpersonationEvent } from '../event-types.js';
import { quotaRefusal, type DelegationCharge } from '../capacity.js';
import { exchangeTooSlow, invalidGrant, invalidRequest } from '../errors.js';
import { assignTokenId, newBackingGrant } from '../provider-internals.js';
import type { SessionRecord } from '../sessions/record.js';
import { closeSession } from '../sessions/close.js';
import { endedOrigin, type SessionStore } from '../sessions/store.js';
import { reportError } from '../report-error.js';
import type { CommitOutcome } from '../adapters/contracts/commit.js';
import { SUBJECT_TOKEN_MODEL } from '../subject-tokens/store.js';

/** Longest an exchange may run from its first read to its commit (Invariant 22). */
export const EXCHANGE_DEADLINE_MS = 120_000;

export interface Commit {
  /** The access token to save; none for a token its kind minted (`minted`), which nothing but the session records. */
  token?: AccessToken | undefined;
  /** The value of a token the kind minted, answered once the session is committed; the session names it already. */
  minted?: string | undefined;
  session: SessionRecord;
  /** The store key of the subject token to redeem: an impersonation's; a delegation redeems none. */
  subjectTokenKey?: string | undefined;
  /** What a delegation's session is charged to (lib/capacity.ts): listed only within those shares. */
  quotas?: readonly DelegationCharge[] | undefined;
  startedAt: number;
  /** The success event, as the trail records it; built once the token is named. */
  event: () => ExchangeEvent;
  /** Whether the trail records the success (a delegation of a user's own token stays off it). */
  record: boolean;
  /** A delegation's success, which goes to no webhook. */
  delegation: boolean;
  /** Announces, then reads again, what a user may end meanwhile (SessionStore.announce); beside the token's writes. */
  confirm?: (() => Promise<void> | undefined) | undefined;
  /** Checked again right before the store commit: a throw refuses the exchange, nothing charged. */
  recheck?: (() => void) | undefined;
}

export type ExchangeEvent = ImpersonationEvent<
  | typeof EVENTS.exchangeSucceeded
  | typeof EVENTS.delegationSucceeded
  | typeof EVENTS.idJagIssued
  | typeof EVENTS.idJagRedeemed
>;

/** Issues the token and commits the exchange; resolves the token's value. Invariants 20, 21, 23, 24. */
export async function commit(
  ctx: KoaContextWithOIDC,
  { sessions, bus }: { sessions: SessionStore; bus: EventBus },
  { token, minted, session, subjectTokenKey, quotas, startedAt, event, record, delegation, confirm, recheck }: Commit,
): Promise<string> {
  const provider = ctx.oidc.provider;
  if (token) {
    ctx.oidc.entity('AccessToken', token);
    const jti = assignTokenId(token); // sets token.format too: read it only after
    session.accessTokenId = publicTokenId(token.format, jti);
  }
  // What the event's subscribers write with the commit (lib/events/commit.ts), and after it.
  const participation = shareCommit(
    bus,
    event(),
    { sharesDatabase: (database) => sessions.sharesDatabase(database) },
    { record, delegation },
  );
  const redeem = subjectTokenKey === undefined ? undefined : { model: SUBJECT_TOKEN_MODEL, id: subjectTokenKey };
  let value: string;
  let committed: CommitOutcome & { outcome: 'committed' };
  try {
    // A JWT is saved as it is (no wait of an async wrapper around it); an opaque token gets its Grant beside it.
    const issuing = !token
      ? Promise.resolve(minted!)
      : token.format === 'opaque'
        ? issue(provider, token, session)
        : token.save();
    const before = [participation.prepare(), confirm?.()];
    value = before[0] || before[1] ? (await Promise.all([issuing, ...before]))[0] : await issuing;
    // Invariant 22: end marks outlive the deadline.
    if (Date.now() - startedAt > EXCHANGE_DEADLINE_MS) throw exchangeTooSlow(EXCHANGE_DEADLINE_MS);
    recheck?.();
    const { journal, outbox } = participation.write;
    const outcome = await sessions.commit(session, redeem, { quotas, journal, outbox });
    if (outcome.outcome !== 'committed') throw refusalOf(outcome, quotas ?? []);
    committed = outcome;
  } catch (error) {
    if (token) await withdraw(provider, token, session);
    throw error;
  }
  const heard = participation.committed(committed, ctx);
  if (heard) {
    try {
      await heard;
    } catch (error) {
      // Invariant 24: no token without its record.
      await closeSession(bus, sessions, session, { endReason: 'not_recorded' }, ctx, { record: false })
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
  const spent = outcome.outcome === 'spent' ? quotas.find((quota) => quota.key === outcome.key) : undefined;
  if (spent?.principal === 'ID-JAG assertion') return invalidGrant('the assertion was redeemed already');
  if (outcome.outcome === 'spent') return quotaRefusal(quotas, outcome.key);
  switch (endedOrigin(outcome.guard)) {
    case 'accessGrant':
      return invalidGrant("the customer's access grant ended");
    case 'parentSession':
      return invalidRequest('subject_token belongs to a session that was stopped');
    case 'subjectToken':
      return invalidRequest('subject_token was revoked during the exchange');
    case 'issuerSession':
      return invalidGrant("the assertion's session at its issuer was stopped");
    default:
      return invalidRequest('actor_token was revoked, or its sign-in ended, during the exchange');
  }
}

/** An opaque token and the Grant behind it, so that oidc-provider treats it as any of its own. */
async function issue(provider: Provider, token: AccessToken, session: SessionRecord): Promise<string> {
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
