import { randomUUID } from 'node:crypto';
import type { Provider } from 'oidc-provider';
import { signWithProviderKey } from '../provider-internals.js';

import { SESSION_REVOKED_EVENT, SET_TYPE, VERIFICATION_EVENT } from './names.js';

/** An impersonation session as a complex subject; `session` is critical: matching on `user` would end the customer's own sessions. */
interface SessionSubject {
  format: 'complex';
  session: { format: 'opaque'; id: string };
  user: { format: 'iss_sub'; iss: string; sub: string };
}

export const CRITICAL_SUBJECT_MEMBERS: readonly string[] = Object.freeze(['session']);

/** CAEP 1.0 2's `initiating_entity` values. */
export type InitiatingEntity = 'admin' | 'user' | 'policy' | 'system';

export interface SessionStop {
  sessionId: string;
  subject: string;
  /** When the session stopped, seconds since the epoch. */
  at: number;
  /** CAEP 1.0 2: who or what stopped it (`sessionStopOf` tells which). */
  initiatingEntity: InitiatingEntity;
  /** CAEP 1.0 2 `reason_admin`: why, for the receiver's administrators, in English. */
  reasonAdmin: string;
  /** Names the one stop across the SETs of every stream (RFC 8417 `txn`). */
  txn: string;
}

/** The claims of a CAEP session-revoked SET for one receiver: no `sub`, no `exp` (SSF 1.0 4.1). */
export function sessionRevokedClaims(issuer: string, audience: string, stop: SessionStop): Record<string, unknown> {
  const subject: SessionSubject = {
    format: 'complex',
    session: { format: 'opaque', id: stop.sessionId },
    user: { format: 'iss_sub', iss: issuer, sub: stop.subject },
  };
  return {
    iss: issuer,
    jti: randomUUID(),
    iat: Math.floor(Date.now() / 1000),
    aud: audience,
    txn: stop.txn,
    sub_id: subject,
    events: {
      [SESSION_REVOKED_EVENT]: {
        event_timestamp: stop.at,
        initiating_entity: stop.initiatingEntity,
        // CAEP 1.0 2: a map of language tags to text.
        reason_admin: { en: stop.reasonAdmin },
      },
    },
  };
}

/** The claims of a verification SET: its subject is the stream itself (SSF 1.0 8.1.4.1). */
export function verificationClaims(
  issuer: string,
  audience: string,
  streamId: string,
  state: string | undefined,
): Record<string, unknown> {
  return {
    iss: issuer,
    jti: randomUUID(),
    iat: Math.floor(Date.now() / 1000),
    aud: audience,
    sub_id: { format: 'opaque', id: streamId },
    events: { [VERIFICATION_EVENT]: state === undefined ? {} : { state } },
  };
}

export function signSet(provider: Provider, claims: Record<string, unknown>): Promise<string> {
  return signWithProviderKey(provider, claims, SET_TYPE);
}
