/**
 * The one table of what the plugin keeps per provider. Each module that
 * keeps something for a provider declares its slot (a name, and how the value
 * is made on first use) and is the only one to know its type, so that this
 * table names none of them; every value lives as long as its provider. The
 * code that runs inside the provider (the grant, the Management API, a
 * session's stop) reaches it through the provider oidc-provider hands it.
 */
export interface ProviderSlot<T> {
  readonly name: string;
  readonly make: (provider: object) => T;
}

export function providerSlot<T>(name: string, make: (provider: object) => T): ProviderSlot<T> {
  return Object.freeze({ name, make });
}

const states = new WeakMap<object, Map<ProviderSlot<unknown>, unknown>>();

/** The provider's value of `slot`, made on first use. */
export function slotOf<T>(provider: object, slot: ProviderSlot<T>): T {
  let state = states.get(provider);
  if (!state) {
    state = new Map();
    states.set(provider, state);
  }
  if (!state.has(slot)) state.set(slot, slot.make(provider));
  return state.get(slot) as T;
}

/**
 * The requests the provider is answering now, counted by the first middleware
 * install() adds: the outbox's delivery waits while there are any
 * (lib/webhooks/worker.ts).
 */
export const REQUESTS_IN_FLIGHT = providerSlot('requests in flight', () => ({ count: 0 }));
