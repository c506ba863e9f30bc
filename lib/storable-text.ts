/** Invariant 49: text PostgreSQL can store (no U+0000, no lone surrogate), whichever the store. */
const UNSTORABLE = /\0|\p{Cs}/u;
const UNSTORABLE_ALL = /\0|\p{Cs}/gu;

export const UNSTORABLE_TEXT = 'text that cannot be stored (U+0000 or a lone surrogate)';

export function isStorableText(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/** Whether every string of a JSON value, keys included, is storable; iterative, so deep nesting cannot exhaust the stack. */
export function isStorableJson(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length) {
    const next = pending.pop();
    if (typeof next === 'string' && !isStorableText(next)) return false;
    // An array's keys are its indexes, always storable.
    if (typeof next === 'object' && next !== null)
      for (const [key, member] of Object.entries(next)) pending.push(key, member);
  }
  return true;
}

/** The text with unstorable characters replaced by U+FFFD, for what is recorded rather than acted on. */
export function storableText(value: string): string {
  return isStorableText(value) ? value : value.replace(UNSTORABLE_ALL, '\uFFFD');
}

/** What shows nothing alone: spaces, controls, format characters, default-ignorables, the blank braille cell, marks, private-use and unassigned code points. */
const INVISIBLE = /^[\p{White_Space}\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\u2800\p{M}\p{Co}\p{Cn}]*$/u;
/** Embeddings, overrides and isolates: they reorder what follows them, the rest of a log line included. */
const BIDI_CONTROL = /[\u202A-\u202E\u2066-\u2069]/u;

export const ILLEGIBLE_TEXT = 'must hold a visible character and no bidirectional control';

/** Text a person reads as it was written (a ticket, a reason): something visible, nothing that reorders it. */
export function isLegibleText(value: string): boolean {
  return !INVISIBLE.test(value) && !BIDI_CONTROL.test(value);
}
