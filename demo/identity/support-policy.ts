/**
 * Who may act for whom, as the identity service decides it with the plugin's
 * hooks (docs/policy.md): a support agent acts only for the customers of the
 * organisation they serve; only with a ticket; within the scope ceiling of
 * their tier (read only, or read and write); and for no longer than their
 * tier's longest session. The words of each refusal are what the console shows.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { CreationPolicyInput, ExchangeDecision, ExchangePolicyInput, PolicyDecision } from '../../lib/index.js';
import { ORGANISATIONS, SUPPORT_TIERS, type DemoUser } from '../seed.js';
import type { DemoAccounts } from './accounts.js';

const WRITE_SCOPE = 'profile:write';
/** The shortest of the tiers' sessions: what an exchange gets when its tier is not known. */
export const SHORTEST_SESSION = Math.min(...Object.values(SUPPORT_TIERS).map((tier) => tier.maxSessionSeconds));

export interface SupportPolicy {
  canImpersonate(input: CreationPolicyInput): PolicyDecision;
  canExchange(input: ExchangePolicyInput): ExchangeDecision;
  /** The longest the token an exchange is issuing may live, by the acting agent's tier. */
  sessionCeiling(): number;
  /** Runs a token request with room for its exchange's ceiling. */
  around(next: () => Promise<void>): Promise<void>;
}

export function supportPolicy(accounts: DemoAccounts): SupportPolicy {
  // The acting agent's ceiling, from the exchange's decision to the token's lifetime in the same request.
  const request = new AsyncLocalStorage<{ sessionCeiling?: number }>();

  /**
   * Why this agent may not act for this customer, or undefined. Without an agent (the
   * backend's own subject token, no actor token) there is no one to scope: the token is
   * the customer's own, at the lowest tier.
   */
  function refusal(actorId: string | undefined, subject: string): string | undefined {
    const customer = accounts.user(subject);
    if (actorId === undefined) return undefined;
    const agent = accounts.user(actorId);
    if (!agent?.roles.includes('support') || !agent.supportTier) return `${actorId} is not support staff`;
    if (customer && customer.organisation !== agent.organisation) {
      return (
        `${agent.id} supports ${ORGANISATIONS[agent.organisation]} customers only; ` +
        `${subject} is a customer of ${ORGANISATIONS[customer.organisation]}`
      );
    }
    return undefined;
  }

  /** The agent's tier; the lowest when no agent acts. */
  function tierOf(actorId: string | undefined) {
    const agent: DemoUser | undefined = actorId === undefined ? undefined : accounts.user(actorId);
    return SUPPORT_TIERS[agent?.supportTier ?? 'read'];
  }

  return {
    canImpersonate: ({ subject, account, context, actor }) => {
      // "carol is refused": the identity service will not mint subject tokens for protected accounts.
      if (account['impersonable'] === false) return { reason: `${subject} is protected from impersonation` };
      // Only customers: acting as staff would take their roles, and no ceiling of a tier would cover them.
      if (!accounts.user(subject)?.roles.includes('customer')) return { reason: `${subject} is not a customer` };
      const ticket = context['ticketId'];
      if (typeof ticket !== 'string' || !ticket.trim()) {
        return { reason: 'a ticket is required to act as a customer (context.ticketId)' };
      }
      const refused = refusal(actor, subject);
      if (refused) return { reason: refused };
      const tier = tierOf(actor);
      if (context['access'] === 'edit' && !(tier.scopes as readonly string[]).includes(WRITE_SCOPE)) {
        return {
          reason: `${actor ?? 'a request without an agent'}'s role (${tier.label}) may not change customer data`,
        };
      }
      return true;
    },
    canExchange: ({ subject, actor, scope, context }) => {
      const refused = refusal(actor, subject);
      if (refused) return { reason: refused };
      const tier = tierOf(actor);
      const state = request.getStore();
      if (state) state.sessionCeiling = tier.maxSessionSeconds;
      // The role's ceiling, and changes only in an impersonation asked for them: anything else is narrowed.
      const allowed = scope.filter(
        (name) =>
          (tier.scopes as readonly string[]).includes(name) && (name !== WRITE_SCOPE || context['access'] === 'edit'),
      );
      return allowed.length === scope.length ? true : { scope: allowed };
    },
    sessionCeiling: () => request.getStore()?.sessionCeiling ?? SHORTEST_SESSION,
    around: (next) => request.run({}, next),
  };
}
