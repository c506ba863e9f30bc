export { createImpersonation, type Impersonation, type InstallOptions } from './plugin.js';
export { MANAGEMENT_SCOPE_METADATA } from './management/client-metadata.js';
export type { ManagementApiHandler } from './management/node-handler.js';
export type { TelemetryOptions } from './telemetry/options.js';
export type { AccessGrantView, ApprovalRequestView, ApprovedGrantView } from './approvals/view.js';
export type { AccessCeiling, AccessGrant, ApprovalDecision, ApprovalState, GrantState } from './approvals/record.js';
export type {
  ApprovalOptions,
  ApprovalPolicyInput,
  ApprovalRequirement,
  ApprovalWidening,
  ResolvedApprovalOptions,
} from './approvals/options.js';
export type { ImpersonationOptions, ResolvedOptions } from './options.js';
export type {
  ActorAuthentication,
  AdapterSource,
  AuditQueryFilter,
  AuditSink,
  CoreOptions,
  CreationPolicyInput,
  CustomJwtClaimsFunction,
  CustomJwtClaimsInput,
  ExchangePolicyInput,
  ManagementAuthResult,
  ManagementCaller,
  ResolvedCoreOptions,
} from './core-options.js';
export type { ExchangeDecision, PolicyDecision } from './config/decisions.js';
export type { JsonObject, JsonPrimitive, JsonValue } from './json.js';
export { EVENTS, onImpersonationEvent } from './event-types.js';
export type {
  EndReason,
  ImpersonationEvent,
  ImpersonationEventName,
  ImpersonationEvents,
  ImpersonationListener,
} from './event-types.js';
export { ACCESS_TOKEN_TYPE } from './exchange/grant.js';
export { TOKEN_EXCHANGE_GRANT } from './token-claims.js';
export { RESERVED_CLAIMS } from './exchange/claims.js';
export type { ActClaim } from './exchange/actor.js';
export { SUBJECT_TOKEN_PREFIX } from './subject-tokens/token.js';
export { SUBJECT_TOKEN_MODEL } from './subject-tokens/store.js';
// The Redis and PostgreSQL adapters and audit log are subpath exports: this entry loads no driver.
export { createMemoryAdapter } from './adapters/memory.js';
export type { MemoryAdapterClass, MemoryAdapterOptions, MemoryAdapterStats } from './adapters/memory.js';
// The store's contract, one type per domain (a store of its own implements the domains it keeps).
export type { ApprovalAdapter } from './adapters/contracts/approvals.js';
export type { AtomicAdapter, AtomicConsume } from './adapters/contracts/consume.js';
export type {
  AtomicCommit,
  CommitOutcome,
  CommitWrite,
  PrincipalQuotas,
  QuotaOutcome,
  QuotaWrite,
  SessionCommit,
} from './adapters/contracts/commit.js';
export type { BoundedIndexAdd, BoundedIndexes, IndexEntry, SortedIndexes } from './adapters/contracts/indexes.js';
export type { EveryDomainAdapter, ImpersonationAdapterClass } from './adapters/contract.js';
export type { SessionAdapter as ImpersonationAdapter, SessionAdapter } from './adapters/contracts/sessions.js';
export type { JournalCommit, SharedDatabase } from './adapters/contracts/trail.js';
export type { OutboxAdapter, OutboxCommit } from './adapters/contracts/outbox.js';
export type { SsfStreamAdapter } from './adapters/contracts/ssf.js';
export type { SubjectTokenAdapter } from './adapters/contracts/subject-tokens.js';
export { createMemoryAuditLog, type MemoryAuditLog, type MemoryAuditLogOptions } from './audit/memory.js';
export type { AuditEntry, AuditRow, ChainedRow, VerifyCheck, VerifyResult } from './audit/chain.js';
export type { AuditLog, AuditPage } from './audit/sink.js';
export { WEBHOOK_EVENTS } from './webhooks/options.js';
export type {
  ResolvedWebhookOptions,
  WebhookEventName,
  WebhookOptions,
  WebhookSubscription,
} from './webhooks/options.js';
export { WEBHOOK_DROPPED, type WebhookPayload } from './webhooks/notify.js';
export { WEBHOOK_DEAD_LETTERED, WEBHOOK_GONE, type WebhookDelivery } from './webhooks/worker.js';
export type {
  ClaimBound,
  DeadLetter,
  LeasedEntry,
  NewOutboxEntry,
  OutboxCapable,
  OutboxStats,
  OutboxStore,
  Settlement,
  SettledEntry,
} from './outbox/contract.js';
export type { PushAllowList, ResolvedSsfOptions, SsfOptions, SsfStop, StreamCovers } from './ssf/options.js';
export { SSF_DROPPED } from './ssf/transmit.js';
export { SSF_CONFIGURATION_PATH } from './ssf/discovery.js';
export { SSF_SET_ERROR } from './ssf/routes.js';
export { CRITICAL_SUBJECT_MEMBERS } from './ssf/set.js';
export {
  EVENTS_SUPPORTED as SSF_EVENTS_SUPPORTED,
  POLL_METHOD as SSF_POLL_METHOD,
  PUSH_METHOD as SSF_PUSH_METHOD,
  SESSION_REVOKED_EVENT,
  VERIFICATION_EVENT,
} from './ssf/names.js';
export { DELEGATION_METADATA } from './exchange/delegation-metadata.js';
export { DEFAULT_DELEGATION_LIMITS, type DelegationLimits, type QuotaCharge } from './capacity.js';
export { JWT_TOKEN_TYPE } from './exchange/request.js';
export type {
  DelegationOptions,
  DelegationPolicyInput,
  DelegationSubject,
  ResolvedDelegationOptions,
  SubjectTokenResolver,
  SubjectTokenResolverInput,
} from './exchange/delegation-options.js';
export type { AuthzenOptions, ResolvedAuthzenOptions } from './policy/options.js';
export type {
  IdJagAssertion,
  IdJagIssuanceOptions,
  IdJagIssueInput,
  IdJagOptions,
  IdJagRedeemInput,
  IdJagSubjectAtAudience,
  ResolvedIdJagIssuanceOptions,
  ResolvedIdJagOptions,
  ResolvedIssuer,
  TrustedIssuer,
} from './exchange/id-jag-options.js';
