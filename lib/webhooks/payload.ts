import type { ImpersonationEvent } from '../event-types.js';
import type { JsonObject } from '../json.js';
import type { WebhookEventName } from './options.js';

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
  for (const field of DATA_FIELDS) {
    const value = event[field];
    if (value !== undefined) data[field] = value;
  }
  if (typeof data['expiresAt'] === 'number') data['expiresAt'] = new Date(data['expiresAt'] * 1000).toISOString();
  return { type: event.name, timestamp: at.toISOString(), data };
}
