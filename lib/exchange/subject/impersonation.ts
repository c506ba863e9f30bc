/** The subject of an impersonation: a subject token (`ist_…`) the Management API created, redeemed once. */
import { invalidRequest } from '../../errors.js';
import type { FoundSubjectToken, SubjectTokenRecord } from '../../subject-tokens/store.js';
import { looksLikeSubjectToken } from '../../subject-tokens/token.js';
import { ACCESS_TOKEN_TYPE, type Accepted } from '../request.js';

/** An impersonation names its subject token as an access token, and issues one. */
export const IMPERSONATION_ACCEPTS: Accepted = {
  subjectTokenType: (type) => type === ACCESS_TOKEN_TYPE,
  subjectTokenTypes: `use ${ACCESS_TOKEN_TYPE}`,
  actorTokenTypes: [ACCESS_TOKEN_TYPE],
  requestedTokenTypes: [ACCESS_TOKEN_TYPE],
  audience: false,
};

/** A value that cannot be a subject token is refused before any store is read. */
export function checkSubjectTokenShape(value: string): void {
  if (!looksLikeSubjectToken(value)) throw invalidRequest('subject_token is unknown');
}

/** The subject token as found: its client binding first, so another client learns nothing of its state. */
export function usableSubjectToken(
  found: FoundSubjectToken,
  clientId: string,
  named: (record: SubjectTokenRecord) => void,
): { record: SubjectTokenRecord; key: string } {
  if (found.state === 'unknown') throw invalidRequest('subject_token is unknown');
  const { record, key } = found;
  named(record);
  if (record.clientId !== undefined && record.clientId !== clientId) {
    throw invalidRequest('subject_token was issued for another client');
  }
  if (found.state === 'withdrawn') throw invalidRequest('subject_token was withdrawn');
  if (found.state === 'consumed') throw invalidRequest('subject_token was already used');
  if (found.state === 'expired') throw invalidRequest('subject_token has expired');
  return { record, key };
}
