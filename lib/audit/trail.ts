import type { EventSubscriber } from '../events/subscriber.js';
import { journalOf } from './journal.js';
import type { AuditSink } from '../core-options.js';

/**
 * The audit trail as a subscriber of the plugin's events: it records each
 * event it is given, as a frozen copy. In a commit (an exchange's) its row
 * goes in the store's own transaction when the trail is in the store's
 * database (a journal, lib/audit/journal.ts): a row is durable exactly when
 * the change is, and a change that loses its race leaves none. Otherwise the
 * row is appended before the commit: a trail that cannot be written stops the
 * change with nothing burned, and a lost race is recorded as a refusal after it.
 */
export function trailSubscriber(sink: AuditSink): EventSubscriber {
  const journal = journalOf(sink);
  return {
    async record(event) {
      await sink.append(event.name, Object.freeze({ ...event }));
    },
    shareCommit(event, site) {
      if (journal && site.sharesDatabase(journal.database)) {
        return {
          prepare: () => journal.ready(),
          journal: { appendFunction: journal.appendFunction, rows: journal.rows(event.name, event) },
          async committed({ journaled }) {
            site.recorded();
            await journal.committed(journaled);
          },
        };
      }
      return {
        async prepare() {
          await sink.append(event.name, Object.freeze({ ...event }));
          site.recorded();
        },
      };
    },
  };
}
