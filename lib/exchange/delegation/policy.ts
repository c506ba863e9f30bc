import { invalidRequest } from '../../errors.js';
import { refusalReason, type ExchangeDecision, type PolicyDecision } from '../../config/decisions.js';
import type { DelegationPolicyInput, ResolvedDelegationOptions } from './options.js';

/** The deployment's decision, as `canExchange`'s: allow, refuse or narrow; resolves the scopes. */
export async function decideDelegation(
  options: ResolvedDelegationOptions,
  input: DelegationPolicyInput,
): Promise<string[]> {
  if (!options.canDelegate) return input.scope;
  const decision: ExchangeDecision = await options.canDelegate(Object.freeze({ ...input, scope: [...input.scope] }));
  if (typeof decision === 'object' && decision !== null && 'scope' in decision && Array.isArray(decision.scope)) {
    const asked = new Set(input.scope);
    if (decision.scope.some((name) => typeof name !== 'string' || !asked.has(name))) {
      throw invalidRequest('the delegation policy may narrow the requested scope, never widen it');
    }
    return input.scope.filter((name) => decision.scope.includes(name));
  }
  const refused = refusalReason(decision as PolicyDecision, 'the delegation policy refused this delegation');
  if (refused) throw invalidRequest(refused);
  return input.scope;
}
