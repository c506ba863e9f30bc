import type { AdapterPayload } from 'oidc-provider';

/**
 * Entries a store read ahead of being asked for them, within one request.
 * Honouring an opaque access token takes three reads, the token and then,
 * once its payload names them, its session and its Grant. The plugin asks
 * for the token within `readingAhead(box, …)`; a store that can (PostgreSQL,
 * where the three are rows of one table) reads the session and the Grant in
 * the same statement and leaves them in `box`. The plugin then asks for them
 * within `readingAhead(box, …)` again, and the store answers from the box:
 * one round trip and one statement instead of two, and the three read in one
 * snapshot. Each entry is answered once, and only to the request that holds
 * the box; what it does not hold is read as ever. A store that reads nothing
 * ahead ignores the box.
 */
export class ReadAhead {
  /** Made by the first entry left: a store that reads nothing ahead costs a box nothing more. */
  #entries: Map<string, AdapterPayload> | undefined;

  /** Leaves what `owner`'s store found for `model` by id or uid `key`. */
  put(owner: object, model: string, by: 'id' | 'uid', key: string, payload: AdapterPayload): void {
    (this.#entries ??= new Map()).set(entryKey(owner, model, by, key), payload);
  }

  /** What was left for that read, taken out of the box; `undefined` when nothing was. */
  take(owner: object, model: string, by: 'id' | 'uid', key: string): AdapterPayload | undefined {
    if (!this.#entries?.size) return undefined;
    const at = entryKey(owner, model, by, key);
    const payload = this.#entries.get(at);
    this.#entries.delete(at);
    return payload;
  }
}

const OWNERS = new WeakMap<object, number>();
let nextOwner = 0;

function entryKey(owner: object, model: string, by: 'id' | 'uid', key: string): string {
  let id = OWNERS.get(owner);
  if (id === undefined) OWNERS.set(owner, (id = nextOwner += 1));
  return `${id}\u0000${model}\u0000${by}\u0000${key}`;
}

let current: ReadAhead | undefined;

/**
 * Runs `call` with `box` as the read-ahead of the store calls it makes
 * synchronously (oidc-provider's models call their adapter before their
 * first `await`); a call made later, by this request or any other, sees none.
 */
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
