import type { KoaContextWithOIDC } from 'oidc-provider';
import { publicTokenId, type AccessTokens, type VerifiedAccessToken } from '../access-token.js';
import { invalidCall, invalidRequest } from '../errors.js';
import { isStorableText } from '../storable-text.js';
import type { DelegationSubject, ResolvedDelegationOptions } from './delegation-options.js';
import { ACCESS_TOKEN_TYPE, checkStatedType, JWT_TOKEN_TYPE, type ExchangeParams } from './request.js';

/** The subject as established, with what only the provider's own tokens tell. */
export interface VerifiedSubject extends Omit<DelegationSubject, 'mayAct'> {
  /** Its `may_act` as the token (or the resolver) gave it, whatever its shape: checkMayAct refuses any but an object. */
  mayAct?: unknown;
  /** The session (`imp_…`) the token belongs to: an impersonation's, or an earlier delegation's. */
  sessionId?: string | undefined;
  /** Sender constraint of the subject token, which the request must prove too. */
  cnf?: VerifiedAccessToken['cnf'];
}

const INVALID = 'subject_token is invalid, expired, revoked or not issued by this server';

/** A delegation's subject token, verified as its type says: this provider's access token or JWT, or a resolver's type. */
export async function verifySubjectToken(
  ctx: KoaContextWithOIDC,
  tokens: AccessTokens,
  { subject_token: value, subject_token_type: type }: ExchangeParams,
  options: ResolvedDelegationOptions,
): Promise<VerifiedSubject> {
  if (type === ACCESS_TOKEN_TYPE || type === JWT_TOKEN_TYPE) {
    checkStatedType('subject_token', value, type);
    const token = await tokens.verify(value, 'AccessToken');
    if (!token) throw invalidRequest(INVALID);
    return {
      id: publicTokenId(token.format, token.jti),
      sub: token.sub,
      scope: [...token.scopes],
      exp: token.exp,
      clientId: token.clientId,
      audience: token.audience,
      ...(token.act ? { act: token.act } : {}),
      ...(token.mayAct === undefined ? {} : { mayAct: token.mayAct }),
      ...(token.impersonationSession === undefined ? {} : { sessionId: token.impersonationSession }),
      ...(token.cnf ? { cnf: token.cnf } : {}),
    };
  }
  const resolver = options.subjectTokenTypes.get(type);
  if (!resolver) throw invalidRequest('unsupported subject_token_type');
  const subject = await resolver({ token: value, tokenType: type, clientId: ctx.oidc.client!.clientId });
  if (subject === undefined) throw invalidRequest(INVALID);
  return checkedSubject(subject);
}

/** What a deployment's resolver returns is checked as closely as our own tokens are. */
function checkedSubject(subject: DelegationSubject): VerifiedSubject {
  const strings = (value: unknown) => Array.isArray(value) && value.every((entry) => typeof entry === 'string');
  const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
  if (
    typeof subject !== 'object' ||
    subject === null ||
    typeof subject.id !== 'string' ||
    !subject.id ||
    !isStorableText(subject.id) ||
    typeof subject.sub !== 'string' ||
    !subject.sub ||
    !isStorableText(subject.sub) ||
    !strings(subject.scope) ||
    !Number.isSafeInteger(subject.exp) ||
    (subject.clientId !== undefined && typeof subject.clientId !== 'string') ||
    (subject.audience !== undefined && !strings(subject.audience)) ||
    (subject.act !== undefined && !isObject(subject.act))
  ) {
    throw invalidCall(
      'delegation.subjectTokenTypes',
      'a resolver returned a subject of the wrong shape: { id, sub, scope, exp } are required',
    );
  }
  return {
    id: subject.id,
    sub: subject.sub,
    scope: [...subject.scope],
    exp: subject.exp,
    ...(subject.clientId === undefined ? {} : { clientId: subject.clientId }),
    ...(subject.audience === undefined ? {} : { audience: [...subject.audience] }),
    ...(subject.act === undefined ? {} : { act: structuredClone(subject.act) }),
    // A may_act of another shape is the token's, which the resolver passed through: refused as the token's (checkMayAct).
    ...(subject.mayAct === undefined
      ? {}
      : { mayAct: isObject(subject.mayAct) ? structuredClone(subject.mayAct) : (subject.mayAct as unknown) }),
  };
}
