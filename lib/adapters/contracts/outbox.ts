import type { Adapter } from 'oidc-provider';
import { hasOutbox, type NewOutboxEntry, type OutboxCapable } from '../../outbox/contract.js';
import type { DomainContract } from './domain.js';

/** The outbox's domain (lib/outbox/contract.ts); an exchange's notifications join its commit. */
export type OutboxAdapter = Adapter & OutboxCapable;

/** The outbox's part of a commit (`CommitWrite`). */
export interface OutboxCommit {
  /** Outbox entries appended in the same operation, only when the entry is consumed. */
  outbox?: { entries: readonly NewOutboxEntry[]; maxPending: number; now: number } | undefined;
}

export const OUTBOX_DOMAIN: DomainContract<OutboxAdapter> = {
  needs: [
    {
      operations: 'outbox()',
      has: hasOutbox,
      why: 'webhooks are kept in the store until delivered',
      remedy: 'use createMemoryAdapter(), createRedisAdapter() or createPostgresAdapter()',
    },
  ],
};
