import type { ImpersonationEvent, ImpersonationEventName } from '../event-types.js';
import type { AuditSink } from '../core-options.js';

/** A trail that appends its row in a store's own transaction (Invariant 24). */
export interface Journal {
  /** What a store compares with its own connection to tell that it shares the database (the pool). */
  database: object;
  /** Creates the trail's tables and function if they are missing. */
  ready(): Promise<void>;
  /** The SQL function that appends rows to the chain (qualified, a plain identifier). */
  appendFunction: string;
  /** The argument of `appendFunction` for one event: its rows as JSON. */
  rows(name: ImpersonationEventName, event: ImpersonationEvent): string;
  /** Called with the rows the store's transaction committed: checkpoints that fell due are signed. Never rejects. */
  committed(rows: readonly JournaledRow[]): Promise<void>;
}

export interface JournaledRow {
  seq: string;
  hash: string;
}

/** A sink's journal: a capability the PostgreSQL audit log attaches to the sink it returns. */
const journals = new WeakMap<AuditSink, Journal>();

export function attachJournal(sink: AuditSink, journal: Journal): void {
  journals.set(sink, journal);
}

export function journalOf(sink: AuditSink | undefined): Journal | undefined {
  return sink === undefined ? undefined : journals.get(sink);
}
