import { hasFunctions, type DomainNeed } from './domain.js';

/** A member of a sorted index and its score: the time (ms since the epoch) it stops being live. */
export interface IndexEntry {
  member: string;
  expiresAt: number;
}

/** Sorted indexes of ids by expiry, to list sessions without a scan; expired members are never returned. */
export interface SortedIndexes {
  /** Adds `member` to each of `indexes` (or moves it to its new expiry there): all of them, or none. */
  indexAdd(indexes: readonly string[], member: string, expiresAt: number): Promise<void>;
  indexRemove(indexes: readonly string[], member: string): Promise<void>;
  /** Live members, latest expiry first (ties by member, descending), strictly after `after`, at most `limit`. */
  indexRange(index: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]>;
}

/** One index a bounded addition joins: its member's expiry there (ms since the epoch) and the most live members it may hold. */
export interface BoundedIndexAdd {
  index: string;
  expiresAt: number;
  bound: number;
}

/** Bounded sorted indexes: count and add in one atomic step (Invariant 6); resolves the first full index, else undefined. */
export interface BoundedIndexes {
  indexAddWithin(adds: readonly BoundedIndexAdd[], member: string): Promise<string | undefined>;
}

/** Whether `entry` comes after `position` in an index's order (expiry descending, then member descending). */
export function comesAfter(entry: IndexEntry, position: IndexEntry): boolean {
  return (
    entry.expiresAt < position.expiresAt || (entry.expiresAt === position.expiresAt && entry.member < position.member)
  );
}

/** A domain's need of the sorted indexes, and what the domain lists through them. */
export function sortedIndexesNeed(why: string): DomainNeed {
  const has = (adapter: object) => hasFunctions(adapter, 'indexAdd', 'indexRemove', 'indexRange');
  return { operations: 'sorted indexes (indexAdd, indexRemove, indexRange)', has, why };
}
