import type { DomainNeed } from './domain.js';

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

function hasSortedIndexes(adapter: object): adapter is SortedIndexes {
  const candidate = adapter as Partial<SortedIndexes>;
  return (
    typeof candidate.indexAdd === 'function' &&
    typeof candidate.indexRemove === 'function' &&
    typeof candidate.indexRange === 'function'
  );
}

export function hasBoundedIndexes(adapter: object): adapter is BoundedIndexes {
  return typeof (adapter as Partial<BoundedIndexes>).indexAddWithin === 'function';
}

/** Whether `entry` comes after `position` in an index's order (expiry descending, then member descending). */
export function comesAfter(entry: IndexEntry, position: IndexEntry): boolean {
  return (
    entry.expiresAt < position.expiresAt || (entry.expiresAt === position.expiresAt && entry.member < position.member)
  );
}

/** A domain's need of the sorted indexes, and what the domain lists through them. */
export function sortedIndexesNeed(why: string): DomainNeed {
  return { operations: 'sorted indexes (indexAdd, indexRemove, indexRange)', has: hasSortedIndexes, why };
}
