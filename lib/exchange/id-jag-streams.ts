/** Each trusted issuer's SSF stream, polled: a stop of an ID-JAG's session there ends what it was redeemed for here. */
import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { JWTPayload } from 'jose';
import { issuerStopQuota } from '../capacity.js';
import { unavailable } from '../errors/standalone.js';
import type { EventBus } from '../events/subscriber.js';
import { reportError } from '../report-error.js';
import { revokedSessionOf } from '../resource-server/set.js';
import { ssfPollSource } from '../resource-server/ssf-poll.js';
import { closeStartedWith } from '../sessions/close.js';
import type { SessionStore } from '../sessions/store.js';
import { EXCHANGE_DEADLINE_MS } from './commit.js';
import { MAX_ASSERTION_LIFETIME, MAX_CLOCK_SKEW, type ResolvedIdJagOptions } from './id-jag-options.js';

/** Milliseconds between reads of a stream, and past which a stream not read completely refuses its issuer's ID-JAGs. */
const STREAM_READ_INTERVAL = 500;
const STREAM_MAX_STALENESS = 5000;
/** Bound on one request of a stream, ms. */
const REQUEST_TIMEOUT = 2000;
/** Seconds an issuer session's end mark is kept: past its ID-JAGs' life, the tolerance, the exchange's deadline, the stores' drift. */
const ISSUER_MARK_SECONDS = MAX_ASSERTION_LIFETIME + MAX_CLOCK_SKEW + EXCHANGE_DEADLINE_MS / 1000 + MAX_CLOCK_SKEW;

export interface IssuerStreams {
  /** Whether a redemption of `issuer`'s ID-JAG may rely on its stream: read completely within the bound, or none set. */
  current(issuer: string): boolean;
}

/** A name an issuer gave (an ID-JAG's session there, its `jti`), digested with the issuer: unique across issuers. */
export function issuerDigestOf(issuer: string, name: string): string {
  return createHash('sha256')
    .update(JSON.stringify([issuer, name]))
    .digest('base64url');
}

/** Polls the stream of each trusted issuer that names one, from now until `stopped` aborts (before: none is polled). */
export function followIssuerStreams(
  options: ResolvedIdJagOptions,
  sessions: SessionStore,
  bus: EventBus,
  stopped: AbortSignal,
): IssuerStreams {
  /** When each stream's last complete read began (`performance.now()`). */
  const readSince = new Map<string, number>();
  for (const [issuer, trusted] of options.trustedIssuers) {
    if (!trusted.ssf) continue;
    // A session-revoked SET: its session's redemptions marked ended (refusing those to come) within the issuer's share, then closed.
    const ended = async (payload: JWTPayload) => {
      const sessionId = revokedSessionOf(payload);
      if (sessionId === undefined) return;
      const origin = { issuerSession: issuerDigestOf(issuer, sessionId) };
      const quota = issuerStopQuota(issuer, options.maxStopsPerIssuer);
      const marked = await sessions.markEndedWithin(origin, ISSUER_MARK_SECONDS, quota);
      await closeStartedWith(bus, sessions, origin, 'issuer_session_stopped', undefined);
      // Unacknowledged: the stream goes stale, and this issuer's ID-JAGs are refused until its share starts again.
      if (!marked) throw unavailable("the issuer's session stops marked this hour are spent (idJag.maxStopsPerIssuer)");
    };
    // Nothing is looked up in what the source remembers: each SET is acted on as it comes.
    const trust = { issuer, keys: trusted.keys };
    const source = ssfPollSource({ ...trusted.ssf, retention: 1 }, trust, REQUEST_TIMEOUT, ended);
    let failures = 0;
    const read = async (): Promise<void> => {
      const startedAt = performance.now();
      try {
        await source.read(AbortSignal.any([AbortSignal.timeout(STREAM_MAX_STALENESS), stopped]));
        readSince.set(issuer, startedAt);
        failures = 0;
      } catch (error) {
        // Once a streak, and only to a listener (before the provider serves, none): the issuer's refusals tell the rest.
        const heard = (bus.provider as unknown as EventEmitter).listenerCount('error') > 0;
        if (failures++ === 0 && heard && !stopped.aborted) reportError(bus.provider, error);
      }
      if (!stopped.aborted) setTimeout(() => void read(), STREAM_READ_INTERVAL).unref();
    };
    if (!stopped.aborted) void read();
  }
  return {
    current(issuer) {
      if (!options.trustedIssuers.get(issuer)?.ssf) return true;
      return performance.now() - (readSince.get(issuer) ?? -Infinity) <= STREAM_MAX_STALENESS;
    },
  };
}
