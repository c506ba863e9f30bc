import type { Provider } from 'oidc-provider';
import type { EventSubscriber } from '../events/subscriber.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import type { OutboxStore } from '../outbox/contract.js';
import { emitOn } from '../report-error.js';
import type { ResolvedSsfOptions } from './options.js';
import { sessionRevokedClaims, sessionStopOf, verificationClaims } from './set.js';
import { SESSION_REVOKED_EVENT } from './names.js';
import type { StreamRecord, StreamStore } from './store.js';

/** Emitted on the provider when a stream's outbox bound made a SET be dropped: `{ stream, jti }`. */
export const SSF_DROPPED = 'impersonation.ssf.dropped';

/** Outbox subscriptions of SSF streams start with this; a webhook subscription id cannot hold `:`. */
export const SSF_SUBSCRIPTION_PREFIX = 'ssf:';

/** The outbox subscription of a stream's SETs. */
export function streamSubscription(streamId: string): string {
  return `${SSF_SUBSCRIPTION_PREFIX}${streamId}`;
}

export interface Transmitter {
  provider: Provider;
  outbox: OutboxStore;
  streams: StreamStore;
  options: ResolvedSsfOptions;
  /** Asks the delivery to look at the outbox now rather than at its next interval. */
  wake(): void;
}

/** SSF streams as a subscriber: one SET per stream through the outbox, signed at delivery; a failure is reported, the stop stands. */
export function ssfSubscriber(transmitter: Transmitter): EventSubscriber {
  return {
    async notice(event) {
      if (event.name !== EVENTS.sessionRevoked && event.name !== EVENTS.sessionEnded) return;
      if (typeof event.sessionId !== 'string' || typeof event.subject !== 'string') return;
      const stopped = event as ImpersonationEvent & { sessionId: string; subject: string };
      const { provider, streams, options } = transmitter;
      // Beyond maxStreams: a stream a racing creation wrote over the bound, until it is taken back, must not push a real one out.
      let receiving = (await streams.list(undefined, 2 * options.maxStreams)).filter(
        (stream) => stream.status !== 'disabled' && stream.eventsRequested.includes(SESSION_REVOKED_EVENT),
      );
      const covers = options.streamCovers;
      if (covers) {
        const covered = await Promise.all(receiving.map(({ id, receiver }) => covers({ id, receiver }, stopped)));
        receiving = receiving.filter((_, i) => covered[i] === true);
      }
      if (!receiving.length) return;
      const stop = sessionStopOf(stopped);
      await append(
        transmitter,
        receiving.map((stream) => ({ stream, claims: sessionRevokedClaims(provider.issuer, stream.audience, stop) })),
      );
    },
  };
}

/** Deletes a stream and all it left: its poll queue, and its SETs in the outbox, waiting or dead-lettered. */
export async function deleteStream(transmitter: Transmitter, stream: StreamRecord): Promise<void> {
  await transmitter.streams.remove(stream);
  await transmitter.outbox.forget(streamSubscription(stream.id));
}

/** Queues a verification SET on the stream (SSF 1.0 8.1.4.2); its subject is the stream. */
export function transmitVerification(transmitter: Transmitter, stream: StreamRecord, state?: string): Promise<void> {
  const claims = verificationClaims(transmitter.provider.issuer, stream.audience, stream.id, state);
  return append(transmitter, [{ stream, claims }]);
}

async function append(
  transmitter: Transmitter,
  entries: ReadonlyArray<{ stream: StreamRecord; claims: Record<string, unknown> }>,
): Promise<void> {
  const dropped = await transmitter.outbox.append(
    entries.map(({ stream, claims }) => ({
      id: claims['jti'] as string,
      subscription: streamSubscription(stream.id),
      // Invariant 56: one lane per stream.
      subject: `stream:${stream.id}`,
      body: JSON.stringify(claims),
    })),
    transmitter.options.maxPending,
    Date.now(),
  );
  for (const subscription of dropped) {
    const entry = entries.find(({ stream }) => streamSubscription(stream.id) === subscription);
    const stream = subscription.slice(SSF_SUBSCRIPTION_PREFIX.length);
    emitOn(transmitter.provider, SSF_DROPPED, { stream, jti: entry?.claims['jti'] });
  }
  transmitter.wake();
}
