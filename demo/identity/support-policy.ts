/**
 * Who may act for whom, as the identity service decides it with the plugin's
 * hooks (docs/policy.md): a support agent acts only for the customers of the
 * organisation they serve; only with a ticket; within the scope ceiling of
 * their tier (read only, or read and write); and for no longer than their
 * tier's longest session. The words of each refusal are what the console shows.
 */
import Provider, { type KoaContextWithOIDC } from 'oidc-provider';
import type { CreationPolicyInput, ExchangeDecision, ExchangePolicyInput, PolicyDecision } from '../../lib/index.js';
import { ORGANISATIONS, SUPPORT_TIERS, type DemoUser } from '../seed.js';
import type { DemoAccounts } from './accounts.js';

const WRITE_SCOPE = 'profile:write';
/** The shortest of the tiers' sessions: what an exchange gets when its tier is not known. */
export const SHORTEST_SESSION = Math.min(...Object.values(SUPPORT_TIERS).map((tier) => tier.maxSessionSeconds));

export interface SupportPolicy {
  canImpersonate(input: CreationPolicyInput): PolicyDecision;
  canExchange(input: ExchangePolicyInput): ExchangeDecision;
  /** The longest the token the exchange of request `ctx` is issuing may live, by the acting agent's tier. */
  sessionCeiling(ctx: KoaContextWithOIDC): number;
}

/** The request's state, where the exchange's decision leaves the agent's ceiling for the token's lifetime. */
interface CeilingState {
  sessionCeiling?: number;
}

export function supportPolicy(accounts: DemoAccounts): SupportPolicy {
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
      // The provider's own request context (oidc-provider keeps it): no store of the demo's on every request.
      const state = Provider.ctx?.state as CeilingState | undefined;
      if (state) state.sessionCeiling = tier.maxSessionSeconds;
      // The role's ceiling, and changes only in an impersonation asked for them: anything else is narrowed.
      const allowed = scope.filter(
        (name) =>
          (tier.scopes as readonly string[]).includes(name) && (name !== WRITE_SCOPE || context['access'] === 'edit'),
      );
      return allowed.length === scope.length ? true : { scope: allowed };
    },
    sessionCeiling: (ctx) => (ctx.state as CeilingState).sessionCeiling ?? SHORTEST_SESSION,
  };
}
