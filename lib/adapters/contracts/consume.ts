import type { Adapter } from 'oidc-provider';
import type { DomainNeed } from './domain.js';

/**
 * The one operation single use rests on. oidc-provider's own `consume(id)`
 * returns nothing, so a caller can only find-then-consume, and two requests can
 * both win. An adapter that stores subject tokens must also offer this:
 *
 * `consumeOnce(id)` atomically marks the entry `id` consumed and resolves
 * `true` only for the one call that moved it from unconsumed to consumed. It
 * resolves `false` when the entry is missing (never stored, or gone with its TTL)
 * or already consumed. It
 * rejects (never resolves `false`) when the store cannot be reached, so an
 * outage is never mistaken for a replay.
 */
export interface AtomicConsume {
  consumeOnce(id: string): Promise<boolean>;
}

export type AtomicAdapter = Adapter & AtomicConsume;

function hasAtomicConsume(adapter: object): adapter is AtomicAdapter {
  return typeof (adapter as Partial<AtomicConsume>).consumeOnce === 'function';
}

/** A domain's need of `consumeOnce`, and what the domain does with it. */
export function consumeOnceNeed(why: string): DomainNeed {
  return { operations: 'consumeOnce(id)', has: hasAtomicConsume, why };
}
