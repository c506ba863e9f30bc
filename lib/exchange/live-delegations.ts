import { createHash } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC } from 'oidc-provider';
import { Expiring } from '../adapters/expiring.js';
import { invalidRequest } from '../errors.js';
import { assignTokenId } from '../provider-internals.js';
import { stateOf, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';

/** A delegation session's length, so a service delegating per call lists one session an hour, not one per call. */
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

/** How long a remembered live delegation is reused (ms); Invariant 26. */
export const REMEMBERED_DELEGATION_MS = 30_000;
/** Live delegations a process remembers at most. */
const REMEMBERED_DELEGATIONS = 10_000;

/** Live delegations this process found lately, so a reuse reads only the end mark. Invariant 26. */
export class LiveDelegations {
  readonly #records = new Expiring<SessionRecord>(REMEMBERED_DELEGATIONS);

  constructor(readonly sessions: SessionStore) {}

  /** The live delegation of `key` lasting until `until` (s): remembered and unmarked, else the store's. */
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

/** One more token under a live delegation: nothing of the plugin's written (Invariant 26); resolves its value. */
export async function reissueDelegated(
  ctx: KoaContextWithOIDC,
  sessions: SessionStore,
  token: AccessToken,
  session: SessionRecord,
): Promise<string> {
  ctx.oidc.entity('AccessToken', token);
  assignTokenId(token);
  // The delegation's key names the token format: a session whose tokens are opaque has their Grant.
  if (token.format === 'opaque') token.grantId = session.grantId!;
  if (session.parentSessionId !== undefined) await confirmActive(sessions, session.parentSessionId, true);
  return token.save();
}

/** The session a subject token names, still active; with `orMarked`, its stop's mark counts too. */
export async function confirmActive(sessions: SessionStore, id: string, orMarked = false): Promise<SessionRecord> {
  const [parent, marked] = await Promise.all([
    sessions.find(id),
    orMarked ? sessions.hasEnded({ parentSessionId: id }) : false,
  ]);
  return assertActive(parent, marked);
}

/** `session`, read already, unless it is gone, no longer active, or `marked` ended. */
export function assertActive(session: SessionRecord | undefined, marked = false): SessionRecord {
  if (!session || stateOf(session) !== 'active' || marked) {
    throw invalidRequest('subject_token belongs to a session that was stopped');
  }
  return session;
}
