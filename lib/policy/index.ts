import type { ResolvedCoreOptions } from '../core-options.js';
import { withDecisionPoint } from './compose.js';
import { resolveAuthzenOptions, type AuthzenOptions, type ResolvedAuthzenOptions } from './options.js';

/** The `authzen` option composed into the policy hooks at start-up (`canDelegate` where delegation is assembled). */
export function applyDecisionPoint(
  input: AuthzenOptions | undefined,
  hooks: Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>,
): Partial<Pick<ResolvedCoreOptions, 'canImpersonate' | 'canExchange'>> & { authzen?: ResolvedAuthzenOptions } {
  const authzen = resolveAuthzenOptions(input);
  // Without a decision point the hooks stay as given (absent ones absent).
  if (!authzen) return {};
  return { ...withDecisionPoint(authzen, hooks), authzen };
}
