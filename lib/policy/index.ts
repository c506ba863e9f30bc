import type { ResolvedDelegationOptions } from '../exchange/delegation/options.js';
import type { ResolvedCoreOptions } from '../core-options.js';
import { delegationWithDecisionPoint, withDecisionPoint } from './compose.js';
import { resolveAuthzenOptions, type AuthzenOptions, type ResolvedAuthzenOptions } from './options.js';

export { assertApprovalAllowed } from './compose.js';
export type { AuthzenOptions, ResolvedAuthzenOptions } from './options.js';

/**
 * The `authzen` option, resolved and composed into the policy hooks at
 * start-up: what the call sites ask (`canImpersonate`, `canExchange`,
 * `delegation.canDelegate`) asks the decision point too.
 */
export function applyDecisionPoint(
  input: AuthzenOptions | undefined,
  hooks: Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>,
  delegation: ResolvedDelegationOptions,
): Partial<Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>> & {
  authzen?: ResolvedAuthzenOptions;
  delegation: ResolvedDelegationOptions;
} {
  const authzen = resolveAuthzenOptions(input);
  // Without a decision point the hooks stay as given (absent ones absent).
  if (!authzen) return { delegation };
  return {
    ...withDecisionPoint(authzen, hooks),
    delegation: delegationWithDecisionPoint(authzen, delegation),
    authzen,
  };
}
