/**
 * Text PostgreSQL can store: neither U+0000 (a text column refuses the byte
 * 0x00, jsonb the escape \u0000) nor a UTF-16 surrogate without its pair
 * (jsonb refuses it; a text column silently turns it into U+FFFD, so that
 * what is read back is not what was hashed or compared). Every input that
 * may reach a store is held to this rule, whichever store a deployment
 * uses, so that its answer never depends on the store.
 */
const UNSTORABLE = /\0|\p{Cs}/u;
const UNSTORABLE_ALL = /\0|\p{Cs}/gu;

export const UNSTORABLE_TEXT = 'text that cannot be stored (U+0000 or a lone surrogate)';

export function isStorableText(value: string): boolean {
  return !UNSTORABLE.test(value);
}

/**
 * Whether every string of a JSON value, keys included, at any depth, is
 * storable. Iterative: a deeply nested body must not exhaust the stack.
 */
export function isStorableJson(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length) {
    const next = pending.pop();
    if (typeof next === 'string') {
      if (!isStorableText(next)) return false;
    } else if (Array.isArray(next)) {
      for (const member of next) pending.push(member);
    } else if (typeof next === 'object' && next !== null) {
      for (const [key, member] of Object.entries(next)) {
        if (!isStorableText(key)) return false;
        pending.push(member);
      }
    }
  }
  return true;
}

/**
 * The text with each unstorable character replaced by U+FFFD: for what is
 * recorded rather than acted on (a refusal's description that quotes a
 * request), so that the record is still written.
 */
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
