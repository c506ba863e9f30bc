import type { AuditEntry, VerifyResult } from './chain.js';
import type { AuditQueryFilter, AuditSink } from '../core-options.js';

/** A page of a trail, newest first; `nextCursor` is the `cursor` of the next page, null after the last. */
export interface AuditPage {
  items: AuditEntry[];
  nextCursor: string | null;
}

/** What the audit logs share beyond the sink: `verify()`, and `query()` (`since` inclusive, `until` exclusive). */
export interface AuditLog extends AuditSink {
  verify(): Promise<VerifyResult>;
  query(filter?: AuditQueryFilter): Promise<AuditPage>;
}
