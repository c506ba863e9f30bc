import type { KoaContextWithOIDC } from 'oidc-provider';
import type { ImpersonationEvent } from '../event-types.js';
import type { ResolvedCoreOptions } from '../core-options.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import type { ExchangeClaims } from './claims.js';
import type { CustomerGrants } from './customer-grant.js';
import type { ResolvedDelegationOptions } from './delegation/options.js';
import type { Issued } from './respond.js';

export interface ExchangeDependencies {
  options: ResolvedCoreOptions & { delegation: ResolvedDelegationOptions };
  /** The subject tokens the Management API created: an impersonation's subjects. */
  store: SubjectTokenStore;
  sessions: SessionStore;
  /** The customers' access grants, which subject tokens issued under one are checked against. */
  customerGrants: CustomerGrants;
  claims: ExchangeClaims;
  /** Runs first: refuses an exchange through a provider mounted in a way the plugin cannot work in. */
  preflight?: ((ctx: KoaContextWithOIDC) => void) | undefined;
}

/** What an exchange issued, and its success event (none for a token issued under a live delegation, which had its own). */
export interface Exchanged extends Issued {
  event?: (() => ImpersonationEvent) | undefined;
}

/** One kind of exchange, impersonation or delegation: the same steps over the same helpers. */
export interface ExchangeKind<Progress extends object> {
  exchange(ctx: KoaContextWithOIDC, progress: Progress): Promise<Exchanged>;
  /** Reports a refusal from what `progress` established (to listeners, and to the trail as its rules allow). */
  refused(ctx: KoaContextWithOIDC, progress: Progress, error: unknown): Promise<void>;
}
