import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import type { CommitWrite } from '../adapters/contracts/commit.js';
import type { ImpersonationEvent } from '../event-types.js';

/** What is known of an event besides its fields. */
export interface Occasion {
  /** The request that caused it; absent for one no request caused (an actor's session that expired). */
  ctx: Koa.Context | undefined;
  /** Of a delegation's session: webhooks, which speak of impersonations only, pass it by. */
  delegation: boolean;
}

/** What a subscriber does before, in and after the store operation that commits a change (via `shareCommit`). */
export interface CommitShare {
  /** Before the commit, beside the token's issuance; a rejection stops the change with nothing committed. */
  prepare?(): Promise<void>;
  /** A trail's rows, in the commit's own transaction (a trail that shares the store's database). */
  journal?: CommitWrite['journal'];
  /** Outbox entries, appended with the change. */
  outbox?: CommitWrite['outbox'];
  /** Once committed, with the rows appended and outbox entries dropped; a rejection is reported, the change stands. */
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

/** One of the plugin's own subscribers (trail, webhooks, SSF); none delivers on the request path (Invariant 43). */
export interface EventSubscriber {
  /** Writes the event where it must be durable; a recorder gets no event that is not to be recorded. */
  record?(event: ImpersonationEvent): Promise<void>;
  /** Takes note of a change that happened (enqueues its delivery). A rejection is reported, the change stands. */
  notice?(event: ImpersonationEvent, occasion: Occasion): Promise<void>;
  /** Its part of the commit of a change, or undefined when it has none. */
  shareCommit?(event: ImpersonationEvent, site: CommitSite, delegation: boolean): CommitShare | undefined;
}

/** Where one install()'s events go: the provider's listeners, and its subscribers in order, the trail first. */
export interface EventBus {
  readonly provider: Provider;
  readonly subscribers: readonly EventSubscriber[];
}
