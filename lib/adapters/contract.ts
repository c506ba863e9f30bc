import type { Adapter, AdapterConstructor, AdapterFactory } from 'oidc-provider';

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

export type ImpersonationAdapter = AtomicAdapter & SortedIndexes;

/** What `createMemoryAdapter()`, `createRedisAdapter()` and `createPostgresAdapter()` return, before their own statics. */
export interface ImpersonationAdapterClass {
  new (name: string): ImpersonationAdapter;
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

export function hasSortedIndexes(adapter: Adapter): adapter is Adapter & SortedIndexes {
  const candidate = adapter as Partial<SortedIndexes>;
  return (
    typeof candidate.indexAdd === 'function' &&
    typeof candidate.indexRemove === 'function' &&
    typeof candidate.indexRange === 'function'
  );
}

/** Whether `entry` comes after `position` in an index's order (expiry descending, then member descending). */
export function comesAfter(entry: IndexEntry, position: IndexEntry): boolean {
  return (
    entry.expiresAt < position.expiresAt || (entry.expiresAt === position.expiresAt && entry.member < position.member)
  );
}
