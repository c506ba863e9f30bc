import { createHmac } from 'node:crypto';

/** The Standard Webhooks signature `v1,<base64>` of HMAC-SHA256 over `<id>.<timestamp>.<body>`. */
export function webhookHeaders(key: Buffer, id: string, timestampSeconds: number, body: string) {
  const signature = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}
