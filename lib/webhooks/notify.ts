import { randomUUID } from 'node:crypto';
import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import type { ImpersonationEvent } from '../audit/events.js';
import type { NewOutboxEntry, OutboxStore } from '../outbox/contract.js';
import type { ResolvedWebhookOptions, WebhookEventName } from './options.js';
import { webhookPayload } from './payload.js';

/** Emitted on the provider when the bound made an entry be dropped: `{ subscription, type }`. */
export const WEBHOOK_DROPPED = 'impersonation.webhook.dropped';

interface Notifier {
  outbox: OutboxStore;
  options: ResolvedWebhookOptions;
  /** Per event name, the subscriptions that receive it. */
  receivers: ReadonlyMap<string, readonly string[]>;
}

const notifiers = new WeakMap<object, Notifier>();

export function attachNotifier(provider: Provider, outbox: OutboxStore, options: ResolvedWebhookOptions): void {
  const receivers = new Map<string, string[]>();
  for (const subscription of options.subscriptions) {
    for (const name of subscription.events) receivers.set(name, [...(receivers.get(name) ?? []), subscription.id]);
  }
  notifiers.set(provider, { outbox, options, receivers });
}

/**
 * The one way an event reaches the outbox: appends one entry per
 * subscription that receives the event's name, and nothing when none does
 * (or the provider has no webhooks). Rejects when the store fails: callers
 * decide whether the state change may stand without its notification.
 */
export async function notify(provider: Provider, event: ImpersonationEvent): Promise<void> {
  await notifyWith(provider, event);
}

/**
 * For a change that stands whether or not its notification can be enqueued
 * (a stop, a customer's answer): a failure is reported as the trail's is, on
 * the provider's `error` event.
 */
export async function notifyOrReport(
  provider: Provider,
  event: ImpersonationEvent,
  ctx: Koa.Context | undefined,
): Promise<void> {
  await notifyWith(provider, event).catch((error: unknown) => {
    (provider as unknown as NodeJS.EventEmitter).emit('error', error, ctx);
  });
}

async function notifyWith(provider: Provider, event: ImpersonationEvent): Promise<void> {
  const notification = notificationOf(provider, event);
  if (!notification) return;
  const { entries, maxPending, now } = notification;
  notification.dropped(await notifiers.get(provider)!.outbox.append(entries, maxPending, now));
}

/** An event's outbox entries, to append in a store operation of the caller's (the exchange's commit). */
export interface Notification {
  entries: NewOutboxEntry[];
  maxPending: number;
  now: number;
  /** Reports the subscriptions whose entry the bound dropped. */
  dropped(subscriptions: readonly string[]): void;
}

/** The entries `notify` would append for `event`, or undefined when no subscription receives it. */
export function notificationOf(provider: Provider, event: ImpersonationEvent): Notification | undefined {
  const notifier = notifiers.get(provider);
  const subscriptions = notifier?.receivers.get(event.name);
  if (!notifier || !subscriptions?.length || event.subject === undefined) return undefined;
  const now = new Date();
  const id = `msg_${randomUUID()}`;
  const body = JSON.stringify(webhookPayload(event as ImpersonationEvent<WebhookEventName>, now));
  const subject = event.subject;
  return {
    entries: subscriptions.map((subscription) => ({ id, subscription, subject, body })),
    maxPending: notifier.options.maxPending,
    now: now.getTime(),
    dropped(dropped) {
      for (const subscription of dropped) {
        (provider as unknown as NodeJS.EventEmitter).emit(
          WEBHOOK_DROPPED,
          Object.freeze({ subscription, type: event.name }),
        );
      }
    },
  };
}
