/** Each trusted issuer's SSF stream, polled: a stop of an ID-JAG's session there ends what it was redeemed for here. */
import { createHash } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type { JWTPayload } from 'jose';
import type { EventBus } from '../events/subscriber.js';
import { reportError } from '../report-error.js';
import { revokedSessionOf } from '../resource-server/set.js';
import { ssfPollSource } from '../resource-server/ssf-poll.js';
import { closeStartedWith } from '../sessions/close.js';
import type { SessionStore } from '../sessions/store.js';
import type { ResolvedIdJagOptions } from './id-jag-options.js';

/** Milliseconds between reads of a stream, and past which a stream not read completely refuses its issuer's ID-JAGs. */
const STREAM_READ_INTERVAL = 500;
const STREAM_MAX_STALENESS = 5000;
/** Bound on one request of a stream, ms. */
const REQUEST_TIMEOUT = 2000;
/** Seconds an issuer session's end mark is kept: past its ID-JAGs' life (300 s), the clock tolerance and the stores' drift. */
const ISSUER_MARK_SECONDS = 420;

export interface IssuerStreams {
  /** Whether a redemption of `issuer`'s ID-JAG may rely on its stream: read completely within the bound, or none set. */
  current(issuer: string): boolean;
  /** Stops polling. */
  stop(): void;
}

/** The origin of a redemption: the ID-JAG's issuer and its session there, digested. */
export function issuerSessionOf(issuer: string, sessionId: string): string {
  return createHash('sha256')
    .update(JSON.stringify([issuer, sessionId]))
    .digest('base64url');
}

/** Polls the stream of each trusted issuer that names one, from now until `stop()`. */
export function followIssuerStreams(
  options: ResolvedIdJagOptions,
  sessions: SessionStore,
  bus: EventBus,
): IssuerStreams {
  const closing = new AbortController();
  /** When each stream's last complete read began (`performance.now()`). */
  const readSince = new Map<string, number>();
  for (const [issuer, trusted] of options.trustedIssuers) {
    if (!trusted.ssf) continue;
    const ended = (payload: JWTPayload) => endRedemptions(sessions, bus, issuer, payload);
    // Nothing is looked up in what the source remembers: each SET is acted on as it comes.
    const trust = { issuer, keys: trusted.keys };
    const source = ssfPollSource({ ...trusted.ssf, retention: 1 }, trust, REQUEST_TIMEOUT, ended);
    let failures = 0;
    const read = async (): Promise<void> => {
      const startedAt = performance.now();
      try {
        await source.read(AbortSignal.any([AbortSignal.timeout(STREAM_MAX_STALENESS), closing.signal]));
        readSince.set(issuer, startedAt);
        failures = 0;
      } catch (error) {
        // Once a streak, and only to a listener (before the provider serves, none): the issuer's refusals tell the rest.
        const heard = (bus.provider as unknown as EventEmitter).listenerCount('error') > 0;
        if (failures++ === 0 && heard && !closing.signal.aborted) reportError(bus.provider, error);
      }
      if (!closing.signal.aborted) setTimeout(() => void read(), STREAM_READ_INTERVAL).unref();
    };
    void read();
  }
  return {
    current(issuer) {
      if (!options.trustedIssuers.get(issuer)?.ssf) return true;
      return performance.now() - (readSince.get(issuer) ?? -Infinity) <= STREAM_MAX_STALENESS;
    },
    stop: () => closing.abort(),
  };
}

/** A session-revoked SET: its session's redemptions marked ended (refusing those to come), then closed. */
async function endRedemptions(sessions: SessionStore, bus: EventBus, issuer: string, payload: JWTPayload) {
  const sessionId = revokedSessionOf(payload);
  if (sessionId === undefined) return;
  const origin = { issuerSession: issuerSessionOf(issuer, sessionId) };
  await sessions.markEnded(origin, false, ISSUER_MARK_SECONDS);
  await closeStartedWith(bus, sessions, origin, 'issuer_session_stopped', undefined);
}
