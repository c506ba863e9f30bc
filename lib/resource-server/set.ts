import { jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { SESSION_REVOKED_EVENT, SET_TYPE } from '../ssf/names.js';
import { requestSignal } from './source.js';

/** What the poll and the push receivers share of their options: who they are, and how long they remember. */
export interface SsfReceiverOptions {
  /** The receiver's access token for the stream API, or a function called before every request that returns a current one. */
  accessToken: string | (() => string | Promise<string>);
  /** The `aud` of this stream's SETs: the receiver's client id, as the stream configuration shows. */
  audience: string;
  /** Seconds a revocation is remembered: at least the longest impersonation token's lifetime. Default 86,400. */
  retention?: number | undefined;
  /** Seconds the two services' clocks may differ either way: tokens up to this past the first read are refused. Default 5. */
  clockSkew?: number | undefined;
}

/** The receivers' own options, which each delivery's names extend. */
export const RECEIVER_OPTIONS = {
  accessToken: true,
  audience: true,
  retention: true,
  clockSkew: true,
} as const satisfies Record<keyof SsfReceiverOptions, true>;

export const clockSkewOf = (options: SsfReceiverOptions | undefined): number => options?.clockSkew ?? 5;

/** A request of the transmitter's stream API as this stream's receiver, with a JSON body when one is given. */
export async function receiverRequest(
  options: SsfReceiverOptions,
  request: { method: string; url: URL; body?: unknown; signal: AbortSignal; timeout: number },
): Promise<Response> {
  const token = typeof options.accessToken === 'function' ? await options.accessToken() : options.accessToken;
  const { method, url, body, signal, timeout } = request;
  return fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: requestSignal(signal, timeout),
  });
}

/** A SET checked as this stream's: its claims, or the RFC 8935 2.3 code if it never will verify, undefined if it may later. */
export async function verifySet(jwt: string, trust: { issuer: string; keys: JWTVerifyGetKey }, audience: string) {
  try {
    const { payload } = await jwtVerify(jwt, trust.keys, { issuer: trust.issuer, audience, typ: SET_TYPE });
    return { payload };
  } catch (error) {
    return { error: permanentSetError(error) };
  }
}

/** The session a verified SET revokes, when it carries a CAEP session-revoked event. */
export function revokedSessionOf(payload: JWTPayload): string | undefined {
  const events = payload['events'] as Record<string, unknown> | undefined;
  const subject = events?.[SESSION_REVOKED_EVENT] ? payload['sub_id'] : undefined;
  const value = subject as { format?: unknown; id?: unknown; session?: { format?: unknown; id?: unknown } } | undefined;
  const simple = value?.format === 'complex' ? value.session : value;
  return simple?.format === 'opaque' && typeof simple.id === 'string' ? simple.id : undefined;
}

/** Invariant 54: the `setErrs` code of a SET that never verifies; undefined if it may. */
function permanentSetError(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') return 'invalid_key';
  if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') {
    const claim = (error as { claim?: unknown }).claim;
    return claim === 'iss' ? 'invalid_issuer' : claim === 'aud' ? 'invalid_audience' : 'invalid_request';
  }
  if (PERMANENT_FAILURES.has(code as string)) return 'invalid_request';
  return undefined;
}

/** jose's errors for a token that is malformed or not acceptable as it is, whatever the keys. */
const PERMANENT_FAILURES = new Set([
  'ERR_JWS_INVALID',
  'ERR_JWT_INVALID',
  'ERR_JWT_EXPIRED',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
]);
