import { KIND, markError, type Telemetry } from './telemetry.js';

/** One client span per outbox delivery, and once delivered the time since the entry was appended. Without telemetry, `run()`. */
export function tracedDelivery<T extends { settlement: { outcome: string; reason?: string } } | undefined>(
  telemetry: Telemetry | undefined,
  entry: { subscription: string; attempts: number; createdAt: number; body: string },
  run: () => Promise<T>,
): Promise<T> {
  if (!telemetry) return run();
  const kind = entry.subscription.startsWith('ssf:') ? 'ssf' : 'webhook';
  const attributes = {
    'impersonation.delivery.kind': kind,
    'impersonation.delivery.subscription': entry.subscription,
    'impersonation.delivery.attempt': entry.attempts,
  };
  return telemetry.inSpan('impersonation.outbox.deliver', KIND.client, attributes, async (span) => {
    const settled = await run();
    if (!settled) return settled;
    const { outcome, reason } = settled.settlement;
    span.setAttribute('impersonation.outcome', outcome);
    if (outcome === 'dead') markError(span, reason ?? 'dead');
    if (outcome === 'delivered') {
      telemetry.metrics.deliveryDelay.record((Date.now() - entry.createdAt) / 1000, {
        'impersonation.delivery.kind': kind,
        'impersonation.event': eventOf(kind, entry.body),
      });
    }
    return settled;
  });
}

/** The event an entry carries (a webhook's `type`, a SET's first event URI); never a value of it. */
function eventOf(kind: 'ssf' | 'webhook', body: string): string {
  try {
    const parsed = JSON.parse(body) as { type?: unknown; events?: Record<string, unknown> };
    const event = kind === 'webhook' ? parsed.type : Object.keys(parsed.events ?? {})[0];
    return typeof event === 'string' ? event : 'unknown';
  } catch {
    return 'unknown';
  }
}
