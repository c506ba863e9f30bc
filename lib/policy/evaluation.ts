import { decisionPointUnavailable, DecisionPointUnavailable } from '../errors.js';
import { boundedText, definedMembers, parseJson, type JsonValue } from '../json.js';
import type { ResolvedAuthzenOptions } from './options.js';

/** The decisions the plugin sends, as AuthZEN `action.name`s. */
export type PolicyAction = 'impersonate' | 'break-glass' | 'approve' | TokenEndpointAction;
type TokenEndpointAction = 'exchange' | 'delegate' | 'issue-id-jag' | 'redeem-id-jag';

/** An AuthZEN Access Evaluation request (Authorization API 1.0, section 6). */
export interface AccessEvaluation {
  subject: { type: 'user' | 'client'; id: string };
  action: { name: PolicyAction };
  resource: { type: 'user' | 'client'; id: string };
  /** Members left undefined are not sent. */
  context: Record<string, JsonValue | undefined>;
}

/** Larger answers are not read: a decision is a few hundred bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** A reason longer than this is cut: it goes into an error description and the trail. */
const MAX_REASON = 300;

/** Sends one Access Evaluation; fails closed with `DecisionPointUnavailable`, naming the problem, never a header or body. */
export async function evaluateAccess(
  options: ResolvedAuthzenOptions,
  evaluation: AccessEvaluation,
): Promise<{ allowed: true } | { allowed: false; reason?: string }> {
  const signal = AbortSignal.timeout(options.timeout);
  let answer: unknown;
  try {
    const response = await fetch(options.endpoint, {
      method: 'POST',
      headers: { ...options.headers, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(evaluation),
      signal,
      redirect: 'error',
    });
    if (response.status < 200 || response.status > 299) {
      await response.body?.cancel().catch(() => {});
      throw decisionPointUnavailable(`answered ${response.status}`);
    }
    const text = await boundedText(response.body ?? [], MAX_ANSWER_BYTES, () =>
      decisionPointUnavailable(`answered with more than ${MAX_ANSWER_BYTES} bytes`),
    );
    answer = parseJson(text, () => decisionPointUnavailable('answered with something other than JSON'));
  } catch (error) {
    if (error instanceof DecisionPointUnavailable) throw error;
    if (signal.aborted) throw decisionPointUnavailable(`did not answer within ${options.timeout} ms`);
    throw decisionPointUnavailable('cannot be reached', error);
  }
  // `{ decision: boolean, context?: object }`: anything else is no answer.
  const { decision, context } = (answer ?? {}) as { decision?: unknown; context?: unknown };
  if (typeof decision !== 'boolean') throw decisionPointUnavailable('answered without a boolean "decision"');
  if (decision) return { allowed: true };
  return { allowed: false, ...definedMembers({ reason: userReason(context) }) };
}

/** The user's reason (`context.reason_user`, a string or by language); `reason_admin` stays with the operators. */
function userReason(context: unknown): string | undefined {
  const given = (context as { reason_user?: unknown } | null | undefined)?.reason_user;
  let text: unknown = given;
  if (typeof given === 'object' && given !== null) {
    const entries = Object.entries(given).filter((entry): entry is [string, string] => typeof entry[1] === 'string');
    text = (entries.find(([language]) => /^en\b/i.test(language)) ?? entries[0])?.[1];
  }
  if (typeof text !== 'string') return undefined;
  // One line of printable text: it becomes an error description and a field of the trail.
  const line = [...text.replace(/[\p{Cc}\p{Cs}]+/gu, ' ').trim()].slice(0, MAX_REASON).join('');
  return line || undefined;
}
