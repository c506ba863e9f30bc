import { createHmac } from 'node:crypto';

/**
 * The Standard Webhooks signature: HMAC-SHA256 over `<id>.<timestamp>.<body>`
 * with the secret's bytes, as `v1,<base64>`. The timestamp is the attempt's,
 * in seconds, so that a receiver can refuse a replay of an old delivery.
 */
export function webhookHeaders(
  key: Buffer,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  const signature = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}
