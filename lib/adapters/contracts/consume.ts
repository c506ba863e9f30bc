import type { Adapter } from 'oidc-provider';
import { hasFunctions, type DomainNeed } from './domain.js';

/** Marks an entry consumed for exactly one caller; rejects, never `false`, on an outage (Invariant 1; docs/adapters.md). */
export interface AtomicConsume {
  consumeOnce(id: string): Promise<boolean>;
}

export type AtomicAdapter = Adapter & AtomicConsume;

/** A domain's need of `consumeOnce`, and what the domain does with it. */
export function consumeOnceNeed(why: string): DomainNeed {
  return { operations: 'consumeOnce(id)', has: (adapter) => hasFunctions(adapter, 'consumeOnce'), why };
}
