import { unfitStore } from '../errors/standalone.js';
import type { CommitOutcome, CommitWrite, QuotaOutcome, QuotaWrite } from './contracts/commit.js';

/** What every shipped adapter derives from its own operations: `consume` and `saveWithinQuotas`. */
export abstract class DerivedOperations {
  abstract consumeOnce(id: string): Promise<boolean>;
  abstract commitOnce(write: CommitWrite): Promise<CommitOutcome>;

  async consume(id: string): Promise<void> {
    await this.consumeOnce(id);
  }

  /** `commitOnce` without consumption or guard (Invariant 5). */
  async saveWithinQuotas(write: QuotaWrite): Promise<QuotaOutcome> {
    const outcome = await this.commitOnce({ ...write, guards: [] });
    if (outcome.outcome === 'spent') return outcome;
    if (outcome.outcome === 'committed') return { outcome: 'saved' };
    throw unfitStore(`commitOnce answered ${outcome.outcome} for a write that consumes nothing and has no guard`);
  }
}
