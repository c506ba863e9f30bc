/** The checks every option goes through once; an error names the function and the option, never the value. */
import { invalidOption } from '../errors/standalone.js';
import { refuseUnknownOptions } from './names.js';

/** One OAuth scope name (RFC 6749 3.3): no space, quote or backslash. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/** An absolute URL path of unreserved characters, without a trailing slash. */
const ABSOLUTE_PATH = /^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$/;

export type OptionChecks = ReturnType<typeof optionChecks>;

/** The checks of the options given to `fn`, which every error names. */
export function optionChecks(fn: string) {
  const fail = (name: string, requirement: string): never => {
    throw invalidOption(fn, name, requirement);
  };
  const integer = (name: string, value: unknown, max: number): number => {
    if (!Number.isSafeInteger(value) || (value as number) < 1 || (value as number) > max)
      fail(name, `must be an integer from 1 to ${max}`);
    return value as number;
  };
  return {
    /** Refuses the option `name`: `requirement` says what it must be. */
    fail(name: string, requirement: string): never {
      return fail(name, requirement);
    },
    /** Refuses a key of `given` that is not in `known`, naming the nearest one; `prefix` is the slice's (`"ssf."`). */
    known: (given: object, known: readonly string[], prefix = '') => refuseUnknownOptions(fn, given, known, prefix),
    /** An object, not an array. */
    object(name: string, value: unknown): asserts value is object {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(name, 'must be an object');
    },
    integer,
    integerOr: (name: string, value: unknown, fallback: number, max: number) =>
      value === undefined ? fallback : integer(name, value, max),
    positive(name: string, value: unknown): number {
      if (!Number.isSafeInteger(value) || (value as number) < 1) fail(name, 'must be a positive integer');
      return value as number;
    },
    optionalFunction(name: string, value: unknown): void {
      if (value !== undefined && typeof value !== 'function') fail(name, 'must be a function');
    },
    scope(name: string, value: unknown): string {
      if (typeof value !== 'string' || !SCOPE_TOKEN.test(value)) fail(name, 'must be a single scope name');
      return value as string;
    },
    path(name: string, value: unknown): string {
      if (typeof value !== 'string' || !ABSOLUTE_PATH.test(value))
        fail(name, 'must be an absolute path without a trailing slash');
      return value as string;
    },
    /** An absolute URI without a fragment (a resource indicator, RFC 8707). */
    resourceIndicator(name: string, value: unknown): string {
      const url = typeof value === 'string' ? URL.parse(value) : null;
      if (!url || url.hash) fail(name, 'must be an absolute URI without a fragment');
      return value as string;
    },
    /** An array of non-empty client ids, copied and frozen. */
    clientIds(name: string, value: unknown): string[] {
      if (!Array.isArray(value) || value.some((id) => typeof id !== 'string' || !id))
        fail(name, 'must be an array of client ids');
      return Object.freeze([...(value as string[])]) as string[];
    },
  };
}
