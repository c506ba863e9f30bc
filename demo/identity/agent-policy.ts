/**
 * Which ID-JAGs the identity service issues to agents (the plugin's
 * `idJagIssuance.canIssue`, docs/cross-app-access.md): an agent acts for a
 * customer only, at the orders application only, and reads only there.
 */
import type { IdJagIssueInput } from '../../lib/index.js';
import { ORDERS_API_SCOPES, ORDERS_AUTH_ISSUER } from '../seed.js';
import type { DemoAccounts } from './accounts.js';

type Decision = true | { reason: string } | { scope: string[] };

export function agentPolicy(accounts: DemoAccounts): (input: IdJagIssueInput) => Decision {
  const allowed: ReadonlySet<string> = new Set(ORDERS_API_SCOPES);
  return ({ subject, audience, scope }) => {
    if (!accounts.user(subject)?.roles.includes('customer'))
      return { reason: `${subject} is no customer: agents act for customers only` };
    if (audience !== ORDERS_AUTH_ISSUER) return { reason: 'agents act at the orders application only' };
    // Nothing asked: the orders application grants what its API defines.
    if (!scope.length) return true;
    const kept = scope.filter((name) => allowed.has(name));
    return kept.length ? { scope: kept } : { reason: `agents may ask for ${[...allowed].join(' ')} only` };
  };
}
