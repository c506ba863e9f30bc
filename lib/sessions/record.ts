import { randomBytes } from 'node:crypto';
import type { EndReason } from '../event-types.js';
import type { JsonObject } from '../json.js';

/** Every impersonation session id starts with this. */
export const SESSION_ID_PREFIX = 'imp_';

export { SESSION_CLAIM } from '../token-claims.js';

export type SessionState = 'active' | 'revoked' | 'ended' | 'expired';

/** One successful exchange: who acts for whom, where, until when, and what became of it. Times in seconds. */
export interface SessionRecord {
  id: string;
  subject: string;
  actor?: string;
  clientId: string;
  resource: string;
  scope: string[];
  context: JsonObject;
  subjectTokenId: string;
  accessTokenId: string;
  /** The Grant behind an opaque impersonation token. */
  grantId?: string;
  /** The actor token's Grant and oidc-provider session: their end ends this session. */
  actorGrantId?: string;
  actorSessionUid?: string;
  /** The customer's access grant that allowed it: ending the grant ends the session. */
  accessGrantId?: string;
  /** Started without the customer's approval, by a client allowed to bypass it, for this reason. */
  breakGlass?: { reason: string };
  /** `delegation` for a token issued by RFC 8693 delegation (lib/exchange/delegation), `id-jag` for an ID-JAG issued, `id-jag-redemption` for a token issued from one; absent for an impersonation. */
  type?: 'delegation' | 'id-jag' | 'id-jag-redemption';
  /** A redemption of an ID-JAG naming its issuer's session: that session's digest with its issuer, whose stop ends this one. */
  issuerSession?: string;
  /** A delegation whose subject token belonged to this session: stopping that session stops this one. */
  parentSessionId?: string;
  /** A delegation made (at any depth) from an impersonation: that impersonation's session. */
  rootSessionId?: string;
  /** A delegation: digest of what makes it the same (Invariant 26); a repeat gets a token under this session. */
  delegationKey?: string;
  /** A delegation under an impersonation started under a customer's grant: that grant, whose ceiling bounds it (not an origin). */
  underAccessGrantId?: string;
  createdAt: number;
  expiresAt: number;
  revoked?: { at: number; by: string; reason?: string };
  ended?: { at: number; reason: EndReason };
}

const SESSION_ID_BYTES = 16;
/** Session ids name, they do not authenticate: cut from a random buffer filled for 256 ids at a time. */
const IDS_PER_FILL = 256;
let randomPool = Buffer.alloc(0);
let poolOffset = 0;

export function newSessionId(): string {
  if (poolOffset === randomPool.length) {
    randomPool = randomBytes(SESSION_ID_BYTES * IDS_PER_FILL);
    poolOffset = 0;
  }
  const id = randomPool.toString('base64url', poolOffset, poolOffset + SESSION_ID_BYTES);
  poolOffset += SESSION_ID_BYTES;
  return `${SESSION_ID_PREFIX}${id}`;
}

export function isSessionId(value: string): boolean {
  return /^imp_[A-Za-z0-9_-]{22}$/.test(value);
}

export function stateOf(record: SessionRecord, now = Date.now() / 1000): SessionState {
  if (record.revoked) return 'revoked';
  if (record.ended) return 'ended';
  return record.expiresAt <= now ? 'expired' : 'active';
}

/** What the Management API shows of a session (docs/management-api.openapi.json). */
export function viewOf(record: SessionRecord) {
  return {
    id: record.id,
    subject: record.subject,
    actor: record.actor ?? null,
    clientId: record.clientId,
    resource: record.resource,
    scope: record.scope.join(' '),
    context: record.context,
    createdAt: rfc3339(record.createdAt),
    expiresAt: rfc3339(record.expiresAt),
    state: stateOf(record),
    type: record.type ?? 'impersonation',
    ...(record.parentSessionId === undefined ? {} : { parentSessionId: record.parentSessionId }),
    ...(record.revoked ? revocationOf(record.revoked) : {}),
    ...(record.ended ? { endedAt: rfc3339(record.ended.at), endReason: record.ended.reason } : {}),
    ...(record.accessGrantId === undefined ? {} : { accessGrantId: record.accessGrantId }),
    ...(record.breakGlass ? { emergency: true as const, emergencyReason: record.breakGlass.reason } : {}),
  };
}

function revocationOf({ at, by, reason }: NonNullable<SessionRecord['revoked']>) {
  return { revokedAt: rfc3339(at), revokedBy: by, ...(reason ? { revocationReason: reason } : {}) };
}

/** Seconds since the epoch as an RFC 3339 time, as the APIs show times. */
export function rfc3339(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}
