import type Koa from 'koa';
import type { CommitOutcome, CommitWrite } from '../adapters/contracts/commit.js';
import { slotOf } from '../provider-state.js';
import { reportError } from '../report-error.js';
import { SUBSCRIBERS, type CommitShare, type CommitSite, type EventSubscriber } from './subscriber.js';
import type { ImpersonationEvent } from './types.js';

/** What the subscribers of an event write with the commit of its change, and do before and after it. */
export interface CommitParticipation {
  /**
   * Everything the subscribers do before the commit; rejects when the change may not be committed.
   * Undefined when no subscriber does anything before it.
   */
  prepare(): Promise<void> | undefined;
  /** What the store operation that commits the change writes with it. */
  write: Pick<CommitWrite, 'journal' | 'outbox'>;
  /**
   * Once committed: a recorder that had no part in the commit records the event, and rejects when it
   * cannot (the caller undoes the change); each other subscriber hears of the outcome, a failure
   * reported. Undefined when none does anything.
   */
  committed(outcome: CommitOutcome & { outcome: 'committed' }, ctx: Koa.Context | undefined): Promise<void> | undefined;
}

/**
 * The one hook through which what must be atomic with a state change joins
 * its commit: the code that commits (an exchange's) asks it for the event of
 * the change, and every subscriber that has a part in it says what: the
 * trail its row in the commit's transaction when it shares the store's
 * database, webhooks their outbox entries. A recorder without a part (any
 * other trail) records the change once committed: no row for a change that
 * did not happen. The committing code names none of them. With `record` false the
 * recorders (the trail) take no part; with `delegation`, the event is of a
 * delegation (see `Occasion`).
 *
 * The outbox entries of several subscribers go in one append, under the
 * smallest of their bounds.
 */
export function shareCommit(
  provider: object,
  event: ImpersonationEvent,
  site: CommitSite,
  { record = true, delegation = false }: { record?: boolean; delegation?: boolean } = {},
): CommitParticipation {
  const shares: CommitShare[] = [];
  const recorders: EventSubscriber[] = [];
  for (const subscriber of slotOf(provider, SUBSCRIBERS)) {
    if (!record && subscriber.record) continue;
    const share = subscriber.shareCommit?.(event, site, delegation);
    if (share) shares.push(share);
    else if (subscriber.record) recorders.push(subscriber);
  }
  const write: CommitParticipation['write'] = {};
  for (const { journal, outbox } of shares) {
    if (journal) write.journal = journal;
    if (outbox) {
      write.outbox = write.outbox
        ? {
            entries: [...write.outbox.entries, ...outbox.entries],
            maxPending: Math.min(write.outbox.maxPending, outbox.maxPending),
            now: write.outbox.now,
          }
        : outbox;
    }
  }
  const preparing = shares.filter((share) => share.prepare);
  const hearing = shares.filter((share) => share.committed);
  return {
    write,
    // An exchange with nothing to do before or after its commit awaits nothing for it.
    prepare() {
      if (!preparing.length) return undefined;
      // Each share's failure, thrown or rejected, rejects the whole: never a synchronous throw.
      return Promise.all(preparing.map(async (share) => share.prepare!())).then(() => undefined);
    },
    committed(outcome, ctx) {
      if (!hearing.length && !recorders.length) return undefined;
      const report = { journaled: outcome.journaled ?? [], dropped: outcome.dropped ?? [] };
      return Promise.all([
        ...recorders.map((recorder) => recorder.record!(event)),
        ...hearing.map(async (share) => {
          try {
            await share.committed!(report);
          } catch (error) {
            reportError(provider, error, ctx);
          }
        }),
      ]).then(() => undefined);
    },
  };
}
