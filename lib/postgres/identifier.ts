import { invalidOption } from '../errors/standalone.js';

/** A quoted schema or table name: a letter or `_`, then letters, digits or `_`, at most 41 (derived names fit 63). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,40}$/;

export function isPlainIdentifier(value: unknown): value is string {
  return typeof value === 'string' && IDENTIFIER.test(value);
}

/** Throws a TypeError naming `caller` and the option for the first of `names` that is given and no plain identifier. */
export function assertPlainIdentifiers(caller: string, names: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(names)) {
    if (value !== undefined && !isPlainIdentifier(value))
      throw invalidOption(caller, name, 'must be a plain SQL identifier (letters, digits, _; at most 41)');
  }
}
