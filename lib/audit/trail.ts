import type { EventSubscriber } from '../events/subscriber.js';
import type { Journal } from './journal.js';
import type { AuditSink } from '../core-options.js';

/** The audit trail as an event subscriber, recording a frozen copy of each event (Invariant 24); a throw rejects. */
export function trailSubscriber(sink: AuditSink, journal: Journal | undefined): EventSubscriber {
  return {
    record(event) {
      try {
        return Promise.resolve(sink.append(event.name, Object.freeze({ ...event })));
      } catch (error) {
        return Promise.reject(error as Error);
      }
    },
    shareCommit(event, site) {
      if (!journal || !site.sharesDatabase(journal.database)) return undefined;
      return {
        prepare: () => journal.ready(),
        journal: { appendFunction: journal.appendFunction, rows: journal.rows(event.name, event) },
        committed: ({ journaled }) => journal.committed(journaled),
      };
    },
  };
}
