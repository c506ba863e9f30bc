import type { Adapter, AdapterConstructor, AdapterFactory, AdapterPayload } from 'oidc-provider';
import type { NewOutboxEntry } from '../outbox/contract.js';

/**
 * The one operation single use rests on. oidc-provider's own `consume(id)`
 * returns nothing, so a caller can only find-then-consume, and two requests can
 * both win. An adapter that stores subject tokens must also offer this:
 *
 * `consumeOnce(id)` atomically marks the entry `id` consumed and resolves
 * `true` only for the one call that moved it from unconsumed to consumed. It
 * resolves `false` when the entry is missing (never stored, or gone with its TTL)
 * or already consumed. It
 * rejects (never resolves `false`) when the store cannot be reached, so an
 * outage is never mistaken for a replay.
 */
export interface AtomicConsume {
  consumeOnce(id: string): Promise<boolean>;
}

export type AtomicAdapter = Adapter & AtomicConsume;

/** An oidc-provider adapter: a class (`new Adapter(name)`) or a factory (`Adapter(name)`). */
export type AdapterSource = AdapterConstructor | AdapterFactory;

export function instantiateAdapter(source: AdapterSource, name: string): Adapter {
  // Tell the two apart the way oidc-provider does, so both see the same instance kind.
  if (isConstructor(source)) {
    return new source(name);
  }
  return (source as AdapterFactory)(name);
}

export function hasAtomicConsume(adapter: Adapter): adapter is AtomicAdapter {
  return typeof (adapter as Partial<AtomicConsume>).consumeOnce === 'function';
}

function isConstructor(value: AdapterSource): value is AdapterConstructor {
  return typeof value.prototype === 'object' && value.prototype !== null;
}

/** A member of a sorted index and its score: the time (ms since the epoch) it stops being live. */
export interface IndexEntry {
  member: string;
  expiresAt: number;
}

/**
 * Sorted indexes of ids, so that impersonation sessions can be listed by
 * subject or actor, and revocations served, without scanning the
 * store. Each member carries its expiry; an expired member is never returned
 * and is dropped on the next write to its index. Like `consumeOnce`, every
 * operation rejects when the store cannot be reached.
 */
export interface SortedIndexes {
  /** Adds `member` to each of `indexes` (or moves it to its new expiry there): all of them, or none. */
  indexAdd(indexes: readonly string[], member: string, expiresAt: number): Promise<void>;
  indexRemove(indexes: readonly string[], member: string): Promise<void>;
  /**
   * Live members, latest expiry first, strictly after `after` in that order
   * (ties broken by member, descending), at most `limit`.
   */
  indexRange(index: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]>;
}

/** One index a bounded addition joins: its member's expiry there (ms since the epoch) and the most live members it may hold. */
export interface BoundedIndexAdd {
  index: string;
  expiresAt: number;
  bound: number;
}

/**
 * Sorted indexes with a bound per index, for what a principal may hold at
 * once (a customer's grants in force, their approval requests waiting):
 * counting and adding in two operations lets a burst of concurrent callers
 * all count the same room and all add. `indexAddWithin(adds, member)`
 * counts each index's live members (`member` itself aside) and adds `member`
 * to every one of them, in one atomic step, only when each holds fewer than
 * its `bound`; it resolves `undefined` when added, or the name of the first
 * index that was full, having added nothing. It rejects, adding nothing, when
 * the store cannot be reached.
 */
export interface BoundedIndexes {
  indexAddWithin(adds: readonly BoundedIndexAdd[], member: string): Promise<string | undefined>;
}

/**
 * What an exchange writes, committed by one store operation: the redemption
 * of `consume` when there is one (an entry of any of the plugin's models, as
 * `consumeOnce` consumes it), the entry `write` and its membership of
 * `indexes` (sorted indexes of `write.model`, scored `expiresAt`), and a
 * charge to each of `quotas`. Either all of it happens, or none. `guards`
 * are ids of entries of `write.model`: one whose payload carries `ended` (a
 * mark that what the exchange was allowed by has ended since it was read,
 * see `GUARD_KIND`) refuses the commit; so does a quota that has taken its
 * `max` charges.
 */
export interface CommitWrite {
  /** The entry the exchange redeems (an impersonation's subject token); none for a delegation. */
  consume?: { model: string; id: string } | undefined;
  write: { model: string; id: string; payload: AdapterPayload; expiresIn: number };
  indexes: readonly string[];
  /** The index members' expiry, milliseconds since the epoch. */
  expiresAt: number;
  guards: readonly string[];
  /** Shares of principals (lib/capacity.ts) the write is charged to, ids of entries of `write.model`. */
  quotas?: readonly QuotaCharge[] | undefined;
  /**
   * A trail's rows to append in the same transaction, by a store that said it
   * shares the trail's database (`sharesDatabase`): the SQL function that
   * appends them and its argument. Only when the entry is consumed.
   */
  journal?: { appendFunction: string; rows: string } | undefined;
  /**
   * Outbox entries to append in the same operation (the exchange's
   * notifications), as `OutboxStore.append` appends them: only when the entry
   * is consumed.
   */
  outbox?: { entries: readonly NewOutboxEntry[]; maxPending: number; now: number } | undefined;
}

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
 * `write.consume` (when given) and, in the same atomic step, charges every
 * quota of `write.quotas`, stores `write.write` and adds it to
 * `write.indexes`, unless a guard of `write.guards` has ended or a quota is
 * spent; it resolves `committed` for the one call that consumed the entry.
 * It resolves `guarded` (with the first guard found; guards are checked
 * first), `consumed` (the entry is missing or already consumed) or `spent`
 * (with the first spent quota, in the order given), writing and charging
 * nothing; it rejects, writing nothing,
 * when the store cannot be reached or cannot take the entry (a bounded store
 * that is full): a refused exchange never leaves a listed session behind,
 * and a failed one never burns its subject token.
 */
export interface AtomicCommit {
  commitOnce(write: CommitWrite): Promise<CommitOutcome>;
  /** Whether the store's connection is `database` (a trail's pool), so that a commit may carry a journal. */
  sharesDatabase?(database: object): boolean;
}

/**
 * One principal's share of a capacity others depend on (see lib/capacity.ts):
 * a counter, `key` an id of the written entry's model, that takes at most
 * `max` charges until `expiresAt` (ms since the epoch), the expiry its first
 * charge sets; after it, the next charge starts it again at 1.
 */
export interface QuotaCharge {
  key: string;
  max: number;
  expiresAt: number;
}

/** The kind of a quota counter's payload, `{ kind: QUOTA_KIND, count }`, for an adapter that stores it as an entry. */
export const QUOTA_KIND = 'ImpersonationQuota';

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

export type ImpersonationAdapter = AtomicAdapter & SortedIndexes & AtomicCommit & PrincipalQuotas;

/**
 * The models one exchange's commit spans: the subject token it redeems and
 * the session it lists. A store that partitions its keys (Redis Cluster)
 * keeps their entries, and the sessions' sorted indexes, in one partition.
 */
export const COMMITTED_TOGETHER: ReadonlySet<string> = new Set(['SubjectToken', 'ImpersonationSession']);

/** What `createMemoryAdapter()`, `createRedisAdapter()` and `createPostgresAdapter()` return, before their own statics. */
export interface ImpersonationAdapterClass {
  new (name: string): ImpersonationAdapter & BoundedIndexes;
}

/**
 * The models whose entries `revokeByGrantId(grantId)` removes: those
 * oidc-provider saves with a `grantId` that a revoked grant must take along,
 * the same six as in its own memory adapter. Never an Interaction, a Session
 * or the Grant itself.
 */
export const GRANTABLE_MODELS: ReadonlySet<string> = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PreAuthorizedCode',
]);

/** Whole milliseconds up to which a lifetime is kept; a longer one (about 285,000 years) is cut to it. */
const LIFETIME_CAP_MS = Number.MAX_SAFE_INTEGER;

/**
 * How long an entry lives, from the `expiresIn` (seconds) oidc-provider passes
 * to `upsert`; every adapter reads it this one way, as oidc-provider does (its
 * own memory adapter keeps an entry until now + expiresIn, and a model counts
 * as expired once `exp <= now`, so a model saved in its last second passes 0):
 *
 * - no `expiresIn` (or not a finite number): the entry never expires: `undefined`;
 * - 0 or less: the entry is already expired: it replaces any earlier version
 *   of itself and is never found, consumed nor revoked: `0`;
 * - more: that many seconds, in whole milliseconds rounded up (so at least 1).
 */
export function entryLifetimeMs(expiresIn: number | undefined): number | undefined {
  if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn)) return undefined;
  if (expiresIn <= 0) return 0;
  return Math.min(Math.ceil(expiresIn * 1000), LIFETIME_CAP_MS);
}

export function hasAtomicCommit(adapter: Adapter): adapter is Adapter & AtomicCommit {
  return typeof (adapter as Partial<AtomicCommit>).commitOnce === 'function';
}

export function hasPrincipalQuotas(adapter: Adapter): adapter is Adapter & PrincipalQuotas {
  return typeof (adapter as Partial<PrincipalQuotas>).saveWithinQuotas === 'function';
}

export function hasSortedIndexes(adapter: Adapter): adapter is Adapter & SortedIndexes {
  const candidate = adapter as Partial<SortedIndexes>;
  return (
    typeof candidate.indexAdd === 'function' &&
    typeof candidate.indexRemove === 'function' &&
    typeof candidate.indexRange === 'function'
  );
}

export function hasBoundedIndexes(adapter: Adapter): adapter is Adapter & BoundedIndexes {
  return typeof (adapter as Partial<BoundedIndexes>).indexAddWithin === 'function';
}

/** Whether `entry` comes after `position` in an index's order (expiry descending, then member descending). */
export function comesAfter(entry: IndexEntry, position: IndexEntry): boolean {
  return (
    entry.expiresAt < position.expiresAt || (entry.expiresAt === position.expiresAt && entry.member < position.member)
  );
}
