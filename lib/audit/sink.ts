import type { AuditEntry, VerifyResult } from './chain.js';
import type { ImpersonationEvent, ImpersonationEventName } from '../events/types.js';

/**
 * A durable record of impersonation events (for example the PostgreSQL audit
 * log). Unlike listeners, it is awaited: a subject token is handed out, and
 * an impersonation token delivered, only after its record was appended; an
 * append that rejects stops them (5xx, nothing burned).
 */
export interface AuditSink {
  append(name: ImpersonationEventName, event: ImpersonationEvent): Promise<void>;
  /** When present, `GET {sessionsPath}/events` answers from it (newest first, paged). */
  query?(filter: AuditQueryFilter): Promise<{ items: unknown[]; nextCursor: string | null }>;
}

export interface AuditQueryFilter {
  subject?: string | undefined;
  actor?: string | undefined;
  /** Only rows of these events (for a customer's view: accesses and stops, whatever else follows them). */
  events?: readonly ImpersonationEventName[] | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** A page of a trail, newest first; `nextCursor` is the `cursor` of the next page, null after the last. */
export interface AuditPage {
  items: AuditEntry[];
  nextCursor: string | null;
}

/**
 * What the package's audit logs (in memory, on PostgreSQL) share beyond the
 * sink: the chain, walked by `verify()`, and the trail, read by `query()`
 * (`since` inclusive, `until` exclusive; `limit` default 50, at most 500).
 * test/support/audit-sink-contract.ts checks it on each of them.
 */
export interface AuditLog extends AuditSink {
  verify(): Promise<VerifyResult>;
  query(filter?: AuditQueryFilter): Promise<AuditPage>;
}
