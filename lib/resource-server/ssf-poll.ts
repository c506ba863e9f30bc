import { jwtVerify, type JWTVerifyGetKey } from 'jose';
import { unavailable } from '../errors/standalone.js';
import { SESSION_REVOKED_EVENT, SET_TYPE } from '../ssf/names.js';
import { requestSignal, type RevocationSource } from './source.js';

export interface SsfPollOptions {
  /** How the stream is delivered: polled (RFC 8936), the default. */
  delivery?: 'poll' | undefined;
  /**
   * The stream's poll endpoint: its configuration's `delivery.endpoint_url`,
   * or a function that resolves it, called before every poll (a receiver
   * that creates its stream when it starts polling).
   */
  endpoint: string | URL | (() => string | URL | Promise<string | URL>);
  /**
   * The receiver's access token for the transmitter's stream API (its SSF
   * scope), or a function that returns a current one: it is called before
   * every poll, so that it can renew a token about to expire.
   */
  accessToken: string | (() => string | Promise<string>);
  /** The `aud` of this stream's SETs: the receiver's client id, as the stream configuration shows. */
  audience: string;
  /** Seconds a revocation is remembered: at least the longest impersonation token's lifetime. Default 86,400. */
  retention?: number | undefined;
  /**
   * Seconds by which the identity service's clock may run ahead of this
   * server's: tokens issued up to this long after polling began are still
   * refused (see `knowsSince`). Default 5.
   */
  clockSkew?: number | undefined;
}

const MAX_EVENTS = 100;

/**
 * Revocations from an SSF stream by poll (RFC 8936): every read drains the
 * stream, verifying each SET (the issuer's keys, `typ` secevent+jwt, issuer,
 * audience) and acknowledging it in the next request, and remembers each
 * session named by a CAEP session-revoked event's `sub_id` (a complex
 * subject's `session`, or an opaque subject). A SET that fails verification
 * for good (its signature, issuer, audience or type, or its form) is reported
 * back in `setErrs` and revokes nothing. One that could not be verified for a
 * reason that may pass (the keys unavailable, a key id not known yet, the
 * network) is neither acknowledged nor reported (RFC 8936 2.4: `setErrs` is
 * for SETs the receiver will never process): it comes again at the next poll,
 * and until it is verified the source is `uncertain`, so that impersonation
 * tokens are refused rather than honoured past a revocation it could not read.
 *
 * An acknowledged SET is gone from the transmitter: what a restarted process
 * knew is lost. So impersonation tokens issued before the first read began are
 * refused, since their revocation may have been acknowledged by the process
 * that came before (`knowsSince`); each resource-server process polls a stream
 * of its own.
 */
export function ssfPollSource(
  options: SsfPollOptions,
  trust: { issuer: string; keys: JWTVerifyGetKey },
  timeout: number,
): RevocationSource {
  const endpoint = async (): Promise<URL> =>
    new URL(typeof options.endpoint === 'function' ? await options.endpoint() : options.endpoint);
  const retentionMs = (options.retention ?? 86_400) * 1000;
  const clockSkew = options.clockSkew ?? 5;
  const revoked = new Map<string, number>();
  let knowsSince: number | undefined;
  let pendingAck: string[] = [];
  let pendingErrors: Record<string, { err: string; description: string }> = {};
  /** A SET of the last page could not be verified yet: what it revokes is unknown. */
  let uncertain = false;

  async function token(): Promise<string> {
    return typeof options.accessToken === 'function' ? options.accessToken() : options.accessToken;
  }

  /** Takes a SET in; resolves `false` when it could not be verified for now (it stays unacknowledged). */
  async function take(jti: string, jwt: string): Promise<boolean> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(jwt, trust.keys, {
        issuer: trust.issuer,
        audience: options.audience,
        typ: SET_TYPE,
      }));
    } catch (error) {
      const err = permanentSetError(error);
      if (err === undefined) return false;
      pendingErrors[jti] = { err, description: 'the SET could not be verified' };
      return true;
    }
    const events = payload['events'] as Record<string, unknown> | undefined;
    const sessionId = events?.[SESSION_REVOKED_EVENT] ? sessionOf(payload['sub_id']) : undefined;
    if (sessionId !== undefined) revoked.set(sessionId, Date.now() + retentionMs);
    pendingAck.push(jti);
    return true;
  }

  return {
    async read(signal) {
      const startedAt = Date.now();
      for (;;) {
        const body = {
          maxEvents: MAX_EVENTS,
          returnImmediately: true,
          ...(pendingAck.length ? { ack: pendingAck } : {}),
          ...(Object.keys(pendingErrors).length ? { setErrs: pendingErrors } : {}),
        };
        const response = await fetch(await endpoint(), {
          method: 'POST',
          headers: {
            authorization: `Bearer ${await token()}`,
            'content-type': 'application/json',
            accept: 'application/json',
          },
          body: JSON.stringify(body),
          signal: requestSignal(signal, timeout),
        });
        if (!response.ok) throw unavailable(`the SSF poll endpoint answered ${response.status}`);
        const page = (await response.json()) as { sets?: unknown; moreAvailable?: unknown };
        if (typeof page.sets !== 'object' || page.sets === null)
          throw unavailable('the SSF poll endpoint sent no sets');
        // Acknowledged by the request that just succeeded.
        pendingAck = [];
        pendingErrors = {};
        const sets = Object.entries(page.sets as Record<string, unknown>).filter(
          (entry): entry is [string, string] => typeof entry[1] === 'string',
        );
        let unverified = 0;
        for (const [jti, jwt] of sets) if (!(await take(jti, jwt))) unverified += 1;
        uncertain = unverified > 0;
        // It would come again on every page: the read ends here, and the next one tries it again.
        if (uncertain) throw unavailable(`${unverified} SET(s) of the SSF stream could not be verified yet`);
        if (!sets.length && page.moreAvailable !== true) break;
      }
      const now = Date.now();
      for (const [id, until] of revoked) if (until < now) revoked.delete(id);
      knowsSince ??= Math.floor(startedAt / 1000) + clockSkew;
    },
    isRevoked: (sessionId) => revoked.has(sessionId),
    get size() {
      return revoked.size;
    },
    get knowsSince() {
      return knowsSince;
    },
    get uncertain() {
      return uncertain;
    },
  };
}

/** The session a session-revoked SET names: a complex subject's `session`, or an opaque subject. */
export function sessionOf(subject: unknown): string | undefined {
  const value = subject as { format?: unknown; id?: unknown; session?: { format?: unknown; id?: unknown } } | undefined;
  const simple = value?.format === 'complex' ? value.session : value;
  return simple?.format === 'opaque' && typeof simple.id === 'string' ? simple.id : undefined;
}

/**
 * The RFC 8935 2.3 error code that RFC 8936 `setErrs` reports for a SET that
 * will never verify: a bad signature by a key the issuer publishes, a claim or
 * type that is not this stream's, a malformed token. Undefined for a failure
 * that may pass (the keys could not be fetched, no published key has its key
 * id yet, the network): such a SET is neither acknowledged nor reported.
 */
export function permanentSetError(error: unknown): string | undefined {
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
