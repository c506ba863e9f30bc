import type { ImpersonationEvent, ImpersonationEventName } from './events.js';

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
  subject?: string;
  actor?: string;
  /** Only rows of these events (for a customer's view: accesses and stops, whatever else follows them). */
  events?: readonly ImpersonationEventName[];
  since?: Date;
  until?: Date;
  limit?: number;
  cursor?: string;
}
