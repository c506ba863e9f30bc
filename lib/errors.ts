import { errors } from 'oidc-provider';
import { DomainError, type DomainErrorKind, type DomainReasons } from './errors/domain.js';

/** Every error the plugin raises: oidc-provider's classes at the token endpoint, `ManagementError`s at the Management API. */

/** RFC 8693 2.2.2: anything wrong with the request or with a subject or actor token. */
export function invalidRequest(description: string, cause?: unknown): errors.InvalidRequest {
  return new errors.InvalidRequest(description, 400, cause === undefined ? undefined : { cause });
}

/** 401 `invalid_client`; the detail goes to `error_detail`, which oidc-provider does not send. */
export function invalidClient(detail: string): errors.InvalidClientAuth {
  return new errors.InvalidClientAuth(detail);
}

/** Without a description, oidc-provider's own ("resource indicator is missing, or unknown"). */
export function invalidTarget(description?: string): errors.InvalidTarget {
  return description === undefined ? new errors.InvalidTarget() : new errors.InvalidTarget(description);
}

export function invalidScope(description: string, scope: string): errors.InvalidScope {
  return new errors.InvalidScope(description, scope);
}

/** RFC 6749 5.2 `invalid_grant` with a description shown (oidc-provider's own always says "grant request is invalid"). */
export function invalidGrant(description: string): errors.CustomOIDCProviderError {
  return new errors.CustomOIDCProviderError('invalid_grant', description);
}

/** What a refused actor's next sign-in must meet (RFC 9470 `max_age`, `acr_values`). */
interface StepUpRequirement {
  maxAge?: number;
  acrValues?: string[];
}

/** RFC 9470: the actor must sign in again; the requirement rides on the error for its `max_age` and `acr_values` members. */
export class InsufficientUserAuthentication extends errors.CustomOIDCProviderError {
  readonly stepUp: Readonly<StepUpRequirement>;

  constructor(description: string, stepUp: StepUpRequirement) {
    super('insufficient_user_authentication', description);
    this.stepUp = Object.freeze({ ...stepUp });
  }
}

export function insufficientUserAuthentication(
  description: string,
  stepUp: StepUpRequirement,
): InsufficientUserAuthentication {
  return new InsufficientUserAuthentication(description, stepUp);
}

/** RFC 6749 5.2 `unauthorized_client`: this client may not use the grant as it asked. */
export function unauthorizedClient(description: string): errors.UnauthorizedClient {
  return new errors.UnauthorizedClient(description);
}

/** A client whose metadata the plugin cannot accept (at registration, at load, or at start-up). */
export function invalidClientMetadata(description: string): errors.InvalidClientMetadata {
  return new errors.InvalidClientMetadata(description);
}

/** A deployment wired so that part of the plugin cannot run; the description says what to change and names no secret. */
export function misconfigured(description: string): errors.OIDCProviderError {
  const error = new errors.OIDCProviderError(500, 'server_error');
  return Object.assign(error, { error_description: description, expose: true });
}

/** An exchange too long between its reads and its commit to trust what it read: 503, nothing burned. */
export function exchangeTooSlow(deadlineMs: number): errors.TemporarilyUnavailable {
  return temporarilyUnavailable(`the exchange took longer than ${deadlineMs / 1000} s to complete; retry it`);
}

/** A policy decision point that gave no decision: unreachable, too slow, a failure status or an answer that is not one. */
export class DecisionPointUnavailable extends Error {
  constructor(problem: string, options?: { cause?: unknown }) {
    super(`the policy decision point ${problem}`, options);
    this.name = 'DecisionPointUnavailable';
  }
}

/** Names the problem only: never a header, a body or the decision point's credentials. */
export function decisionPointUnavailable(problem: string, cause?: unknown): DecisionPointUnavailable {
  return new DecisionPointUnavailable(problem, cause === undefined ? undefined : { cause });
}

/** A decision point (`authzen`) that gave no decision: 503 `temporarily_unavailable`, nothing issued or burned. */
export function policyUnavailable(description: string): errors.TemporarilyUnavailable {
  return temporarilyUnavailable(description);
}

/** A trusted issuer's keys that could not be fetched: 503, not the assertion's fault, nothing burned. */
export function issuerKeysUnavailable(): errors.TemporarilyUnavailable {
  return temporarilyUnavailable("the assertion issuer's keys could not be fetched; retry shortly");
}

/** A trusted issuer's SSF stream not read within its bound: a stop there may be unheard of here; 503, nothing burned. */
export function issuerStreamUnavailable(): errors.TemporarilyUnavailable {
  return temporarilyUnavailable("the assertion issuer's stream of stopped sessions cannot be read; retry shortly");
}

/** A store that would have to forget security state to take one more entry: 503. */
export function storeFull(model: string): errors.TemporarilyUnavailable {
  return temporarilyUnavailable(`the ${model} store is full; retry shortly`);
}

/** As storeFull, for one client's share of the replay store: only that client waits. */
export function replayShareFull(anonymous: boolean): errors.TemporarilyUnavailable {
  const requests = anonymous ? "this client's unauthenticated requests" : "this client's requests";
  return temporarilyUnavailable(
    `the ReplayDetection store holds as many unexpired proofs as ${requests} may; retry shortly`,
  );
}

/** oidc-provider's `temporarily_unavailable`, answered with the status 503 its name says. */
function temporarilyUnavailable(description: string): errors.TemporarilyUnavailable {
  return Object.assign(new errors.TemporarilyUnavailable(description), { status: 503, statusCode: 503, expose: true });
}

/** 429: a principal used its share of a capacity others depend on (lib/capacity.ts); names no one. */
export class PrincipalQuotaReached extends errors.CustomOIDCProviderError {
  readonly retryAfter: number;

  constructor(description: string, retryAfter: number) {
    super('invalid_request', description);
    this.retryAfter = retryAfter;
    Object.assign(this, { status: 429, statusCode: 429, expose: true });
  }
}

export function principalQuotaReached(description: string, retryAfter: number): PrincipalQuotaReached {
  return new PrincipalQuotaReached(description, retryAfter);
}

type ManagementErrorCode =
  | DomainReasons[DomainErrorKind]
  | 'invalid_token'
  | 'insufficient_scope'
  | 'request_too_large'
  | 'too_many_streams'
  | 'server_error';

/** An OAuth-style error of the Management API: `{ error, error_description }` with `status`. */
export class ManagementError extends Error {
  readonly status: number;
  readonly error: ManagementErrorCode;

  constructor(status: number, error: ManagementErrorCode, description: string, options?: { cause?: unknown }) {
    super(description, options);
    this.name = 'ManagementError';
    this.status = status;
    this.error = error;
  }

  toJSON(): { error: ManagementErrorCode; error_description: string } {
    return { error: this.error, error_description: this.message };
  }
}

const DOMAIN_STATUS: Readonly<Record<DomainErrorKind, number>> = {
  invalid_input: 400,
  not_found: 404,
  conflict: 409,
  limit_reached: 429,
  denied: 403,
  unavailable: 503,
};

/** A feature's refusal as the HTTP APIs answer it (lib/http/answer.ts): kind gives the status, reason the `error`. */
export function httpAnswerTo(refusal: DomainError): ManagementError {
  const cause = refusal.cause === undefined ? undefined : { cause: refusal.cause };
  return new ManagementError(DOMAIN_STATUS[refusal.kind], refusal.reason, refusal.message, cause);
}

/** Management API 400 `invalid_request`: the description names the field or parameter as sent. */
export function badRequest(description: string, cause?: unknown): ManagementError {
  return new ManagementError(400, 'invalid_request', description, cause === undefined ? undefined : { cause });
}

/** Management API 413: a body or a field larger than the plugin keeps. */
export function requestTooLarge(description: string): ManagementError {
  return new ManagementError(413, 'request_too_large', description);
}

/** Management API 401 `invalid_token` or 403 `insufficient_scope`. */
export function unauthorized(code: 'invalid_token' | 'insufficient_scope', description: string): ManagementError {
  return new ManagementError(code === 'invalid_token' ? 401 : 403, code, description);
}

/** Management API 404. */
export function notFound(code: 'not_found' | 'user_not_found', description: string): ManagementError {
  return new ManagementError(404, code, description);
}

/** Management API 409: the subject token was exchanged already. */
export function alreadyRedeemed(description: string): ManagementError {
  return new ManagementError(409, 'already_redeemed', description);
}

/** 409 of the SSF stream management API: the receiver, or the transmitter, has as many streams as allowed. */
export function tooManyStreams(description: string): ManagementError {
  return new ManagementError(409, 'too_many_streams', description);
}

/** 429 of the SSF verification endpoint: asked again before `min_verification_interval` passed. */
export function tooManyRequests(description: string): ManagementError {
  return new ManagementError(429, 'too_many_requests', description);
}

/** 503 of an SSF poll whose empty queue cannot claim it holds every SET: "empty" would read as "nothing revoked". */
export function streamBehind(description: string): ManagementError {
  return new ManagementError(503, 'temporarily_unavailable', description);
}

/** Management API 503: a store, the audit trail or the decision point cannot answer; nothing was written. */
export function managementUnavailable(description: string, cause?: unknown): ManagementError {
  return new ManagementError(503, 'temporarily_unavailable', description, cause === undefined ? undefined : { cause });
}

/** Management API 500: the deployment is wired so no request of this kind can be served; names no value. */
export function managementMisconfigured(description: string): ManagementError {
  return new ManagementError(500, 'server_error', description);
}

/** Management API 500: anything else; the cause goes to the app's `error` event, never to the caller. */
export function managementServerError(cause: unknown): ManagementError {
  return new ManagementError(500, 'server_error', 'the request could not be completed', { cause });
}

/** A call at the wrong moment of the provider's life, whose `description` says what to do instead. */
export function calledTooLate(description: string): TypeError {
  return new TypeError(description);
}

export * from './errors/domain.js';
export * from './errors/standalone.js';
export { errors };
