/** Longest text of a request (a reason, a ticket, a refusal's words) a log line quotes. */
const QUOTED_TEXT = 120;

/** A request's words on one line of bounded length: a line break in them cannot forge a line of the log. */
export function logText(value: string): string {
  // eslint-disable-next-line no-control-regex
  const flat = value.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ');
  return flat.length > QUOTED_TEXT ? `${flat.slice(0, QUOTED_TEXT - 1)}…` : flat;
}
