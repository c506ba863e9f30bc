import type Koa from 'koa';
import type { CommitWrite } from '../adapters/contracts/commit.js';
import { providerSlot } from '../provider-state.js';
import type { ImpersonationEvent } from './types.js';

/** What is known of an event besides its fields. */
export interface Occasion {
  /** The request that caused it; absent for one no request caused (an actor's session that expired). */
  ctx: Koa.Context | undefined;
  /**
   * The event is of a delegation's session: subscribers that speak of
   * impersonations only (webhooks, which tell a customer who acted as them)
   * pass it by.
   */
  delegation: boolean;
}

/**
 * What a subscriber writes in the one store operation that commits a state
 * change (an exchange's), and what it does before and after it. The commit
 * never names a subscriber: it asks `shareCommit` (./commit.ts), which asks
 * every subscriber for its part.
 */
export interface CommitShare {
  /**
   * Runs before the commit, beside the issuance of the token; a rejection
   * stops the change with nothing of it committed (a trail's tables that
   * cannot be created).
   */
  prepare?(): Promise<void>;
  /** A trail's rows, in the commit's own transaction (a trail that shares the store's database). */
  journal?: CommitWrite['journal'];
  /** Outbox entries, appended with the change. */
  outbox?: CommitWrite['outbox'];
  /**
   * Once the commit happened, with what it reports: the rows it appended,
   * the outbox subscriptions whose entry its bound dropped. May reject: the
   * change stands, the failure is reported on the provider.
   */
  committed?(outcome: CommitReport): Promise<void> | void;
}

export interface CommitReport {
  journaled: ReadonlyArray<{ seq: string; hash: string }>;
  dropped: readonly string[];
}

/** Where a state change is committed, as its subscribers need to know it. */
export interface CommitSite {
  /** Whether the store that commits is `database` (a trail's pool), so that a row can go in its transaction. */
  sharesDatabase(database: object): boolean;
}

/**
 * One of the plugin's own subscribers of its events (the audit trail,
 * webhooks, SSF streams), registered on the provider by install(). The
 * deployment's listeners are the provider's `on(name)`, as for
 * oidc-provider's events. Every method is optional; none delivers anything
 * on the request path: delivery runs apart (lib/webhooks/worker.ts).
 */
export interface EventSubscriber {
  /**
   * Writes the event where it must be durable (the trail). A subscriber that
   * records is a recorder: a change that is not to be recorded (a refusal
   * beyond its budget) reaches none of its methods.
   */
  record?(event: ImpersonationEvent): Promise<void>;
  /** Takes note of a change that happened (enqueues its delivery). A rejection is reported, the change stands. */
  notice?(event: ImpersonationEvent, occasion: Occasion): Promise<void>;
  /** Its part of the commit of a change, or undefined when it has none. */
  shareCommit?(event: ImpersonationEvent, site: CommitSite, delegation: boolean): CommitShare | undefined;
}

/** A provider's subscribers, in the order they are told of an event: the trail first (install() registers them). */
export const SUBSCRIBERS = providerSlot<EventSubscriber[]>('event subscribers', () => []);
