import type Koa from 'koa';
import type { CommitOutcome, CommitWrite } from '../adapters/contracts/commit.js';
import { reportError } from '../report-error.js';
import type { CommitShare, CommitSite, EventBus, EventSubscriber } from './subscriber.js';
import type { ImpersonationEvent } from '../event-types.js';

/** What the subscribers of an event write with the commit of its change, and do before and after it. */
export interface CommitParticipation {
  /** What subscribers do before the commit; rejects when the change may not commit; undefined when nothing. */
  prepare(): Promise<void> | undefined;
  /** What the store operation that commits the change writes with it. */
  write: Pick<CommitWrite, 'journal' | 'outbox'>;
  /** Once committed: a recorder outside the commit records (a rejection undoes the change); others hear of it. */
  committed(outcome: CommitOutcome & { outcome: 'committed' }, ctx: Koa.Context | undefined): Promise<void> | undefined;
}

/** How what must be atomic with a change joins its commit (Invariants 24, 45). */
export function shareCommit(
  { provider, subscribers }: EventBus,
  event: ImpersonationEvent,
  site: CommitSite,
  { record = true, delegation = false }: { record?: boolean; delegation?: boolean } = {},
): CommitParticipation {
  const shares: CommitShare[] = [];
  const recorders: EventSubscriber[] = [];
  for (const subscriber of subscribers) {
    if (!record && subscriber.record) continue;
    const share = subscriber.shareCommit?.(event, site, delegation);
    if (share) shares.push(share);
    else if (subscriber.record) recorders.push(subscriber);
  }
  const write: CommitParticipation['write'] = {};
  // One share at most of each: the trail's journal, the webhooks' outbox entries (SSF appends after the commit).
  for (const { journal, outbox } of shares) {
    if (journal) write.journal = journal;
    if (outbox) write.outbox = outbox;
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
      const report = { journaled: outcome.journaled ?? [], dropped: outcome.dropped ?? [] };
      const reported = (error: unknown) => reportError(provider, error, ctx);
      const waits = recorders.map((recorder) => recorder.record!(event));
      for (const share of hearing) {
        try {
          const heard = share.committed!(report);
          if (heard) waits.push(heard.catch(reported));
        } catch (error) {
          reported(error);
        }
      }
      return waits.length > 1 ? Promise.all(waits).then(() => undefined) : waits[0];
    },
  };
}
