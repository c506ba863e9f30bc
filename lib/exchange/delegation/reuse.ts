import { createHash } from 'node:crypto';
import { Expiring } from '../../adapters/expiring.js';
import type { SessionRecord } from '../../sessions/record.js';
import type { SessionStore } from '../../sessions/store.js';

/**
 * How long a delegation's session lasts, unless its subject token ends
 * sooner or its token lasts longer. Each token issued under it lives no
 * longer than `accessTokenTTL`; a request for the same delegation while the
 * session lasts is issued a token under it, so that a service that delegates
 * on every call it receives lists one session (and writes one trail row) per
 * hour, not one per call.
 */
export const DELEGATION_SPAN_SECONDS = 3600;

/** What makes two delegations the same: the same token could be issued for either. */
export interface DelegationKeyParts {
  subjectTokenId: string;
  clientId: string;
  resource: string;
  format: string;
  scope: readonly string[];
  act: Record<string, unknown>;
}

/** A digest of what makes the delegation, so that index names stay short whatever the ids are. */
export function delegationKey(parts: DelegationKeyParts): string {
  const { subjectTokenId, clientId, resource, format, scope, act } = parts;
  const canonical = JSON.stringify([subjectTokenId, clientId, resource, format, [...scope].sort(), act]);
  return createHash('sha256').update(canonical).digest('base64url');
}

/** A new delegation session's lifetime (seconds), from its first token's and what the subject token has left. */
export function delegationSessionLifetime(tokenLifetime: number, subjectLeft: number): number {
  return Math.min(subjectLeft, Math.max(tokenLifetime, DELEGATION_SPAN_SECONDS));
}

/**
 * How long a process reuses a live delegation's record it read (ms): well
 * inside the life of an end mark (five minutes, lib/sessions/store.ts), which
 * every reuse reads.
 */
export const REMEMBERED_DELEGATION_MS = 30_000;
/** Live delegations a process remembers at most. */
const REMEMBERED_DELEGATIONS = 10_000;

/**
 * The live delegations this process found lately, by key, so that a service
 * delegating on every call it receives reads one entry of the store per
 * request (the session's end mark) instead of its index and its record.
 *
 * Why it is safe: a session stops only through closeSession, which writes
 * the session's end mark (kept five minutes) before it revokes the session's
 * Grant, lists it on the revocation feed or changes its record. A remembered
 * record is reused only with that mark read in the same request, and only
 * for 30 seconds after it was read active: a stop that began after the read
 * is seen by its mark, as the store's own record would show it; one that had
 * begun before (mark written, record not closed yet) has its mark read too,
 * unless that stop stalled for more than four and a half minutes between its
 * mark and its record, and then the record read afresh would have said
 * "active" just as well until the stop revoked the Grant and listed the
 * session on the feed, which stop every token issued under it, remembered or
 * not. The session's expiry is checked against the record itself, and the
 * session it was delegated from is read afresh on every reuse (reissueDelegated).
 */
export class LiveDelegations {
  readonly #records = new Expiring<SessionRecord>(REMEMBERED_DELEGATIONS);

  constructor(readonly sessions: SessionStore) {}

  /**
   * The live delegation of `key` lasting until `until` (seconds): one this
   * process remembers, whose end mark is still unwritten, else the store's
   * (SessionStore.liveDelegation), then remembered.
   */
  async find(key: string, until: number): Promise<SessionRecord | undefined> {
    const remembered = this.#records.get(key);
    if (remembered && remembered.expiresAt >= until) {
      if (!(await this.sessions.hasEnded({ parentSessionId: remembered.id }))) return remembered;
    }
    this.#records.delete(key);
    const live = await this.sessions.liveDelegation(key, until);
    if (live) this.#records.set(key, live, REMEMBERED_DELEGATION_MS);
    return live;
  }
}
