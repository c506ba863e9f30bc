/** The outbox: deliveries kept beside the state they report, leased to delivering instances, at least once (Invariant 14). */

/** An entry to append: `body` is opaque to the store (the payload, already serialised). */
export interface NewOutboxEntry {
  /** Unique per event and subscription; the `webhook-id` receivers deduplicate by. */
  id: string;
  subscription: string;
  /** Whose entries are kept in order: the impersonated subject. */
  subject: string;
  body: string;
}

/** A claimed entry: leased to the caller until `leaseUntil` (ms since the epoch). */
export interface LeasedEntry extends NewOutboxEntry {
  /** When it was appended (ms since the epoch). */
  createdAt: number;
  /** Deliveries attempted so far, this one included. */
  attempts: number;
  /** Names this lease: settling under a lease that ran out and was claimed again changes nothing. */
  lease: string;
  leaseUntil: number;
}

/** A leased entry and how it is settled. */
export interface SettledEntry {
  entry: LeasedEntry;
  settlement: Settlement;
}

export type Settlement =
  { outcome: 'delivered' } | { outcome: 'retry'; at: number } | { outcome: 'dead'; reason: string };

/** An entry that will not be delivered, kept for inspection until `deadAt` + the retention. */
export interface DeadLetter extends Omit<LeasedEntry, 'lease' | 'leaseUntil'> {
  deadAt: number;
  reason: string;
}

/** The stream an entry belongs to; a subscription id never holds a newline (the options refuse it). */
export function streamOf(entry: Pick<NewOutboxEntry, 'subscription' | 'subject'>): string {
  return `${entry.subscription}\n${entry.subject}`;
}

/** How many entries of each subscription a claim may lease: `each` out at once, `out` already out. */
export interface ClaimBound {
  each: number;
  /** Entries out per subscription; a subscription not named has none out. */
  out: ReadonlyMap<string, number>;
}

export interface OutboxStats {
  /** Per subscription: entries waiting (leased ones included), dead letters kept, entries dropped at the bound. */
  subscriptions: Record<string, { pending: number; dead: number; dropped: number }>;
  /** Per subscription with entries waiting: when its oldest was appended (ms), one look-up each (Invariant 15). */
  oldest: Record<string, number>;
}

export interface OutboxStore {
  /** Appends entries (one per subscription per call); one past `maxPending` is dropped and counted. Resolves the dropped subscriptions. */
  append(entries: readonly NewOutboxEntry[], maxPending: number, now: number): Promise<string[]>;
  /** Leases up to `limit` due stream heads, within `bound` per subscription (Invariant 15); drops dead letters before `deadBefore`. */
  claim(limit: number, leaseMs: number, now: number, deadBefore: number, bound?: ClaimBound): Promise<LeasedEntry[]>;
  /** Settles a leased entry; resolves `false`, changing nothing, when the lease is no longer the holder's. */
  settle(entry: LeasedEntry, settlement: Settlement, now: number): Promise<boolean>;
  /** Settles several leased entries as `settle` would (optional); resolves whether each lease was still the holder's. */
  settleAll?(settlements: readonly SettledEntry[], now: number): Promise<boolean[]>;
  stats(): Promise<OutboxStats>;
  /** Whether any entry of the subscription waits, leased included (optional; else `stats()` answers). */
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
