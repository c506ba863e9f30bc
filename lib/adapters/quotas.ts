import { unfitStore } from '../errors/standalone.js';
import type { AtomicCommit, QuotaOutcome, QuotaWrite } from './contracts/commit.js';

/** `saveWithinQuotas` as `commitOnce` without consumption or guard (Invariant 5). */
export async function saveWithinQuotasBy(adapter: AtomicCommit, write: QuotaWrite): Promise<QuotaOutcome> {
  const outcome = await adapter.commitOnce({ ...write, guards: [] });
  if (outcome.outcome === 'spent') return outcome;
  if (outcome.outcome === 'committed') return { outcome: 'saved' };
  throw unfitStore(`commitOnce answered ${outcome.outcome} for a write that consumes nothing and has no guard`);
}
