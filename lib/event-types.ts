import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import type { JsonObject } from './json.js';

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
  delegationSucceeded: 'impersonation.delegation.succeeded',
  delegationRefused: 'impersonation.delegation.refused',
  idJagRedeemed: 'impersonation.id_jag.redeemed',
  idJagIssued: 'impersonation.id_jag.issued',
} as const;

export type ImpersonationEventName = (typeof EVENTS)[keyof typeof EVENTS];

/** Why a session ended without a revocation: sign-out, grant revoked or ended, parent stopped, not recorded. */
export type EndReason =
  | 'actor_logout'
  | 'actor_grant_revoked'
  | 'access_grant_ended'
  | 'parent_session_stopped'
  | 'subject_token_revoked'
  | 'issuer_session_stopped'
  | 'not_recorded';

/** Every field an impersonation event may carry; never a token value or a secret. */
interface EventFields {
  /** Non-secret id of the subject token. */
  subjectTokenId: string;
  /** The impersonation session (`imp_…`) an exchange started, or that was revoked or ended. */
  sessionId: string;
  /** The impersonated user. */
  subject: string;
  /** The acting user (from the actor token, or the subject token's actor binding). */
  actor: string;
  /** The client exchanging the token, or, for creation, the client it is bound to. */
  clientId: string;
  /** The Management API caller that created the subject token. */
  createdBy: string;
  resource: string;
  /** The granted scopes, space-separated (empty when none was granted). */
  scope: string;
  /** The creation `context` (ticket, reason, ...); for an ID-JAG, its `issuer` and `assertionId` (its `jti`). */
  context: JsonObject;
  /** Non-secret name of the issued token: a JWT's `jti`; for an opaque one `sha256.` and its base64url SHA-256. */
  accessTokenId: string;
  /** Expiry (seconds since the epoch) of what was created or issued. */
  expiresAt: number;
  /** On refusals: the OAuth error code. */
  error: string;
  /** On refusals, the error's description; on a revocation, the reason given. */
  reason: string;
  /** Who revoked a session, or withdrew a subject token: the Management API caller's client, or `customer`. */
  revokedBy: string;
  /** Why a session ended without a revocation. */
  endReason: EndReason;
  /** For the revocation feed: how many closed sessions it listed. */
  count: number;
  /** The customer's access grant (`agr_…`) given, ended, or that allowed a subject token or an exchange. */
  accessGrantId: string;
  /** The approval request (`apr_…`) made, answered or expired. */
  approvalRequestId: string;
  /** A delegation's session (`imp_…`) whose subject token named this earlier session: stopping it stops this. */
  parentSessionId: string;
  /** A delegation: the subject token's type (`urn:ietf:params:oauth:token-type:access_token`, `…:jwt`, or a deployment's own). */
  subjectTokenType: string;
  /** A delegation: how many actors the issued token's `act` chain names (1 for a first delegation). */
  depth: number;
}

/** One event: its name, the fields it carries, every other declared absent (so reads stay `T | undefined`). */
type EventOf<
  Name extends ImpersonationEventName,
  Always extends keyof EventFields,
  WhenKnown extends keyof EventFields = never,
> = {
  /** The event's name, as it was emitted: a listener of several events tells them apart by it. */
  name: Name;
} & Pick<EventFields, Always> &
  Partial<Pick<EventFields, Exclude<WhenKnown, Always>>> & {
    [Field in Exclude<keyof EventFields, Always | WhenKnown>]?: undefined;
  };

/** What the events of a session, its start and its stop, all name. */
type SessionFields =
  | 'sessionId'
  | 'subject'
  | 'clientId'
  | 'resource'
  | 'scope'
  | 'context'
  | 'subjectTokenId'
  | 'accessTokenId'
  | 'expiresAt';

/** What each event carries, by name: the fields it always names, then those it names when known. */
interface EventFieldsByName {
  /** The Management API created a subject token; `clientId` and `actor` are its bindings, when it has them. */
  'impersonation.subject_token.created': [
    'subjectTokenId' | 'subject' | 'createdBy' | 'context' | 'expiresAt',
    'clientId' | 'actor' | 'accessGrantId',
  ];
  /** `canImpersonate` refused a creation. */
  'impersonation.subject_token.refused': [
    'subject' | 'createdBy' | 'context' | 'error' | 'reason',
    'clientId' | 'actor',
  ];
  /** An impersonation token was issued; `actor` when an actor token was sent. */
  'impersonation.exchange.succeeded': [SessionFields | 'createdBy', 'actor' | 'accessGrantId'];
  /** An exchange failed; it names what had been established when it stopped, never a token. */
  'impersonation.exchange.refused': [
    'clientId' | 'error' | 'reason',
    SessionFields | 'createdBy' | 'actor' | 'accessGrantId',
  ];
  /** A subject token was withdrawn before its redemption. */
  'impersonation.subject_token.withdrawn': ['subjectTokenId' | 'revokedBy', never];
  /** A session was stopped through the Management API; `reason` when one was given. */
  'impersonation.session.revoked': [SessionFields | 'revokedBy', 'actor' | 'reason' | 'parentSessionId'];
  /** A session ended with the actor's sign-in, or with the access grant that allowed it. */
  'impersonation.session.ended': [SessionFields | 'endReason', 'actor' | 'accessGrantId' | 'parentSessionId'];
  /** A delegated token was issued: `actor` acts, `parentSessionId` is the subject token's session. */
  'impersonation.delegation.succeeded': [
    Exclude<SessionFields, 'context'> | 'actor' | 'subjectTokenType' | 'depth',
    'parentSessionId',
  ];
  /** A delegation was refused; it names what was established when it stopped (nothing of a subject token not found). */
  'impersonation.delegation.refused': [
    'clientId' | 'error' | 'reason',
    'subject' | 'actor' | 'resource' | 'scope' | 'subjectTokenId' | 'subjectTokenType' | 'parentSessionId' | 'depth',
  ];
  /** An ID-JAG was redeemed for an access token (docs/cross-app-access.md). */
  'impersonation.id_jag.redeemed': [
    'sessionId' | 'subject' | 'clientId' | 'resource' | 'scope' | 'context' | 'accessTokenId' | 'expiresAt',
    'actor',
  ];
  /** An ID-JAG was issued for another authorization server (`resource`, its issuer); its session stops as any. */
  'impersonation.id_jag.issued': [SessionFields, 'actor'];
  /** The revocation feed was read. */
  'impersonation.revocations.served': ['count', never];
  /** A customer gave an access grant, or approving a request made one (then `approvalRequestId`). */
  'impersonation.access_grant.created': [GrantFields, GrantDetails];
  /** An access grant ended (the customer ended it); the sessions it allowed end with it. */
  'impersonation.access_grant.ended': [GrantFields, GrantDetails];
  /** A backend asked the customer to approve an access. */
  'impersonation.approval.requested': [RequestFields, RequestDetails];
  /** The customer approved a request: `accessGrantId` is the grant it became. */
  'impersonation.approval.approved': [RequestFields | 'accessGrantId', RequestDetails];
  /** The customer denied a request; `reason` when they gave one. */
  'impersonation.approval.denied': [RequestFields, RequestDetails | 'reason'];
  /** A request was found unanswered past its expiry. */
  'impersonation.approval.expired': [RequestFields, RequestDetails];
  /** A break-glass client bypassed the customer's approval; `reason` is the reason it gave. */
  'impersonation.break_glass.used': [
    'subjectTokenId' | 'subject' | 'createdBy' | 'context' | 'expiresAt' | 'reason',
    'clientId' | 'actor',
  ];
}

/** What each event carries, by name. */
export type ImpersonationEvents = {
  [Name in keyof EventFieldsByName]: EventOf<Name, EventFieldsByName[Name][0], EventFieldsByName[Name][1]>;
};

/** What the events of an access grant always name, and name when the grant has it. */
type GrantFields = 'accessGrantId' | 'subject' | 'expiresAt';
type GrantDetails = 'actor' | 'resource' | 'scope' | 'approvalRequestId';

/** What the events of an approval request always name, and name when the request has it. */
type RequestFields = 'approvalRequestId' | 'subject' | 'actor' | 'createdBy' | 'context' | 'expiresAt';
type RequestDetails = 'clientId' | 'resource' | 'scope';

/** An impersonation event: one union member per `name`. */
export type ImpersonationEvent<Name extends ImpersonationEventName = ImpersonationEventName> =
  ImpersonationEvents[Name];

/** `ctx` is the request that caused the event; absent for an event no request caused (an actor's session that expired). */
export type ImpersonationListener<Name extends ImpersonationEventName = ImpersonationEventName> = (
  event: ImpersonationEvent<Name>,
  ctx: Koa.Context | undefined,
) => void;

declare module 'oidc-provider' {
  // oidc-provider's typings know only its own events: these overloads type the plugin's on the provider itself.
  export default interface Provider {
    on<Name extends ImpersonationEventName>(name: Name, listener: ImpersonationListener<Name>): this;
    once<Name extends ImpersonationEventName>(name: Name, listener: ImpersonationListener<Name>): this;
    addListener<Name extends ImpersonationEventName>(name: Name, listener: ImpersonationListener<Name>): this;
    prependListener<Name extends ImpersonationEventName>(name: Name, listener: ImpersonationListener<Name>): this;
    prependOnceListener<Name extends ImpersonationEventName>(name: Name, listener: ImpersonationListener<Name>): this;
  }
}

/** Subscribes to an impersonation event, its listener typed for it; returns the unsubscribe function. */
export function onImpersonationEvent<Name extends ImpersonationEventName>(
  provider: Provider,
  name: Name,
  listener: ImpersonationListener<Name>,
): () => void {
  provider.on(name, listener);
  return () => {
    provider.off(name, listener);
  };
}
