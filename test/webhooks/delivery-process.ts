/**
 * One instance delivering webhooks from a shared store, with no provider
 * around it: the multi-instance webhook tests kill it mid-delivery. Prints
 * `PORT 0` once delivery started (children.ts reads it).
 * STORE (redis | postgres), KEY_PREFIX or STORE_SCHEMA and STORE_TABLE, WEBHOOKS (the options as JSON).
 */
import { EventEmitter } from 'node:events';
import type { Provider } from 'oidc-provider';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import { hasOutbox } from '../../lib/outbox/contract.js';
import { resolveWebhookOptions, type WebhookOptions } from '../../lib/webhooks/options.js';
import { startDelivery } from '../../lib/webhooks/worker.js';
import { REDIS_URL } from '../support/adapter.js';
import { serveUntilParentLeaves } from '../support/children.js';
import { DATABASE_URL } from '../support/postgres.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const Adapter =
  env('STORE') === 'redis'
    ? createRedisAdapter({ url: REDIS_URL, keyPrefix: env('KEY_PREFIX') })
    : createPostgresAdapter({ connectionString: DATABASE_URL, schema: env('STORE_SCHEMA'), table: env('STORE_TABLE') });
const adapter = new Adapter('ImpersonationOutbox');
if (!hasOutbox(adapter)) throw new Error('no outbox');
const events = new EventEmitter();
events.on('error', () => {});
const delivery = startDelivery(
  events as unknown as Provider,
  adapter.outbox(),
  resolveWebhookOptions(JSON.parse(env('WEBHOOKS')) as WebhookOptions),
);
// Keeps the process alive: the delivery's own timers do not.
const alive = setInterval(() => {}, 60_000);
console.log('PORT 0');
serveUntilParentLeaves(async () => {
  clearInterval(alive);
  await delivery.stop();
  await Adapter.close();
});
