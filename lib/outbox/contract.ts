/**
 * The outbox: what is to be delivered, kept in the plugin's store beside the
 * state it reports, and handed to delivering instances under a lease.
 *
 * Entries are kept per stream (a subscription and a subject): a stream's
 * entries go out in the order they were appended, one at a time, and its next
 * entry waits until the one before was delivered or dead-lettered. An entry
 * claimed by an instance is leased to it until `leaseUntil`; should that
 * instance die, the lease runs out and another claims the entry again (the
 * receiver then sees it twice: delivery is at least once).
 *
 * The outbox's domain: the store's operations. What it keeps (the entries,
 * leased, settled or dead) is in entries.ts. Imports nothing else of `lib/`.
 */
import type { DeadLetter, LeasedEntry, NewOutboxEntry, SettledEntry, Settlement } from './entries.js';

export {
  streamOf,
  type DeadLetter,
  type LeasedEntry,
  type NewOutboxEntry,
  type SettledEntry,
  type Settlement,
} from './entries.js';

/**
 * How many entries of each subscription a claim may lease: a subscription has
 * at most `each` out at once (leased and not settled), of which `out` says how
 * many are out already. So that one receiver that never answers holds its own
 * entries only, never the delivery of the others.
 */
export interface ClaimBound {
  each: number;
  /** Entries out per subscription; a subscription not named has none out. */
  out: ReadonlyMap<string, number>;
}

export interface OutboxStats {
  /** Per subscription: entries waiting (leased ones included), dead letters kept, entries dropped at the bound. */
  subscriptions: Record<string, { pending: number; dead: number; dropped: number }>;
  /**
   * Per subscription with entries waiting: when its oldest waiting entry was
   * appended (ms since the epoch). Read from an order the store keeps, one
   * look-up per subscription, never by reading the backlog.
   */
  oldest: Record<string, number>;
}

export interface OutboxStore {
  /**
   * Appends the entries (at most one per subscription per call); an entry
   * whose subscription already has `maxPending` entries waiting is dropped
   * and counted instead. Resolves the subscriptions whose entry was dropped.
   * Rejects when the store cannot be reached: nothing of a failed call counts.
   */
  append(entries: readonly NewOutboxEntry[], maxPending: number, now: number): Promise<string[]>;
  /**
   * Leases up to `limit` entries, each the first waiting entry of its stream,
   * due (`now` at or after its next attempt), and not leased to anyone (or
   * whose lease ran out); with a `bound`, no more of a subscription than it
   * leaves room for. On Redis and PostgreSQL its cost follows the entries it
   * hands out and the subscriptions with entries waiting, not their backlogs:
   * the entries of a subscription without room are not even read. Also drops
   * dead letters older than `deadBefore`.
   */
  claim(limit: number, leaseMs: number, now: number, deadBefore: number, bound?: ClaimBound): Promise<LeasedEntry[]>;
  /** Settles a leased entry; resolves `false`, changing nothing, when the lease is no longer the holder's. */
  settle(entry: LeasedEntry, settlement: Settlement, now: number): Promise<boolean>;
  /**
   * Settles several leased entries, each as `settle` would, in fewer trips to
   * the store; resolves, in their order, whether each lease was still the
   * holder's. Optional: without it each entry is settled on its own. Rejects
   * when the store cannot be reached: an entry not settled is delivered again
   * once its lease runs out.
   */
  settleAll?(settlements: readonly SettledEntry[], now: number): Promise<boolean[]>;
  stats(): Promise<OutboxStats>;
  /**
   * Whether any entry of the subscription is waiting (a leased one included).
   * Optional: without it `stats()` answers (see `waitsFor`).
   */
  waits?(subscription: string): Promise<boolean>;
  /** Dead letters, latest first, at most `limit`. */
  deadLetters(limit: number): Promise<DeadLetter[]>;
  /** Removes every entry of the subscription (waiting, leased or dead) and its count of drops. */
  forget(subscription: string): Promise<void>;
}

/** An adapter instance that keeps an outbox: `outbox()` returns the one store of its adapter class. */
export interface OutboxCapable {
  outbox(): OutboxStore;
}

export function hasOutbox(adapter: object): adapter is OutboxCapable {
  return typeof (adapter as Partial<OutboxCapable>).outbox === 'function';
}

/** Whether an entry of `subscription` waits in the outbox: what a poll checks before it says that it has nothing. */
export async function waitsFor(outbox: OutboxStore, subscription: string): Promise<boolean> {
  if (outbox.waits) return outbox.waits(subscription);
  return ((await outbox.stats()).subscriptions[subscription]?.pending ?? 0) > 0;
}
