import type { ImpersonationEvent, ImpersonationEventName } from '../event-types.js';
import type { AuditSink } from '../core-options.js';

/** A trail that appends its row in a store's own transaction (Invariant 24). */
export interface Journal {
  /** The trail it journals: a copy or wrapper of that trail appends through its own `append` instead. */
  sink: AuditSink;
  /** What a store compares with its own connection to tell that it shares the database (the pool). */
  database: object;
  /** Creates the trail's tables and function if they are missing. */
  ready(): Promise<void>;
  /** The SQL function that appends rows to the chain (qualified, a plain identifier). */
  appendFunction: string;
  /** The argument of `appendFunction` for one event: its rows as JSON. */
  rows(name: ImpersonationEventName, event: ImpersonationEvent): string;
  /** Called with the rows the store's transaction committed: checkpoints that fell due are signed. Never rejects. */
  committed(rows: readonly { seq: string; hash: string }[]): Promise<void>;
}

/** A sink as the plugin reads it: the PostgreSQL audit log's carries its journal, under a symbol no deployment's sink has, not enumerable. */
export const JOURNAL = Symbol('impersonation.journal');
export interface JournaledSink extends AuditSink {
  readonly [JOURNAL]?: Journal | undefined;
}
