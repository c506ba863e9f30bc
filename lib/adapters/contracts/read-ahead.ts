import type { AdapterPayload } from 'oidc-provider';

/** Entries a store read ahead within one request: PostgreSQL reads a token's session and Grant with it (one statement). */
export class ReadAhead {
  /** Made by the first entry left: a store that reads nothing ahead costs a box nothing more. */
  #entries: Map<object, Map<string, AdapterPayload>> | undefined;

  /** Leaves what `owner`'s store found for `model` by id or uid `key`. */
  put(owner: object, model: string, by: 'id' | 'uid', key: string, payload: AdapterPayload): void {
    this.#entries ??= new Map();
    const owned = this.#entries.get(owner) ?? new Map<string, AdapterPayload>();
    this.#entries.set(owner, owned.set(`${model}\u0000${by}\u0000${key}`, payload));
  }

  /** What was left for that read, taken out of the box; `undefined` when nothing was. */
  take(owner: object, model: string, by: 'id' | 'uid', key: string): AdapterPayload | undefined {
    const owned = this.#entries?.get(owner);
    if (!owned) return undefined;
    const at = `${model}\u0000${by}\u0000${key}`;
    const payload = owned.get(at);
    owned.delete(at);
    return payload;
  }
}

let current: ReadAhead | undefined;

/** Runs `call` with `box` as the read-ahead of the store calls it makes synchronously; later calls see none. */
export function readingAhead<Result>(box: ReadAhead, call: () => Result): Result {
  const outer = current;
  current = box;
  try {
    return call();
  } finally {
    current = outer;
  }
}

/** The box of the `readingAhead` call running now, if any. */
export function currentReadAhead(): ReadAhead | undefined {
  return current;
}
