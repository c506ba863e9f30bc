/** Checks of what a backend asks and a customer gives; each refusal is a 400 naming the field, never its value. */
import { invalidInput } from '../errors.js';
import { ILLEGIBLE_TEXT, isLegibleText, isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';

/** Longest note, denial reason or break-glass reason, in characters. */
const MAX_TEXT = 500;
/** Most scopes one ceiling lists. */
const MAX_SCOPES = 50;
const MAX_RESOURCE_LENGTH = 1024;
const MAX_ID_LENGTH = 1024;
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,256}$/;
const isScopeName = (name: unknown) => typeof name === 'string' && SCOPE_TOKEN.test(name);

/** An object's fields, refusing any not in `allowed` and listing those allowed, never the one sent. */
export function fieldsOf(value: unknown, allowed: readonly string[], what = 'body'): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalidInput(`${what} must be a JSON object`);
  if (Object.keys(value).some((field) => !allowed.includes(field)))
    throw invalidInput(`${what} has an unknown field; its fields are ${allowed.join(', ')}`);
  return value as Record<string, unknown>;
}

/** A list of scope names, without repeats, in the order given; absent stays absent. */
export function readScopeList(value: unknown, field: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || !value.length || value.length > MAX_SCOPES || !value.every(isScopeName))
    throw invalidInput(`${field} must be an array of 1 to ${MAX_SCOPES} scope names`);
  return [...new Set(value as string[])];
}

/** An absolute URI without a fragment, as a resource indicator is (RFC 8707). */
export function readResource(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  const storable = typeof value === 'string' && value.length <= MAX_RESOURCE_LENGTH && isStorableText(value);
  // A fragment, even an empty one, is refused by its '#'.
  if (!storable || !URL.parse(value) || value.includes('#'))
    throw invalidInput(`${field} must be an absolute URI without a fragment`);
  return value;
}

export function readDuration(value: unknown, max: number, field = 'duration'): number {
  if (!Number.isSafeInteger(value) || (value as number) < 1 || (value as number) > max)
    throw invalidInput(`${field} must be an integer number of seconds from 1 to ${max}`);
  return value as number;
}

/** Free text: trimmed, non-empty, at most MAX_TEXT characters, storable and legible. */
export function readText(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !value.trim() || value.length > MAX_TEXT)
    throw invalidInput(`${field} must be a non-empty string of at most ${MAX_TEXT} characters`);
  if (!isStorableText(value)) throw invalidInput(`${field} holds ${UNSTORABLE_TEXT}`);
  if (!isLegibleText(value)) throw invalidInput(`${field} ${ILLEGIBLE_TEXT}`);
  return value.trim();
}

/** An account or client id: non-empty, no surrounding white space, storable. */
export function readIdentifier(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (!isIdentifier(value) || !isStorableText(value)) throw invalidInput(`${field} must be a non-empty string`);
  return value;
}

/** An id as a path or a body may carry it: not empty, not longer than any the plugin makes, no space around it. */
export function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH && value.trim() === value;
}
