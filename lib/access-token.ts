import { hash } from 'node:crypto';
import { createLocalJWKSet, jwtVerify, type JWTPayload } from 'jose';
import { LRUCache } from 'lru-cache';
import type { AccessToken, AdapterPayload, ClientCredentials, Provider } from 'oidc-provider';
import type { ReadAheadAdapter } from './adapters/contracts/read-ahead.js';
import { findAccessTokenUnbound, providerJwks, tokenOriginsHold } from './provider-internals.js';
import { SESSION_CLAIM } from './token-claims.js';

/** What the plugin needs to know of an access token this provider issued, whatever its format. */
export interface VerifiedAccessToken {
  format: 'jwt' | 'opaque';
  /** The account, or the client for client-credentials tokens. */
  sub: string;
  clientId: string;
  scopes: ReadonlySet<string>;
  audience: readonly string[];
  exp: number;
  jti: string;
  /** An opaque user token's Grant and oidc-provider session (a JWT names neither). */
  grantId?: string;
  sessionUid?: string;
  /** A JWT's `auth_time` and `acr`, when it carries them (an opaque token's are its session's). */
  authTime?: number;
  acr?: string;
  /** An `act` claim the token already carries (it is itself an impersonation token). */
  act?: Record<string, unknown>;
  /** RFC 8693 4.4 `may_act` as carried; one that is no JSON object is refused where used, never taken for absent. */
  mayAct?: unknown;
  /** The impersonation session a token issued by the exchange names (its `impersonation_session` claim). */
  impersonationSession?: string;
  /** Sender constraint, when the token is DPoP- or certificate-bound. */
  cnf?: { jkt?: string; 'x5t#S256'?: string };
}

export type AccessTokenModel = 'AccessToken' | 'ClientCredentials';

const VERIFIED_JWT_CACHE_SIZE = 10_000;

/** A provider's access tokens as the plugin honours them; each holder keeps its own cache of verified JWTs. */
export class AccessTokens {
  readonly keySet: ReturnType<typeof createLocalJWKSet>;
  /** Invariant 51: verified JWTs by SHA-256, until their `exp`; ttlResolution 0 reads the clock, arming no timer. */
  readonly verified = new LRUCache<string, VerifiedAccessToken>({ max: VERIFIED_JWT_CACHE_SIZE, ttlResolution: 0 });

  constructor(readonly provider: Provider) {
    this.keySet = createLocalJWKSet(providerJwks(provider) as Parameters<typeof createLocalJWKSet>[0]);
  }

  /** An access token of this provider; `undefined` for anything not valid and ours, rejects only on a store outage. */
  verify(value: string, model: AccessTokenModel): Promise<VerifiedAccessToken | undefined> {
    const { provider } = this;
    if (!value) return Promise.resolve(undefined);
    if (value.split('.').length === 3) return verifyJwt(this, value);
    if (model === 'AccessToken') return verifyHonouredAccessToken(provider, value);
    return provider.ClientCredentials.find(value).then((token) => token && verifiedOpaque(token, model));
  }
}

function verifiedOpaque(
  token: AccessToken | ClientCredentials,
  model: AccessTokenModel,
  signIn?: AdapterPayload,
): VerifiedAccessToken | undefined {
  if (token.isExpired) return undefined;
  const stored = token as AccessToken & { clientId: string; jti: string; exp: number; aud?: string | string[] };
  const sub = model === 'AccessToken' ? stored.accountId : stored.clientId;
  if (!sub) return undefined;
  const act = stored.extra?.['act'];
  const mayAct = stored.extra?.['may_act'];
  const session = stored.extra?.[SESSION_CLAIM];
  const { clientId, exp, jti, grantId, sessionUid } = stored;
  const [scopes, audience] = [scopeSet(stored.scope), audienceList(stored.aud)];
  const verified: VerifiedAccessToken = { format: 'opaque', sub, clientId, scopes, audience, exp, jti };
  if (typeof grantId === 'string') verified.grantId = grantId;
  if (typeof sessionUid === 'string') verified.sessionUid = sessionUid;
  if (isObject(act)) verified.act = act;
  if (mayAct !== undefined) verified.mayAct = mayAct;
  if (typeof session === 'string') verified.impersonationSession = session;
  if (typeof signIn?.['loginTs'] === 'number') verified.authTime = signIn['loginTs'];
  if (typeof signIn?.['acr'] === 'string') verified.acr = signIn['acr'];
  return Object.assign(verified, cnfOf(stored.jkt, stored['x5t#S256']));
}

/** Invariant 23: after an announcement, reads of the provider's store see it, whatever store made it. */
export function forgetReadAheads(provider: Provider): void {
  (provider.AccessToken.adapter as ReadAheadAdapter).forgetReadAheads?.();
}

/** Invariant 52: an opaque user token as userinfo would honour it; session and Grant read side by side. */
function verifyHonouredAccessToken(provider: Provider, value: string): Promise<VerifiedAccessToken | undefined> {
  const adapter: ReadAheadAdapter = provider.AccessToken.adapter;
  const find = () =>
    findAccessTokenUnbound(provider, value).then((token) =>
      !token || token.isExpired || typeof token.grantId !== 'string'
        ? undefined
        : tokenOriginsHold(provider, token).then((read) =>
            read === false ? undefined : verifiedOpaque(token, 'AccessToken', read),
          ),
    );
  return adapter.readAhead ? adapter.readAhead(value).then(find) : find();
}

async function verifyJwt(verifier: AccessTokens, value: string): Promise<VerifiedAccessToken | undefined> {
  const { provider } = verifier;
  const cacheKey = hash('sha256', value, 'base64url');
  const cached = verifier.verified.get(cacheKey);
  if (cached) return cached.exp * 1000 > Date.now() ? cached : undefined;

  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(value, verifier.keySet, {
      issuer: provider.issuer,
      typ: 'at+jwt',
      requiredClaims: ['exp', 'sub', 'client_id', 'jti'],
    }));
  } catch {
    return undefined;
  }
  const clientId = payload['client_id'];
  const scope = payload['scope'];
  const act = payload['act'];
  const mayAct = payload['may_act'];
  const cnf = payload['cnf'];
  const session = payload[SESSION_CLAIM];
  if (
    typeof clientId !== 'string' ||
    typeof payload.sub !== 'string' ||
    (scope !== undefined && typeof scope !== 'string')
  ) {
    return undefined;
  }
  const token: VerifiedAccessToken = Object.freeze({
    format: 'jwt',
    sub: payload.sub,
    clientId,
    scopes: scopeSet(scope),
    audience: audienceList(payload.aud),
    exp: payload.exp!,
    jti: payload.jti!,
    ...(typeof payload['auth_time'] === 'number' ? { authTime: payload['auth_time'] } : {}),
    ...(typeof payload['acr'] === 'string' ? { acr: payload['acr'] } : {}),
    ...(isObject(act) ? { act } : {}),
    ...(mayAct === undefined ? {} : { mayAct }),
    ...(typeof session === 'string' ? { impersonationSession: session } : {}),
    ...(isObject(cnf) ? cnfOf(cnf['jkt'], cnf['x5t#S256']) : {}),
  } as const);
  verifier.verified.set(cacheKey, token, { ttl: Math.max(1, token.exp * 1000 - Date.now()) });
  return token;
}

/** A loggable name for an issued token: a JWT's `jti`, or the SHA-256 of an opaque token (whose `jti` is its value). */
export function publicTokenId(format: string | undefined, jti: string): string {
  return format === 'opaque' ? `${OPAQUE_ID_PREFIX}${hash('sha256', jti, 'base64url')}` : jti;
}

export const OPAQUE_ID_PREFIX = 'sha256.';

/** Scopes are a set of space-separated names: `openid` is not in `openidx`. */
export function scopeSet(scope: string | undefined): ReadonlySet<string> {
  return new Set(scope ? scope.split(' ').filter(Boolean) : []);
}

function audienceList(aud: unknown): string[] {
  if (typeof aud === 'string') return [aud];
  return Array.isArray(aud) ? aud.filter((entry): entry is string => typeof entry === 'string') : [];
}

function cnfOf(jkt: unknown, x5t: unknown): { cnf?: VerifiedAccessToken['cnf'] } {
  const cnf: NonNullable<VerifiedAccessToken['cnf']> = {};
  if (typeof jkt === 'string') cnf.jkt = jkt;
  if (typeof x5t === 'string') cnf['x5t#S256'] = x5t;
  return Object.keys(cnf).length ? { cnf } : {};
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
