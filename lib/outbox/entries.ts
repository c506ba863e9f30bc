/** What the outbox keeps: entries appended, leased, settled and dead-lettered. */

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
export interface DeadLetter {
  id: string;
  subscription: string;
  subject: string;
  body: string;
  createdAt: number;
  attempts: number;
  deadAt: number;
  reason: string;
}

/** The stream an entry belongs to; a subscription id never holds a newline (the options refuse it). */
export function streamOf(entry: Pick<NewOutboxEntry, 'subscription' | 'subject'>): string {
  return `${entry.subscription}\n${entry.subject}`;
}
