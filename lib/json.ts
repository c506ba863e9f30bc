/** JSON as the plugin carries it (a subject token's `context`, an event's), imported by options and events alike. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonObject | JsonValue[];
export interface JsonObject {
  [key: string]: JsonValue;
}

/** The members whose value is given: an option left `undefined` takes its default, and no event carries one. */
export function definedMembers<T extends object>(members: T): Partial<T> {
  const defined: Partial<T> = {};
  for (const name of Object.keys(members) as (keyof T)[])
    if (members[name] !== undefined) defined[name] = members[name];
  return defined;
}

/** `value` as JSON text, objects' keys sorted (`__proto__` too), undefined members null: one value, one text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(keysSorted(value ?? null));
}

function keysSorted(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(keysSorted);
  const sorted: Record<string, unknown> = Object.create(null);
  for (const key of Object.keys(value).sort())
    sorted[key] = keysSorted((value as Record<string, unknown>)[key]) ?? null;
  return sorted;
}

/** `text` parsed, or the error `refuse` makes when it is not JSON. */
export function parseJson(text: string, refuse: () => Error): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw refuse();
  }
}

/** The text of a body's chunks, or the error `tooLarge` makes once they pass `limit` bytes (leaving the loop cancels the rest). */
export async function boundedText(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  limit: number,
  tooLarge: () => Error,
): Promise<string> {
  const read: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    // A stream a host set an encoding on yields text: counted in bytes all the same.
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += bytes.byteLength;
    if (size > limit) throw tooLarge();
    read.push(bytes);
  }
  return Buffer.concat(read).toString('utf8');
}

/** Freezes `value` deeply and returns it; an object already frozen is taken to be frozen all through. */
export function deepFreeze<T extends JsonValue>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const member of Array.isArray(value) ? value : Object.values(value)) deepFreeze(member);
  return value;
}

/** `JSON.parse(JSON.stringify(value))`, without the text when the value is JSON-plain (about five times faster). */
export function jsonCopy(value: unknown): JsonValue {
  return plainCopy(value, 0) ?? (JSON.parse(JSON.stringify(value) ?? 'null') as JsonValue);
}

/** Deeper than this, the copy leaves the value to JSON, which finds a cycle where this would overflow the stack. */
const PLAIN_DEPTH = 64;

/** A deep copy of JSON-plain `value`, or undefined when JSON would change something in it. */
function plainCopy(value: unknown, depth: number): JsonValue | undefined {
  if (typeof value === 'string' || typeof value === 'boolean' || value === null) return value;
  // JSON writes -0 as 0, and a non-finite number as null.
  if (typeof value === 'number') return Number.isFinite(value) ? value + 0 : undefined;
  if (typeof value !== 'object') return undefined;
  if (depth === PLAIN_DEPTH) return undefined;
  if (Array.isArray(value)) {
    const copy: JsonValue[] = new Array<JsonValue>(value.length);
    for (let at = 0; at < value.length; at += 1) {
      const item = plainCopy(value[at], depth + 1);
      if (item === undefined) return undefined;
      copy[at] = item;
    }
    return copy;
  }
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== null) return undefined;
  const copy: JsonObject = {};
  for (const key of Object.keys(value)) {
    const item = plainCopy((value as Record<string, unknown>)[key], depth + 1);
    if (item === undefined) return undefined;
    // JSON.parse makes "__proto__" an own property; an assignment would set the prototype instead.
    if (key === '__proto__')
      Object.defineProperty(copy, key, { value: item, enumerable: true, writable: true, configurable: true });
    else copy[key] = item;
  }
  return copy;
}
