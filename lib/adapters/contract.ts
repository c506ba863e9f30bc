/**
 * The adapters' contract, by domain. Each of the plugin's domains names the
 * operations it needs beyond oidc-provider's adapter API, in a file of its
 * own under contracts/: subject tokens (`SubjectTokenAdapter`), sessions
 * (`SessionAdapter`), approvals (`ApprovalAdapter`), SSF streams
 * (`SsfStreamAdapter`), the outbox (`OutboxAdapter`) and the trail
 * (`SharedDatabase`, optional). The operations themselves live in
 * contracts/consume.ts, contracts/indexes.ts and contracts/commit.ts; what
 * every adapter shares for oidc-provider's own models in contracts/entries.ts.
 * This module gathers them, and the names the public API had before.
 */
import type { SessionAdapter } from './contracts/sessions.js';
import type { ApprovalAdapter } from './contracts/approvals.js';
import type { OutboxAdapter } from './contracts/outbox.js';
import type { SsfStreamAdapter } from './contracts/ssf.js';
import type { SubjectTokenAdapter } from './contracts/subject-tokens.js';

export { instantiateAdapter, entryLifetimeMs, GRANTABLE_MODELS } from './contracts/entries.js';
export { hasAtomicConsume, type AtomicAdapter, type AtomicConsume } from './contracts/consume.js';
export {
  comesAfter,
  hasBoundedIndexes,
  hasSortedIndexes,
  type BoundedIndexAdd,
  type BoundedIndexes,
  type IndexEntry,
  type SortedIndexes,
} from './contracts/indexes.js';
export {
  COMMITTED_TOGETHER,
  GUARD_KIND,
  hasAtomicCommit,
  hasPrincipalQuotas,
  QUOTA_KIND,
  type AtomicCommit,
  type CommitOutcome,
  type CommitWrite,
  type PrincipalQuotas,
  type QuotaOutcome,
  type QuotaWrite,
  type SessionCommit,
} from './contracts/commit.js';
export type { JournalCommit, SharedDatabase } from './contracts/trail.js';
export { OUTBOX_DOMAIN, type OutboxAdapter, type OutboxCommit } from './contracts/outbox.js';
export { fitsDomain, lackOf, type DomainContract, type DomainNeed } from './contracts/domain.js';
export { SUBJECT_TOKEN_DOMAIN, type SubjectTokenAdapter } from './contracts/subject-tokens.js';
export { SESSION_DOMAIN, type SessionAdapter } from './contracts/sessions.js';
export { APPROVAL_DOMAIN, type ApprovalAdapter } from './contracts/approvals.js';
export { SSF_STREAM_DOMAIN, type SsfStreamAdapter } from './contracts/ssf.js';

/**
 * The store of the sessions' domain, as the public API named it before the
 * contract was split by domain: kept as an alias of `SessionAdapter`.
 */
export type ImpersonationAdapter = SessionAdapter;

/**
 * An adapter that stores every domain, as `createMemoryAdapter()`,
 * `createRedisAdapter()` and `createPostgresAdapter()` do; a store of its own
 * may implement only some of them.
 */
export type EveryDomainAdapter = SubjectTokenAdapter &
  SessionAdapter &
  ApprovalAdapter &
  SsfStreamAdapter &
  OutboxAdapter;

/** What `createMemoryAdapter()`, `createRedisAdapter()` and `createPostgresAdapter()` return, before their own statics. */
export interface ImpersonationAdapterClass {
  new (name: string): SessionAdapter & ApprovalAdapter;
}
