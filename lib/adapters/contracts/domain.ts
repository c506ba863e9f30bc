/** A domain's contract: the operations beyond oidc-provider's adapter API its store must offer, checked at open (plugin-store.ts). */
export interface DomainContract<Store extends object> {
  /** What it needs, in the order it is checked; the first one missing is the one the error names. */
  needs: readonly DomainNeed[];
  /** Never set: ties the contract to the adapter type its checks stand for. */
  readonly store?: Store;
}

export interface DomainNeed {
  /** The operations, as the error names them: `consumeOnce(id)`. */
  operations: string;
  /** Whether `adapter` has them (each a function). */
  has(adapter: object): boolean;
  /** What the domain does with them, for the error. */
  why: string;
  /** Where else to turn, when not the shipped adapters or adding the operations. */
  remedy?: string;
}

/** The first of the domain's needs `adapter` lacks, or undefined when it is fit for the domain. */
export function lackOf(contract: DomainContract<object>, adapter: object): DomainNeed | undefined {
  return contract.needs.find((need) => !need.has(adapter));
}

/** Whether `adapter` offers every operation of the domain. */
export function fitsDomain<Store extends object>(contract: DomainContract<Store>, adapter: object): adapter is Store {
  return lackOf(contract, adapter) === undefined;
}

/** Whether `adapter` has each of `names`, as a function. */
export function hasFunctions(adapter: object, ...names: string[]): boolean {
  return names.every((name) => typeof (adapter as Record<string, unknown>)[name] === 'function');
}
