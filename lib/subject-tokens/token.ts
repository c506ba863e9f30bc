import { hash, randomBytes } from 'node:crypto';

/** Every subject token starts with this, so secret scanners can recognise a leaked one. */
export const SUBJECT_TOKEN_PREFIX = 'ist_';

const RANDOM_BYTES = 32; // 256 bits
const SHAPE = new RegExp(`^${SUBJECT_TOKEN_PREFIX}[A-Za-z0-9_-]{43}$`);

export function mintSubjectToken(): string {
  return SUBJECT_TOKEN_PREFIX + randomBytes(RANDOM_BYTES).toString('base64url');
}

/** A value that cannot be ours is refused before any store round trip. */
export function looksLikeSubjectToken(value: string): boolean {
  return SHAPE.test(value);
}

/** The store key: an unsalted fast hash suffices for 256 random bits. */
export function hashSubjectToken(value: string): string {
  return hash('sha256', value, 'base64url');
}

/** A non-secret id for audit trails: it names a token without allowing its redemption. */
export function newSubjectTokenId(): string {
  return `stid_${randomBytes(12).toString('base64url')}`;
}
