/**
 * One of several provider processes acting as one deployment behind a load
 * balancer: same issuer, same signing keys, one Redis under one key prefix.
 * Started by multi-process.test.ts; prints `PORT <n>` once it listens, and
 * exits when its parent closes stdin (so it never outlives the test run).
 */
import type { JWK } from 'jose';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import { REDIS_URL } from '../support/adapter.js';
import { serveUntilParentLeaves } from '../support/children.js';
import { startProvider } from '../support/provider.js';

const issuer = required('ISSUER');
const keyPrefix = required('KEY_PREFIX');
const jwks = JSON.parse(required('JWKS')) as { keys: JWK[] };

const Adapter = createRedisAdapter({ url: REDIS_URL, keyPrefix });
const tp = await startProvider({ adapter: Adapter, issuer, configuration: { jwks } });
process.stdout.write(`PORT ${new URL(tp.base).port}\n`);

serveUntilParentLeaves(async () => {
  await tp.close();
  await Adapter.disconnect();
});

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`server-process: ${name} is required`);
  return value;
}
