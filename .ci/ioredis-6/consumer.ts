// The Redis adapter's types against ioredis 6, as a project that installed it compiles them
// (under .ci/tsconfig.strictest.json): its clients fit, a RESP3-mapped one does not.
// Compiled by .ci/consumer-check.sh, never run.
import { Cluster, Redis } from 'ioredis';
import { createImpersonation } from 'oidc-provider-impersonation';
import {
  createRedisAdapter,
  REDIS_CLIENT_OPTIONS,
  REDIS_CLUSTER_OPTIONS,
  type RedisAdapterClass,
} from 'oidc-provider-impersonation/adapters/redis';

const client = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', REDIS_CLIENT_OPTIONS);
const store: RedisAdapterClass = createRedisAdapter({ client, keyPrefix: 'idp-impersonation:' });
createImpersonation({ managementResource: 'https://id.example.com/api', store });

const nodes = [{ host: 'redis-1', port: 6379 }];
createRedisAdapter({ client: new Cluster(nodes, REDIS_CLUSTER_OPTIONS), replicas: 1 });
createRedisAdapter({ cluster: nodes, clusterOptions: { redisOptions: { password: process.env['REDIS_PASSWORD'] } } });

// @ts-expect-error: RESP3-mapped replies (sorted sets with scores as pairs) are not what the adapter reads
createRedisAdapter({ client: new Redis({ protocol: 3, replyMapping: 'resp3' }) });
