/**
 * The customer's approval in force on the provider under load (bench/server.ts,
 * BENCH_STANDING_GRANT): the `approvals` option requiring a grant for every
 * subject token, and, before the provider serves its first request, a
 * standing grant given by each customer the bench creates subject tokens for,
 * through the library's own operation (lib/approvals/actions.ts) on the
 * provider's store. Every creation then finds the grant and issues the token
 * under it, and every exchange reads the grant again, bounds the token by it
 * and confirms it after the session is stored.
 */
import { instantiateAdapter } from '../lib/adapters/contracts/entries.js';
import type { BoundedIndexes } from '../lib/adapters/contracts/indexes.js';
import type { SessionAdapter } from '../lib/adapters/contracts/sessions.js';
import { giveGrant } from '../lib/approvals/actions.js';
import { APPROVAL_MODEL } from '../lib/adapters/models.js';
import { ApprovalStore } from '../lib/approvals/store.js';
import type { ImpersonationOptions } from '../lib/index.js';
import { resolveOptions } from '../lib/options.js';
import { installedEventBus } from '../lib/plugin.js';
import { SESSION_MODEL, SessionStore } from '../lib/sessions/store.js';
import { API, CUSTOMER_API, MANAGEMENT, type FixtureProvider } from '../fixtures/provider.js';
import { ACTOR, customers } from './requests.js';

/** Grants given side by side at start-up. */
const GRANTS_AT_ONCE = 50;

/** What each customer allows: the actor of the bench's actor tokens, on the resource and scope its exchanges ask for. */
const GRANT = {
  // A day: longer than any run, within the default maxGrantDuration.
  duration: 24 * 3600,
  actorId: ACTOR,
  resource: API,
  scope: ['profile:read'],
  note: 'standing access for the checkout ticket',
};

export interface StandingGrantSetup {
  plugin: Pick<ImpersonationOptions, 'approvals'>;
  /**
   * Gives the standing grant on the started provider, whose plugin was
   * created with `plugin` (the same options, so that the grant's trail row
   * goes where the provider's rows go).
   */
  give(tp: FixtureProvider, plugin: Partial<ImpersonationOptions>): Promise<void>;
}

export function standingGrantSetup(): StandingGrantSetup {
  return {
    plugin: { approvals: { customerResource: CUSTOMER_API, require: () => 'grant' } },
    async give(tp, plugin) {
      const open = (model: string): SessionAdapter & BoundedIndexes =>
        instantiateAdapter(tp.adapter, model) as SessionAdapter & BoundedIndexes;
      const deps = {
        bus: installedEventBus(tp.provider)!,
        options: resolveOptions({ managementResource: MANAGEMENT, ...plugin } as ImpersonationOptions),
        approvals: new ApprovalStore(open(APPROVAL_MODEL)),
        sessions: new SessionStore(open(SESSION_MODEL)),
      };
      // Sequentially, in slices: a few seconds on a networked store, before the first request.
      const all = customers();
      for (let start = 0; start < all.length; start += GRANTS_AT_ONCE) {
        await Promise.all(all.slice(start, start + GRANTS_AT_ONCE).map((customer) => giveGrant(deps, customer, GRANT)));
      }
    },
  };
}
