/** Reading the flags of the bench's commands (command-line.ts, scale-out-command-line.ts). */

/**
 * Refuses a flag the command does not read (a typo, `--rounds=3`), naming it
 * with the usage, before anything runs: unnoticed, it would leave a long run
 * measuring something else. `valued` flags take the word after them.
 */
export function checkFlags(
  argv: readonly string[],
  flags: { valued: readonly string[]; plain: readonly string[] },
  usage: string,
): void {
  for (let at = 0; at < argv.length; at += 1) {
    const flag = argv[at]!;
    if (flags.valued.includes(flag)) at += 1;
    else if (!flags.plain.includes(flag)) throw new TypeError(`unknown flag ${flag}; usage: ${usage}`);
  }
}

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
