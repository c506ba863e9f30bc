import type { Adapter } from 'oidc-provider';
import { hasOutbox, type NewOutboxEntry, type OutboxCapable } from '../../outbox/contract.js';
import type { DomainContract } from './domain.js';

/**
 * The outbox's domain: the store keeps what webhooks and SSF push deliver
 * (lib/outbox/contract.ts), and an exchange's notifications join its commit.
 * Needed only when the deployment has webhooks or SSF.
 */
export type OutboxAdapter = Adapter & OutboxCapable;

/** The outbox's part of a commit (`CommitWrite`). */
export interface OutboxCommit {
  /**
   * Outbox entries to append in the same operation (the exchange's
   * notifications), as `OutboxStore.append` appends them: only when the entry
   * is consumed.
   */
  outbox?: { entries: readonly NewOutboxEntry[]; maxPending: number; now: number } | undefined;
}

export const OUTBOX_DOMAIN: DomainContract<OutboxAdapter> = {
  domain: 'the outbox',
  needs: [
    {
      operations: 'outbox()',
      has: hasOutbox,
      why: 'webhooks are kept in the store until delivered',
      remedy: 'use createMemoryAdapter(), createRedisAdapter() or createPostgresAdapter()',
    },
  ],
};
