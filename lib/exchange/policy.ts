import { invalidRequest } from '../errors.js';
import { refusalReason, type ExchangeDecision, type PolicyDecision } from '../config/decisions.js';
import type { ExchangePolicyInput, ResolvedCoreOptions as ResolvedOptions } from '../core-options.js';

/** The deployment's `canExchange`: allow, refuse (`false`, `{ reason }`) or narrow (`{ scope }`); resolves the scopes. */
export async function decide(options: ResolvedOptions, input: ExchangePolicyInput): Promise<string[]> {
  if (!options.canExchange) return input.scope;
  return narrowedScopes(await options.canExchange(input), input.scope);
}

/** A policy that names a scope not asked for is refused rather than obeyed: it can never widen. */
function narrowedScopes(decision: ExchangeDecision, requested: string[]): string[] {
  if (typeof decision === 'object' && decision !== null && 'scope' in decision && Array.isArray(decision.scope)) {
    const asked = new Set(requested);
    const narrowed = [...new Set(decision.scope)];
    const wider = narrowed.filter((name) => typeof name !== 'string' || !asked.has(name));
    if (wider.length) throw invalidRequest('the exchange policy may narrow the requested scope, never widen it');
    return requested.filter((name) => narrowed.includes(name));
  }
  const refused = refusalReason(decision as PolicyDecision, 'the exchange policy refused this impersonation');
  if (refused) throw invalidRequest(refused);
  return requested;
}
