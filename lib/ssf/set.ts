import { randomUUID } from 'node:crypto';
import { EVENTS, type EndReason, type ImpersonationEvent } from '../event-types.js';
import { SESSION_REVOKED_EVENT, VERIFICATION_EVENT } from './names.js';

/** An impersonation session is a complex subject; `session` is critical: matching on `user` would end the customer's own sessions. */
export const CRITICAL_SUBJECT_MEMBERS: readonly string[] = Object.freeze(['session']);

/** CAEP 1.0 2's `initiating_entity` values. */
type InitiatingEntity = 'admin' | 'user' | 'policy' | 'system';

type SessionStop = ReturnType<typeof sessionStopOf>;

/** The longest `reason_admin` a SET carries: the stop's reason is cut there. */
export const MAX_REASON_ADMIN = 256;

/** By end reason: who ended the session (CAEP 1.0 2), and what the receiver's administrators read when no reason was given. */
const END_REASONS: Readonly<Record<EndReason, [InitiatingEntity, string]>> = {
  // The support agent signed out: the session's own user ended it.
  actor_logout: ['user', 'The support agent signed out; the impersonation ended with their sign-in.'],
  // The agent's sign-in was revoked: the service ended what hung on it.
  actor_grant_revoked: ['system', "The support agent's sign-in was revoked; the impersonation ended with it."],
  // The customer ended the access they had given.
  access_grant_ended: ['user', 'The customer ended the access they had given to support.'],
  // A delegated session ends with its parent, by rule.
  parent_session_stopped: ['policy', 'The impersonation this session was delegated from stopped.'],
  // The token a delegation was exchanged from was revoked by its holder's client (RFC 7009), as at a sign-out.
  subject_token_revoked: ['user', 'The token this session was delegated from was revoked.'],
  // A token issued from an ID-JAG ends, by rule, with the ID-JAG's session at its issuer.
  issuer_session_stopped: ['policy', "The ID-JAG's session at the identity provider that issued it was stopped."],
  // The trail could not record the session's start: the service ended it before its token left.
  not_recorded: ['system', 'The audit trail could not record the session; its token was never delivered.'],
};
const ADMIN_TEXT_OF_REVOCATION = 'An administrator stopped the impersonation.';

/** A stopped session as a CAEP session-revoked event tells it; `reason_admin` bounded, never a credential. */
export function sessionStopOf(event: ImpersonationEvent & { sessionId: string; subject: string }) {
  const revoked = event.name === EVENTS.sessionRevoked;
  const endReason = (event as { endReason?: EndReason }).endReason;
  const given = (event as { reason?: unknown }).reason;
  const text =
    revoked && typeof given === 'string' && given.trim()
      ? given.trim()
      : revoked || endReason === undefined
        ? ADMIN_TEXT_OF_REVOCATION
        : (END_REASONS[endReason]?.[1] ?? ADMIN_TEXT_OF_REVOCATION);
  const initiatingEntity: InitiatingEntity =
    revoked || endReason === undefined ? 'admin' : (END_REASONS[endReason]?.[0] ?? 'system');
  return {
    sessionId: event.sessionId,
    subject: event.subject,
    /** When the session stopped, seconds since the epoch. */
    at: Math.floor(Date.now() / 1000),
    /** CAEP 1.0 2: who or what stopped it. */
    initiatingEntity,
    /** CAEP 1.0 2 `reason_admin`: why, for the receiver's administrators, in English. */
    reasonAdmin: [...text].slice(0, MAX_REASON_ADMIN).join(''),
    /** Names the one stop across the SETs of every stream (RFC 8417 `txn`). */
    txn: randomUUID(),
  };
}

/** The claims every SET of this transmitter carries, then `claims`: no `sub`, no `exp` (SSF 1.0 4.1). */
function setClaims(issuer: string, audience: string, claims: Record<string, unknown>): Record<string, unknown> {
  return { iss: issuer, jti: randomUUID(), iat: Math.floor(Date.now() / 1000), aud: audience, ...claims };
}

/** The claims of a CAEP session-revoked SET for one receiver. */
export function sessionRevokedClaims(issuer: string, audience: string, stop: SessionStop): Record<string, unknown> {
  return setClaims(issuer, audience, {
    txn: stop.txn,
    sub_id: {
      format: 'complex',
      session: { format: 'opaque', id: stop.sessionId },
      user: { format: 'iss_sub', iss: issuer, sub: stop.subject },
    },
    events: {
      [SESSION_REVOKED_EVENT]: {
        event_timestamp: stop.at,
        initiating_entity: stop.initiatingEntity,
        // CAEP 1.0 2: a map of language tags to text.
        reason_admin: { en: stop.reasonAdmin },
      },
    },
  });
}

/** The claims of a verification SET: its subject is the stream itself (SSF 1.0 8.1.4.1). */
export function verificationClaims(issuer: string, audience: string, streamId: string, state?: string) {
  return setClaims(issuer, audience, {
    sub_id: { format: 'opaque', id: streamId },
    events: { [VERIFICATION_EVENT]: state === undefined ? {} : { state } },
  });
}
