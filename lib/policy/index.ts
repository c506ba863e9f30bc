import type { ResolvedCoreOptions } from '../core-options.js';
import { withDecisionPoint } from './compose.js';
import { resolveAuthzenOptions, type AuthzenOptions, type ResolvedAuthzenOptions } from './options.js';

/**
 * The `authzen` option, resolved and composed into the policy hooks at
 * start-up: what the call sites ask (`canImpersonate`, `canExchange`) asks the
 * decision point too. `delegation.canDelegate` is composed where the
 * delegation's slice is assembled, with `delegationWithDecisionPoint`.
 */
export function applyDecisionPoint(
  input: AuthzenOptions | undefined,
  hooks: Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>,
): Partial<Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>> & { authzen?: ResolvedAuthzenOptions } {
  const authzen = resolveAuthzenOptions(input);
  // Without a decision point the hooks stay as given (absent ones absent).
  if (!authzen) return {};
  return { ...withDecisionPoint(authzen, hooks), authzen };
}
