import { invalidOption } from '../errors/standalone.js';

/** Refuses an option nobody reads, naming the nearest known one, never the value. */
export function refuseUnknownOptions(fn: string, given: object, known: readonly string[], prefix = ''): void {
  for (const name of Object.keys(given)) {
    if (known.includes(name)) continue;
    const near = nearestName(name, known);
    throw invalidOption(
      fn,
      prefix + printable(name),
      near === undefined ? 'is unknown' : `is unknown; did you mean "${prefix}${near}"?`,
    );
  }
}

/** Refuses a name that is not one of `known` but nearly is (`ImpersonationSesion`); a name far from all is taken as given. */
export function refuseNearMisses(fn: string, option: string, names: readonly string[], known: readonly string[]): void {
  for (const name of names) {
    const near = known.includes(name) ? undefined : nearestName(name, known);
    if (near !== undefined) throw invalidOption(fn, option, `names "${printable(name)}"; did you mean "${near}"?`);
  }
}

/** The known name that differs only in case, or by at most two edits (and less than a third of it). */
function nearestName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    // Each character of length apart is an edit already.
    if (Math.abs(lower.length - candidate.length) > 2) continue;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance > 2 || distance * 3 >= candidate.length) continue;
    if (!best || distance < best.distance) best = { name: candidate, distance };
  }
  return best?.name;
}

/** Levenshtein distance, with a swap of two neighbours counting as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        distance = Math.min(distance, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = distance;
    }
  }
  return rows[a.length]![b.length]!;
}

/** A key as it can be printed on one line, and not at any length. */
function printable(name: string): string {
  const escaped = JSON.stringify(name).slice(1, -1);
  return escaped.length > 64 ? `${escaped.slice(0, 64)}…` : escaped;
}
