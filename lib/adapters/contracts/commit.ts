import type { AdapterPayload } from 'oidc-provider';
import type { QuotaCharge } from '../../capacity.js';
import { hasFunctions, type DomainNeed } from './domain.js';
import type { OutboxCommit } from './outbox.js';
import type { JournalCommit, SharedDatabase } from './trail.js';

/** The kind of a quota counter's payload, `{ kind: QUOTA_KIND, count }`, for an adapter that stores it as an entry. */
export const QUOTA_KIND = 'ImpersonationQuota';

/** The sessions' part of an exchange's commit (docs/adapters.md); an ended guard or a spent quota refuses it. */
export interface SessionCommit {
  /** The entry the exchange redeems (an impersonation's subject token); none for a delegation. */
  consume?: { model: string; id: string } | undefined;
  /** Its payload JSON-plain and handed over: the caller changes none of it afterwards. */
  write: { model: string; id: string; payload: AdapterPayload; expiresIn: number };
  indexes: readonly string[];
  /** The index members' expiry, milliseconds since the epoch. */
  expiresAt: number;
  guards: readonly string[];
  /** Shares of principals (lib/capacity.ts) the write is charged to, ids of entries of `write.model`. */
  quotas?: readonly QuotaCharge[] | undefined;
}

/** What an exchange writes in one store operation: all of it, or none. */
export interface CommitWrite extends SessionCommit, JournalCommit, OutboxCommit {}

/** The kind of a guard's entry; an ended one carries `ended` (seconds). Invariant 4. */
export const GUARD_KIND = 'ImpersonationGuard';

/** What `commitOnce` did: committed, or nothing (consumed already, a guard ended, a quota spent). */
export type CommitOutcome =
  | { outcome: 'committed'; journaled?: Array<{ seq: string; hash: string }>; dropped?: string[] }
  | { outcome: 'consumed' }
  | { outcome: 'guarded'; guard: string }
  | { outcome: 'spent'; key: string };

/** One exchange, one store operation (Invariants 1, 2; docs/adapters.md); `releaseConsumed` clears `consumed` only while it is `by`. */
export interface AtomicCommit extends Partial<SharedDatabase> {
  commitOnce(write: CommitWrite): Promise<CommitOutcome>;
  releaseConsumed(entry: { model: string; id: string }, by: string): Promise<boolean>;
}

/** An entry and its index members, written only if every quota has room, charged in the same operation. */
export interface QuotaWrite extends Pick<SessionCommit, 'write' | 'indexes' | 'expiresAt'> {
  quotas: readonly QuotaCharge[];
}

/** What `saveWithinQuotas` did: saved and charged every quota, or nothing because `key` was spent. */
export type QuotaOutcome = { outcome: 'saved' } | { outcome: 'spent'; key: string };

/** Bounds per principal, counted and charged in the write (lib/adapters/quotas.ts; Invariant 5). */
export interface PrincipalQuotas {
  saveWithinQuotas(write: QuotaWrite): Promise<QuotaOutcome>;
}

/** A domain's need of `saveWithinQuotas`, and what the domain bounds with it. */
export function quotasNeed(why: string): DomainNeed {
  return { operations: 'saveWithinQuotas(write)', has: (adapter) => hasFunctions(adapter, 'saveWithinQuotas'), why };
}

/** The models one exchange's commit spans, kept in one Redis Cluster slot (Invariant 2). */
export const COMMITTED_TOGETHER: ReadonlySet<string> = new Set(['SubjectToken', 'ImpersonationSession']);
