import { randomUUID } from 'node:crypto';
import type { EventSubscriber } from '../events/subscriber.js';
import type { ImpersonationEvent } from '../event-types.js';
import type { JsonObject, JsonValue } from '../json.js';
import type { NewOutboxEntry, OutboxStore } from '../outbox/contract.js';
import { emitOn } from '../report-error.js';
import type { ResolvedWebhookOptions, WebhookEventName } from './options.js';

/** What a webhook says of an event: never a token value nor the access token's id, only what can be revoked. */
const DATA_FIELDS = [
  'sessionId',
  'subjectTokenId',
  'subject',
  'actor',
  'clientId',
  'createdBy',
  'resource',
  'scope',
  'context',
  'expiresAt',
  'revokedBy',
  'reason',
  'endReason',
  'accessGrantId',
  'approvalRequestId',
] as const;

export interface WebhookPayload {
  type: WebhookEventName;
  /** When the event happened, ISO 8601. */
  timestamp: string;
  data: JsonObject;
}

export function webhookPayload(event: ImpersonationEvent<WebhookEventName>, at: Date): WebhookPayload {
  const data: JsonObject = {};
  for (const field of DATA_FIELDS) if (event[field] !== undefined) data[field] = event[field] as JsonValue;
  if (typeof data['expiresAt'] === 'number') data['expiresAt'] = new Date(data['expiresAt'] * 1000).toISOString();
  return { type: event.name, timestamp: at.toISOString(), data };
}

/** Emitted on the provider when the bound made an entry be dropped: `{ subscription, type }`. */
export const WEBHOOK_DROPPED = 'impersonation.webhook.dropped';

/** Webhooks as a subscriber of the plugin's events, delegations excepted (docs/webhooks.md); Invariant 45. */
export function webhookSubscriber(
  provider: object,
  outbox: OutboxStore,
  options: ResolvedWebhookOptions,
): EventSubscriber {
  const receivers = new Map<string, string[]>();
  for (const subscription of options.subscriptions) {
    for (const name of subscription.events) receivers.set(name, [...(receivers.get(name) ?? []), subscription.id]);
  }

  /** The entries of an event, or undefined when no subscription receives it. */
  function entriesOf(event: ImpersonationEvent): { entries: NewOutboxEntry[]; now: number } | undefined {
    const subscriptions = receivers.get(event.name);
    if (!subscriptions?.length || event.subject === undefined) return undefined;
    const now = new Date();
    const id = `msg_${randomUUID()}`;
    const body = JSON.stringify(webhookPayload(event as ImpersonationEvent<WebhookEventName>, now));
    const subject = event.subject;
    return { entries: subscriptions.map((subscription) => ({ id, subscription, subject, body })), now: now.getTime() };
  }

  function reportDropped(event: ImpersonationEvent, dropped: readonly string[]): void {
    for (const subscription of dropped) emitOn(provider, WEBHOOK_DROPPED, { subscription, type: event.name });
  }

  return {
    async notice(event, { delegation }) {
      if (delegation) return;
      const notification = entriesOf(event);
      if (!notification) return;
      reportDropped(event, await outbox.append(notification.entries, options.maxPending, notification.now));
    },
    shareCommit(event, _site, delegation) {
      if (delegation) return undefined;
      const notification = entriesOf(event);
      if (!notification) return undefined;
      return {
        outbox: { entries: notification.entries, maxPending: options.maxPending, now: notification.now },
        committed: ({ dropped }) => reportDropped(event, dropped),
      };
    },
  };
}
