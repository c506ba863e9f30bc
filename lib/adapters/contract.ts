/** The adapters that keep every domain; each domain's contract is under contracts/. */
import type { SessionAdapter } from './contracts/sessions.js';
import type { ApprovalAdapter } from './contracts/approvals.js';
import type { OutboxAdapter } from './contracts/outbox.js';
import type { SsfStreamAdapter } from './contracts/ssf.js';
import type { SubjectTokenAdapter } from './contracts/subject-tokens.js';

/** An adapter that stores every domain, as the shipped three do. */
export type EveryDomainAdapter = SubjectTokenAdapter &
  SessionAdapter &
  ApprovalAdapter &
  SsfStreamAdapter &
  OutboxAdapter;

/** What `createMemoryAdapter()`, `createRedisAdapter()` and `createPostgresAdapter()` return, before their own statics. */
export interface ImpersonationAdapterClass {
  new (name: string): SessionAdapter & ApprovalAdapter;
}
