import { jwtVerify, type JWTVerifyGetKey } from 'jose';
import { unavailable } from '../errors/standalone.js';
import { SESSION_REVOKED_EVENT, SET_TYPE } from '../ssf/names.js';
import { requestSignal, type RevocationSource } from './source.js';

export interface SsfPollOptions {
  /** The stream's poll endpoint: its configuration's `delivery.endpoint_url`. */
  endpoint: string | URL;
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
 * subject's `session`, or an opaque subject). A SET that fails verification is
 * reported back in `setErrs` and revokes nothing.
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
  const endpoint = new URL(options.endpoint);
  const retentionMs = (options.retention ?? 86_400) * 1000;
  const clockSkew = options.clockSkew ?? 5;
  const revoked = new Map<string, number>();
  let knowsSince: number | undefined;
  let pendingAck: string[] = [];
  let pendingErrors: Record<string, { err: string; description: string }> = {};

  async function token(): Promise<string> {
    return typeof options.accessToken === 'function' ? options.accessToken() : options.accessToken;
  }

  async function take(jti: string, jwt: string): Promise<void> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(jwt, trust.keys, {
        issuer: trust.issuer,
        audience: options.audience,
        typ: SET_TYPE,
      }));
    } catch (error) {
      pendingErrors[jti] = { err: setErrorOf(error), description: 'the SET could not be verified' };
      return;
    }
    const events = payload['events'] as Record<string, unknown> | undefined;
    const sessionId = events?.[SESSION_REVOKED_EVENT] ? sessionOf(payload['sub_id']) : undefined;
    if (sessionId !== undefined) revoked.set(sessionId, Date.now() + retentionMs);
    pendingAck.push(jti);
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
        const response = await fetch(endpoint, {
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
        for (const [jti, jwt] of sets) await take(jti, jwt);
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
  };
}

/** The session a session-revoked SET names: a complex subject's `session`, or an opaque subject. */
function sessionOf(subject: unknown): string | undefined {
  const value = subject as { format?: unknown; id?: unknown; session?: { format?: unknown; id?: unknown } } | undefined;
  const simple = value?.format === 'complex' ? value.session : value;
  return simple?.format === 'opaque' && typeof simple.id === 'string' ? simple.id : undefined;
}

/** RFC 8935 2.3 error codes, as RFC 8936 `setErrs` reports them. */
function setErrorOf(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' || code === 'ERR_JWKS_NO_MATCHING_KEY') return 'invalid_key';
  const claim = (error as { claim?: unknown }).claim;
  if (claim === 'iss') return 'invalid_issuer';
  if (claim === 'aud') return 'invalid_audience';
  return 'invalid_request';
}
