/** What a feature refuses, without HTTP: each API answers these at its edge (lib/http/answer.ts); styles in CONTRIBUTING.md. */

/** The words a refusal gives as its reason, by kind. */
export interface DomainReasons {
  /** Input that breaks a rule of the operation. */
  invalid_input: 'invalid_request';
  /** No record has this id, or none the caller may see (answered alike). */
  not_found: 'not_found' | 'user_not_found';
  /** The record is no longer in the state the operation needs. */
  conflict: 'already_answered' | 'request_expired' | 'already_redeemed';
  /** A principal holds as many of something as the deployment allows. */
  limit_reached: 'too_many_grants' | 'too_many_pending_requests' | 'too_many_requests';
  /** A policy the deployment set (its hooks, its decision point) refused. */
  denied: 'access_denied';
  /** A store or the audit trail cannot answer now; nothing was written. */
  unavailable: 'temporarily_unavailable';
}

export type DomainErrorKind = keyof DomainReasons;

export class DomainError<Kind extends DomainErrorKind = DomainErrorKind> extends Error {
  readonly kind: Kind;
  readonly reason: DomainReasons[Kind];

  constructor(kind: Kind, reason: DomainReasons[Kind], description: string, options?: { cause?: unknown }) {
    super(description, options);
    this.name = 'DomainError';
    this.kind = kind;
    this.reason = reason;
  }
}

/** A refusal of `kind` always for `reason`, with the description (and any cause) given. */
function refusalFor<Kind extends DomainErrorKind>(kind: Kind, reason: DomainReasons[Kind]) {
  return (description: string, cause?: unknown) =>
    new DomainError(kind, reason, description, cause === undefined ? undefined : { cause });
}

/** Input that breaks a rule: the description names the field as sent. */
export const invalidInput = refusalFor('invalid_input', 'invalid_request');

/** A refusal of `kind`, for the reason and with the description given. */
function refusalOf<Kind extends DomainErrorKind>(kind: Kind) {
  return (reason: DomainReasons[Kind], description: string) => new DomainError(kind, reason, description);
}

/** No such record, or one the caller may not see. */
export const unknownRecord = refusalOf('not_found');

/** The record moved on: answered already, expired unanswered, redeemed. */
export const conflictingState = refusalOf('conflict');

/** A customer holds as many grants in force, or pending requests, as the deployment allows; or a client as many requests. */
export const limitReached = refusalOf('limit_reached');

/** A policy refused: its words, safe for the caller, are the description. */
export const deniedByPolicy = refusalFor('denied', 'access_denied');

/** A store or the audit trail cannot answer; the cause goes to the operator, never to the caller. */
export const serviceUnavailable = refusalFor('unavailable', 'temporarily_unavailable');
