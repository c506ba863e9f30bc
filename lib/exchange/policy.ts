import { invalidRequest } from '../errors.js';
import { isThenable } from './claims.js';
import { refusalReason, type ExchangeDecision, type PolicyDecision } from '../config/decisions.js';

/** How a kind names its policy in a refusal. */
export interface PolicyNames {
  /** `the exchange policy`, `the delegation policy`. */
  policy: string;
  /** What it refused: `this impersonation`. */
  refused: string;
}

/**
 * The deployment's decision (`canExchange`, `canDelegate`): allow, refuse (`false`, `{ reason }`) or narrow
 * (`{ scope }`), never widen; the scopes, at once when the policy answers at once. A refusal rejects, never throws:
 * `invalid_request` unless the grant has its own error (`invalid_grant` for a jwt-bearer assertion).
 */
export function decide<Input extends { scope: string[] }>(
  hook: ((input: Input) => ExchangeDecision | Promise<ExchangeDecision>) | undefined,
  input: Input,
  names: PolicyNames,
  refusal: (description: string) => Error = invalidRequest,
): string[] | Promise<string[]> {
  if (!hook) return input.scope;
  const requested = [...input.scope];
  const decided = (decision: ExchangeDecision): string[] => {
    if (typeof decision === 'object' && decision !== null && 'scope' in decision && Array.isArray(decision.scope)) {
      const asked = new Set(requested);
      if (decision.scope.some((name) => typeof name !== 'string' || !asked.has(name)))
        throw refusal(`${names.policy} may narrow the requested scope, never widen it`);
      return requested.filter((name) => decision.scope.includes(name));
    }
    const refused = refusalReason(decision as PolicyDecision, `${names.policy} refused ${names.refused}`);
    if (refused) throw refusal(refused);
    return requested;
  };
  try {
    const answer = hook(input);
    return isThenable(answer) ? Promise.resolve(answer).then(decided) : decided(answer);
  } catch (error) {
    return Promise.reject(error as Error);
  }
}
