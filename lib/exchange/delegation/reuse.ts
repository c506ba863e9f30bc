import { createHash } from 'node:crypto';

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
