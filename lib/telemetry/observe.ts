import type { Attributes, ObservableResult } from '@opentelemetry/api';
import type { Telemetry } from './telemetry.js';

/** The event names read here (lib/audit/events.ts): the sessions this instance issued, and their ends. */
const ISSUED = ['impersonation.exchange.succeeded', 'impersonation.delegation.succeeded'];
const ENDED = ['impersonation.session.revoked', 'impersonation.session.ended'];

/** Sessions counted at most, per createImpersonation(): past it, new ones are not counted (the gauge reads low, never grows memory). */
const MAX_COUNTED = 100_000;

interface OutboxStats {
  subscriptions: Record<string, { pending: number; dead: number; dropped: number }>;
  oldest: Record<string, number>;
}

/** The gauges of one provider: sessions this instance issued, and the store's outbox backlog, from one stats read per collection. */
export function observeProvider(
  telemetry: Telemetry | undefined,
  provider: NodeJS.EventEmitter,
  outbox: () => { stats(): Promise<OutboxStats> } | undefined,
): void {
  if (!telemetry) return;
  const expiries = telemetry.sessions;
  for (const name of ISSUED) {
    provider.on(name, (event: { sessionId?: unknown; expiresAt?: unknown }) => {
      if (typeof event.sessionId !== 'string' || typeof event.expiresAt !== 'number') return;
      // Nothing kept for a gauge nobody reads: counted from the time an SDK (or the option's provider) is in force.
      if (expiries.size < MAX_COUNTED && telemetry.metered) expiries.set(event.sessionId, event.expiresAt * 1000);
    });
  }
  for (const name of ENDED) {
    provider.on(name, (event: { sessionId?: unknown }) => {
      if (typeof event.sessionId === 'string') expiries.delete(event.sessionId);
    });
  }
  // The SDK calls a collection's callbacks together: the second finds the first one's read in flight and shares it.
  let reading: Promise<OutboxStats | undefined> | undefined;
  const readStats = (): Promise<OutboxStats | undefined> =>
    // The store did not answer: no figure this time, rather than a false zero.
    (reading ??= (async () => outbox()?.stats())()
      .catch(() => undefined)
      .finally(() => {
        reading = undefined;
      }));
  telemetry.observe('outboxBacklog', async (result: ObservableResult) => {
    const stats = await readStats();
    if (!stats) return;
    // Each webhook is listed (outboxView), at zero when the store holds nothing of it; SSF streams are one series.
    for (const state of ['pending', 'dead'] as const) {
      const counts = new Map<string, number>();
      for (const [subscription, held] of Object.entries(stats.subscriptions)) {
        counts.set(seriesOf(subscription), (counts.get(seriesOf(subscription)) ?? 0) + held[state]);
      }
      for (const [subscription, count] of counts) {
        result.observe(count, { 'impersonation.delivery.subscription': subscription, 'impersonation.state': state });
      }
    }
  });
  telemetry.observe('outboxOldestAge', async (result: ObservableResult) => {
    const stats = await readStats();
    if (!stats) return;
    const now = Date.now();
    const oldest = new Map<string, number>();
    for (const subscription of [...Object.keys(stats.subscriptions), ...Object.keys(stats.oldest)]) {
      const series = seriesOf(subscription);
      oldest.set(series, Math.min(oldest.get(series) ?? now, stats.oldest[subscription] ?? now));
    }
    for (const [subscription, at] of oldest) {
      result.observe(Math.max(0, now - at) / 1000, { 'impersonation.delivery.subscription': subscription });
    }
  });
}

/** A subscription's series: a webhook's own (the deployment names them), one for every SSF stream (receivers create them). */
function seriesOf(subscription: string): string {
  return subscription.startsWith('ssf:') ? 'ssf' : subscription;
}

/** The appends' attribute sets, built once: an append records one, it builds none. */
const APPENDED = Object.freeze({ 'impersonation.outcome': 'appended' });
const FAILED = Object.freeze({ 'impersonation.outcome': 'failed' });

interface Appender {
  append(...args: never[]): Promise<void>;
}

/** The audit trail with each append timed. */
export function timedTrail<Sink extends Appender>(telemetry: Telemetry, sink: Sink): Sink {
  const append = async (...args: never[]): Promise<void> => {
    const started = performance.now();
    let outcome: Attributes = APPENDED;
    try {
      await sink.append(...args);
    } catch (error) {
      outcome = FAILED;
      throw error;
    } finally {
      telemetry.metrics.trailAppend.record((performance.now() - started) / 1000, outcome);
    }
  };
  return new Proxy(sink, {
    get(target, key) {
      if (key === 'append') return append;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
