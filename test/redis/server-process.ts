/**
 * One of several provider processes acting as one deployment behind a load
 * balancer: same issuer, same signing keys, one Redis under one key prefix.
 * With REDIS_CLUSTER_NODES (host:port,...), the Redis is a cluster, and
 * REDIS_REPLICAS makes every write wait for that many replicas.
 * Started by support/multi-process.ts; prints `PORT <n>` once it listens, and
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

const clusterNodes = process.env['REDIS_CLUSTER_NODES']?.split(',').map((node) => {
  const [host, port] = node.split(':');
  return { host: host!, port: Number(port) };
});
const replicas = Number(process.env['REDIS_REPLICAS'] ?? 0);
// The cluster's client is the adapter's own, opened from the nodes as a deployment would.
const Adapter = clusterNodes
  ? createRedisAdapter({ cluster: clusterNodes, keyPrefix, replicas })
  : createRedisAdapter({ url: REDIS_URL, keyPrefix, replicas });
const tp = await startProvider({ adapter: Adapter, issuer, configuration: { jwks } });
process.stdout.write(`PORT ${new URL(tp.base).port}\n`);

serveUntilParentLeaves(async () => {
  await tp.close();
  await Adapter.close();
});

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`server-process: ${name} is required`);
  return value;
}
