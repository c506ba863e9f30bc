/** Reading the flags of the bench's commands (command-line.ts, scale-out-command-line.ts). */

/** The word after `name` in `argv`, or undefined when `name` is not given. */
export function flagValue(argv: readonly string[], name: string): string | undefined {
  const index = argv.indexOf(name);
  return index >= 0 ? argv[index + 1] : undefined;
}

/** The whole number of at least 1 after `name`, `fallback` without the flag; anything else is an error. */
export function positiveInteger(argv: readonly string[], name: string, fallback: number, unit = ''): number {
  const value = Number(flagValue(argv, name) ?? fallback);
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`${name} must be a positive integer${unit}`);
  return value;
}

/**
 * --duration, the seconds of a window: autocannon checks its deadline once a
 * second, so a window is a whole number of them.
 */
export function windowSeconds(argv: readonly string[], fallback: number): number {
  return positiveInteger(argv, '--duration', fallback, ' (seconds)');
}
