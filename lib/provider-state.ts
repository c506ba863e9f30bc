/** What the plugin keeps per provider: each module declares its slot and alone knows its type. */
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

/** Invariant 43: the requests the provider is answering now. */
export const REQUESTS_IN_FLIGHT = providerSlot('requests in flight', () => ({ count: 0 }));
