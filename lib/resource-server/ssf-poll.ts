import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { unavailable } from '../errors/standalone.js';
import { clockSkewOf, RECEIVER_OPTIONS, receiverRequest, verifySet, type SsfReceiverOptions } from './set.js';
import type { RevocationSource } from './source.js';
import { StreamRevocations } from './stream-revocations.js';

export interface SsfPollOptions extends SsfReceiverOptions {
  /** How the stream is delivered: polled (RFC 8936), the default. */
  delivery?: 'poll' | undefined;
  /** The stream's poll endpoint (`delivery.endpoint_url`), or a function resolving it before every poll. */
  endpoint: string | URL | (() => string | URL | Promise<string | URL>);
}

export const POLL_OPTION_NAMES = Object.keys({
  ...RECEIVER_OPTIONS,
  delivery: true,
  endpoint: true,
} satisfies Record<keyof SsfPollOptions, true>);

const MAX_EVENTS = 100;
/** Hosts a stream may be polled from, or keys fetched from, over plain http. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** An https URL, or http on a loopback host; else undefined. */
export function secureUrl(value: unknown): URL | undefined {
  const url = URL.parse(String(value));
  return url?.protocol === 'https:' || (url?.protocol === 'http:' && LOOPBACK.has(url.hostname)) ? url : undefined;
}

/** Revocations from an SSF stream by poll (RFC 8936), each read draining the stream; Invariants 54, 55. */
export function ssfPollSource(
  options: SsfPollOptions,
  trust: { issuer: string; keys: JWTVerifyGetKey },
  timeout: number,
  /** Done with each verified SET before it is acknowledged: a failure ends the read, and the SET comes again. */
  onTaken?: (payload: JWTPayload) => Promise<void>,
): RevocationSource {
  const clockSkew = clockSkewOf(options);
  const revocations = new StreamRevocations(options);
  let pendingAck: string[] = [];
  let pendingErrors: Record<string, { err: string; description: string }> = {};
  /** A SET of the last page could not be verified yet: what it revokes is unknown. */
  let uncertain = false;

  return revocations.source(
    async (signal) => {
      const startedAt = Date.now();
      for (;;) {
        const body = {
          maxEvents: MAX_EVENTS,
          returnImmediately: true,
          ...(pendingAck.length ? { ack: pendingAck } : {}),
          ...(Object.keys(pendingErrors).length ? { setErrs: pendingErrors } : {}),
        };
        // Checked before each request: a function may resolve to any URL, and the request carries the access token.
        const url = secureUrl(typeof options.endpoint === 'function' ? await options.endpoint() : options.endpoint);
        if (!url) throw unavailable('the SSF poll endpoint is not an https URL (http only on a loopback host)');
        const response = await receiverRequest(options, { method: 'POST', url, body, signal, timeout });
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
        for (const [jti, jwt] of sets) {
          const verified = await verifySet(jwt, trust, options.audience);
          // One that could not be verified for now stays unacknowledged.
          if (verified.payload) {
            revocations.take(verified.payload);
            await onTaken?.(verified.payload);
            pendingAck.push(jti);
          } else if (verified.error === undefined) unverified += 1;
          else pendingErrors[jti] = { err: verified.error, description: 'the SET could not be verified' };
        }
        uncertain = unverified > 0;
        // It would come again on every page: the read ends here, and the next one tries it again.
        if (uncertain) throw unavailable(`${unverified} SET(s) of the SSF stream could not be verified yet`);
        if (!sets.length && page.moreAvailable !== true) break;
      }
      revocations.forgetBefore(Date.now());
      revocations.knowsSince ??= Math.floor(startedAt / 1000) + clockSkew;
    },
    () => uncertain,
  );
}
