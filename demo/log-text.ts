/** Longest text of a request (a reason, a ticket, a refusal's words) a log line quotes. */
const QUOTED_TEXT = 120;

/** A request's words on one line of bounded length: a line break cannot forge a line, a bidi control cannot reorder one. */
export function logText(value: string): string {
  const flat = value.replace(/[\p{Cc}\p{Cf}\u2028\u2029]+/gu, ' ');
  return flat.length > QUOTED_TEXT ? `${flat.slice(0, QUOTED_TEXT - 1)}…` : flat;
}
