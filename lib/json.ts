/** JSON as the plugin carries it (a subject token's `context`, an event's), imported by options and events alike. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonObject | JsonValue[];
export interface JsonObject {
  [key: string]: JsonValue;
}

/** The members whose value is given: an option left `undefined` takes its default, and no event carries one. */
export function definedMembers<T extends object>(members: T): Partial<T> {
  return Object.fromEntries(Object.entries(members).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** `text` parsed, or the error `refuse` makes when it is not JSON. */
export function parseJson(text: string, refuse: () => Error): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw refuse();
  }
}

/**
 * Freezes `value` and everything in it, and returns it: a view that whoever
 * receives it cannot change. An object already frozen is taken to be frozen
 * all through (this function is what freezes the plugin's JSON).
 */
export function deepFreeze<T extends JsonValue>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const member of Array.isArray(value) ? value : Object.values(value)) deepFreeze(member);
  return value;
}
