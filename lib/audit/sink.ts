import type { AuditEntry, VerifyResult } from './chain.js';
import type { AuditQueryFilter, AuditSink } from '../core-options.js';

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
