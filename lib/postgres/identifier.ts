import { invalidOption } from '../errors/standalone.js';

/**
 * A schema or table name the plugin puts into SQL between double quotes: a
 * letter or `_`, then letters, digits or `_`, 41 characters at most, so that
 * the longest name derived from it (`<table>_index_expires`, 55 characters)
 * stays within PostgreSQL's 63. Only a string passes: anything else would be
 * turned into text by the check and again, perhaps otherwise, by the SQL.
 */
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
