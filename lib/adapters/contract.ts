import type { Adapter, AdapterConstructor, AdapterFactory } from 'oidc-provider';

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

/** An oidc-provider adapter: a class (`new Adapter(name)`) or a factory (`Adapter(name)`). */
export type AdapterSource = AdapterConstructor | AdapterFactory;

export function instantiateAdapter(source: AdapterSource, name: string): Adapter {
  // Tell the two apart the way oidc-provider does, so both see the same instance kind.
  if (isConstructor(source)) {
    return new source(name);
  }
  return (source as AdapterFactory)(name);
}

export function hasAtomicConsume(adapter: Adapter): adapter is AtomicAdapter {
  return typeof (adapter as Partial<AtomicConsume>).consumeOnce === 'function';
}

function isConstructor(value: AdapterSource): value is AdapterConstructor {
  return typeof value.prototype === 'object' && value.prototype !== null;
}

