/** What the deployment's policies answer (`canImpersonate`, `canExchange`, `canDelegate`), and how it is read. */

/** A policy answer: `true` allows; `false` or `{ reason }` refuses (the reason goes to the audit event and the error). */
export type PolicyDecision = boolean | { reason: string };

/** An exchange policy may also narrow: `{ scope }` grants that subset of the requested scopes (never more). */
export type ExchangeDecision = PolicyDecision | { scope: string[] };

/** `undefined` when the policy allowed; otherwise the reason it refused. */
export function refusalReason(decision: PolicyDecision, fallback: string): string | undefined {
  if (decision === true) return undefined;
  if (typeof decision === 'object' && decision !== null && typeof decision.reason === 'string' && decision.reason)
    return decision.reason;
  return fallback;
}
