import type { EventSubscriber } from '../events/subscriber.js';
import { journalOf } from './journal.js';
import type { AuditSink } from '../core-options.js';

/**
 * The audit trail as a subscriber of the plugin's events: it records each
 * event it is given, as a frozen copy. In a commit (an exchange's) its row
 * goes in the store's own transaction when the trail is in the store's
 * database (a journal, lib/audit/journal.ts); otherwise it has no part in
 * the commit and records the change once committed (lib/events/commit.ts).
 * Either way a change that loses its race leaves no row.
 */
export function trailSubscriber(sink: AuditSink): EventSubscriber {
  const journal = journalOf(sink);
  return {
    async record(event) {
      await sink.append(event.name, Object.freeze({ ...event }));
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
