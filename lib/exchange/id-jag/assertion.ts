import { decodeJwt, errors, jwtVerify } from 'jose';
import { invalidGrant, issuerKeysUnavailable } from '../../errors.js';
import { isStorableText } from '../../storable-text.js';
import type { ResolvedIdJagOptions } from './options.js';

/** The draft's explicit JWT type (RFC 8725 3.11). */
export const ID_JAG_TYP = 'oauth-id-jag+jwt';

/** What a verified ID-JAG states; `resource` and `scope` as sent, checked where they are used. */
export interface IdJagClaims {
  iss: string;
  sub: string;
  client_id: string;
  jti: string;
  exp: number;
  iat: number;
  resource?: unknown;
  scope?: unknown;
}

/** RFC 7523 3 and the draft's rules: a trusted issuer's signature, `typ`, `aud`, times; `invalid_grant` otherwise, never quoting it. */
export async function verifyIdJag(
  assertion: string,
  audience: string,
  options: ResolvedIdJagOptions,
  clockTolerance: number,
): Promise<IdJagClaims> {
  let issuer: unknown;
  try {
    issuer = decodeJwt(assertion).iss;
  } catch {
    throw invalidGrant('the assertion is not a JWT');
  }
  const keys = typeof issuer === 'string' ? options.trustedIssuers.get(issuer) : undefined;
  if (!keys) throw invalidGrant('the assertion is not from a trusted issuer');
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(assertion, keys, {
      typ: ID_JAG_TYP,
      issuer: issuer as string,
      audience,
      clockTolerance,
      maxTokenAge: options.maxAssertionLifetime,
      requiredClaims: ['sub', 'client_id', 'jti', 'exp', 'iat'],
    }));
  } catch (error) {
    if (issuerUnreachable(error)) throw issuerKeysUnavailable();
    // jose's messages name the check that failed, never a claim's value.
    throw invalidGrant(`the assertion is invalid: ${error.message}`);
  }
  for (const name of ['sub', 'client_id', 'jti'] as const) {
    const value = payload[name];
    if (typeof value !== 'string' || !value || !isStorableText(value)) {
      throw invalidGrant(`the assertion's "${name}" claim must be a non-empty string of storable text`);
    }
  }
  // RFC 7523 3 point 4: an `exp` unreasonably far ahead is refused, so a redeemed `jti` is kept only so long.
  if ((payload['exp'] as number) > Date.now() / 1000 + options.maxAssertionLifetime + clockTolerance) {
    throw invalidGrant(`the assertion expires more than ${options.maxAssertionLifetime} s from now`);
  }
  return payload as unknown as IdJagClaims;
}

/** A failure to fetch the issuer's keys (network, timeout, a bad answer), which says nothing of the assertion. */
function issuerUnreachable(error: unknown): boolean {
  if (!(error instanceof errors.JOSEError)) return true;
  return error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid || error.constructor === errors.JOSEError;
}
