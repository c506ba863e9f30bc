import type { AdapterPayload } from 'oidc-provider';
import type { QuotaCharge } from '../../capacity.js';
import type { OutboxCommit } from './outbox.js';
import type { JournalCommit, SharedDatabase } from './trail.js';

/** The kind of a quota counter's payload, `{ kind: QUOTA_KIND, count }`, for an adapter that stores it as an entry. */
export const QUOTA_KIND = 'ImpersonationQuota';

/**
 * The sessions' part of an exchange's commit: the redemption of `consume`
 * when there is one (an entry of any of the plugin's models, as `consumeOnce`
 * consumes it), the entry `write` and its membership of `indexes` (sorted
 * indexes of `write.model`, scored `expiresAt`), and a charge to each of
 * `quotas`. `guards` are ids of entries of `write.model`: one whose payload
 * carries `ended` (a mark that what the exchange was allowed by has ended
 * since it was read, see `GUARD_KIND`) refuses the commit; so does a quota
 * that has taken its `max` charges.
 */
export interface SessionCommit {
  /** The entry the exchange redeems (an impersonation's subject token); none for a delegation. */
  consume?: { model: string; id: string } | undefined;
  write: { model: string; id: string; payload: AdapterPayload; expiresIn: number };
  indexes: readonly string[];
  /** The index members' expiry, milliseconds since the epoch. */
  expiresAt: number;
  guards: readonly string[];
  /** Shares of principals (lib/capacity.ts) the write is charged to, ids of entries of `write.model`. */
  quotas?: readonly QuotaCharge[] | undefined;
}

/**
 * What an exchange writes, committed by one store operation: the sessions'
 * part, and what the trail (`journal`) and the outbox (`outbox`) add to it,
 * each a part of its own domain. Either all of it happens, or none.
 */
export interface CommitWrite extends SessionCommit, JournalCommit, OutboxCommit {}

/**
 * The kind of a guard's entry. An ended guard's payload is
 * `{ kind: GUARD_KIND, ended: <seconds> }`; a store may keep guards that
 * carry no `ended` (PostgreSQL locks them, so that a commit and a mark that
 * race are ordered).
 */
export const GUARD_KIND = 'ImpersonationGuard';

/**
 * What `commitOnce` did: committed all, or nothing because the entry was
 * consumed already, a guard was present, or the quota `key` was spent.
 */
export type CommitOutcome =
  | { outcome: 'committed'; journaled?: Array<{ seq: string; hash: string }>; dropped?: string[] }
  | { outcome: 'consumed' }
  | { outcome: 'guarded'; guard: string }
  | { outcome: 'spent'; key: string };

/**
 * One exchange, one store operation. `commitOnce(write)` consumes
 * `write.consume` (when given, its `consumed` set to `write.id`) and, in the same atomic step, charges every
 * quota of `write.quotas`, stores `write.write` and adds it to
 * `write.indexes`, unless a guard of `write.guards` has ended or a quota is
 * spent; it resolves `committed` for the one call that consumed the entry.
 * It resolves `guarded` (with the first guard found; guards are checked
 * first), `consumed` (the entry is missing or already consumed) or `spent`
 * (with the first spent quota, in the order given), writing and charging
 * nothing; it rejects, writing nothing,
 * when the store cannot be reached or cannot take the entry (a bounded store
 * that is full): a refused exchange never leaves a listed session behind,
 * and a failed one never burns its subject token. `sharesDatabase` is the
 * trail's optional operation (./trail.ts). `releaseConsumed(entry, by)`
 * gives back what the commit that wrote `by` consumed: it clears `consumed`
 * of the stored, live `entry` only while it is still `by`, and resolves
 * whether it did (an exchange whose trail could not take it burns nothing).
 */
export interface AtomicCommit extends Partial<SharedDatabase> {
  commitOnce(write: CommitWrite): Promise<CommitOutcome>;
  releaseConsumed(entry: { model: string; id: string }, by: string): Promise<boolean>;
}

/** An entry and its index members, written only if every quota has room, charged in the same operation. */
export interface QuotaWrite {
  write: { model: string; id: string; payload: AdapterPayload; expiresIn: number };
  indexes: readonly string[];
  /** The index members' expiry, milliseconds since the epoch. */
  expiresAt: number;
  quotas: readonly QuotaCharge[];
}

/** What `saveWithinQuotas` did: saved and charged every quota, or nothing because `key` was spent. */
export type QuotaOutcome = { outcome: 'saved' } | { outcome: 'spent'; key: string };

/**
 * Bounds per principal, counted where the entries are written. `saveWithinQuotas(write)`
 * checks every quota and, in the same atomic step, charges each one, stores
 * `write.write` and adds it to `write.indexes`; when a quota has taken its
 * `max` charges it resolves `spent` with the first such key (in the order
 * given) and writes and charges nothing. So no burst of concurrent calls
 * gets past a bound: of any number of them, at most `max` are saved. It
 * rejects, writing nothing, when the store cannot be reached or is full.
 * The plugin's adapters run it as `commitOnce` with no entry to consume and
 * no guard (lib/adapters/quotas.ts).
 */
export interface PrincipalQuotas {
  saveWithinQuotas(write: QuotaWrite): Promise<QuotaOutcome>;
}

/**
 * The models one exchange's commit spans: the subject token it redeems and
 * the session it lists. A store that partitions its keys (Redis Cluster)
 * keeps their entries, and the sessions' sorted indexes, in one partition.
 */
export const COMMITTED_TOGETHER: ReadonlySet<string> = new Set(['SubjectToken', 'ImpersonationSession']);

export function hasAtomicCommit(adapter: object): adapter is AtomicCommit {
  const { commitOnce, releaseConsumed } = adapter as Partial<AtomicCommit>;
  return typeof commitOnce === 'function' && typeof releaseConsumed === 'function';
}

export function hasPrincipalQuotas(adapter: object): adapter is PrincipalQuotas {
  return typeof (adapter as Partial<PrincipalQuotas>).saveWithinQuotas === 'function';
}
