import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import type { JsonObject } from '../json.js';

/** Event names emitted on the provider (`provider.on(name, (event, ctx) => ...)`). */
export const EVENTS = {
  subjectTokenCreated: 'impersonation.subject_token.created',
  subjectTokenRefused: 'impersonation.subject_token.refused',
  exchangeSucceeded: 'impersonation.exchange.succeeded',
  exchangeRefused: 'impersonation.exchange.refused',
  subjectTokenWithdrawn: 'impersonation.subject_token.withdrawn',
  sessionRevoked: 'impersonation.session.revoked',
  sessionEnded: 'impersonation.session.ended',
  revocationsServed: 'impersonation.revocations.served',
  accessGrantCreated: 'impersonation.access_grant.created',
  accessGrantEnded: 'impersonation.access_grant.ended',
  approvalRequested: 'impersonation.approval.requested',
  approvalApproved: 'impersonation.approval.approved',
  approvalDenied: 'impersonation.approval.denied',
  approvalExpired: 'impersonation.approval.expired',
  breakGlassUsed: 'impersonation.break_glass.used',
} as const;

export type ImpersonationEventName = (typeof EVENTS)[keyof typeof EVENTS];

/**
 * What every impersonation event carries. Fields are absent when the step that
 * learns them was not reached (a refused exchange may not know its subject).
 * Never a token value or a secret: tokens are named by non-secret ids.
 */
export interface ImpersonationEvent {
  /** Non-secret id of the subject token. */
  subjectTokenId?: string;
  /** The impersonation session (`imp_…`) an exchange started, or that was revoked or ended. */
  sessionId?: string;
  /** The impersonated user. */
  subject?: string;
  /** The acting user (from the actor token, or the subject token's actor binding). */
  actor?: string;
  /** The client exchanging the token, or, for creation, the client it is bound to. */
  clientId?: string;
  /** The Management API caller that created the subject token. */
  createdBy?: string;
  resource?: string;
  scope?: string;
  /** The creation `context` (ticket, reason, ...). */
  context?: JsonObject;
  /**
   * On success, a non-secret name of the issued access token: a JWT's `jti`;
   * for an opaque token (whose `jti` is its value) `sha256.` and the base64url
   * SHA-256 of the value.
   */
  accessTokenId?: string;
  /** Expiry (seconds since the epoch) of what was created or issued. */
  expiresAt?: number;
  /** On refusals: the OAuth error code and its description; on a revocation, the reason given. */
  error?: string;
  reason?: string;
  /** Who revoked a session (the Management API caller's client), or why it ended (`actor_logout`, `actor_grant_revoked`). */
  revokedBy?: string;
  endReason?: string;
  /** For the revocation feed: how many closed sessions it listed. */
  count?: number;
  // The customer in the loop (docs/customer-approval.md).
  /** The customer's access grant (`agr_…`) given, ended, or that allowed a subject token or an exchange. */
  accessGrantId?: string;
  /** The approval request (`apr_…`) made, answered or expired. */
  approvalRequestId?: string;
}

/**
 * Hands listeners a frozen copy, so that none can change what the next one
 * sees. Callers build the event by setting its fields: `{ ...event, more }`
 * is a slow path of V8 (about 1.7 µs for an event), a plain copy is not.
 */
export function emit(
  provider: Provider,
  name: ImpersonationEventName,
  event: ImpersonationEvent,
  ctx: Koa.Context | undefined,
): void {
  const emitter = provider as unknown as NodeJS.EventEmitter;
  if (emitter.listenerCount(name) === 0) return;
  emitter.emit(name, Object.freeze({ ...event }), ctx);
}

/** `ctx` is the request that caused the event; absent for an event no request caused (an actor's session that expired). */
export type ImpersonationListener = (event: ImpersonationEvent, ctx: Koa.Context | undefined) => void;

/**
 * Subscribes to an impersonation event with its types (oidc-provider's typings
 * know only its own events); returns the unsubscribe function.
 */
export function onImpersonationEvent(
  provider: Provider,
  name: ImpersonationEventName,
  listener: ImpersonationListener,
): () => void {
  const emitter = provider as unknown as NodeJS.EventEmitter;
  emitter.on(name, listener);
  return () => {
    emitter.off(name, listener);
  };
}
