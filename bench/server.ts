/**
 * The provider under load, in a process of its own (started by bench/run.ts
 * with fork()): the provider the tests run too (fixtures/provider.ts), with
 * the plugin, on 127.0.0.1 and a free port, on the adapter BENCH_ADAPTER names.
 *
 *   BENCH_ADAPTER  memory (default) | redis | postgres (the PostgreSQL adapter, its tables in schema
 *                  BENCH_STORE_SCHEMA of DATABASE_URL) | memory+pg-audit (memory, and the PostgreSQL
 *                  audit log in schema BENCH_AUDIT_SCHEMA of DATABASE_URL) | postgres+pg-audit (both, in
 *                  BENCH_STORE_SCHEMA, on one pool: the exchange's row is written by its commit)
 *   REDIS_URL      default redis://127.0.0.1:6379
 *   BENCH_PREFIX   Redis key prefix (run.ts passes a unique one and deletes its keys afterwards)
 *   BENCH_DEPLOYMENT  1: the provider as a deployment runs it (bench/deployment.ts)
 *   BENCH_STANDING_GRANT  1: the customer's approval required, a standing grant given at start-up
 *                  (bench/standing-grant.ts)
 *   BENCH_MEMORY_MAX  the memory adapter's bound (default 1,000,000 entries)
 *   BENCH_WEBHOOK_URL  a webhook subscription to every webhook event, delivered there (bench/webhook-receiver.ts),
 *                      and an SSF stream in place (bench/ssf-stream.ts)
 *   BENCH_DELIVER_OUTBOX=0  with it: this process delivers nothing (another on the store does)
 *   BENCH_SSF_STREAM=0      with it: this process creates no stream (the one measured does)
 *
 * Started by hand (`node build/bench/server.js`) it prints its base URL; under
 * fork() it also reports it over IPC, answers `stats` (CPU time, memory, the
 * memory adapter's size and evictions, the webhooks' outbox) and exits on `close`.
 */
import { telemetryOption, type TelemetrySetup } from './telemetry.js';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import {
  createMemoryAdapter,
  WEBHOOK_EVENTS,
  type MemoryAdapterClass,
  type WebhookDelivery,
  type WebhookOptions,
} from '../lib/index.js';
import { createRedisAdapter, type RedisAdapterClass } from '../lib/adapters/redis.js';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createPostgresAdapter, POSTGRES_POOL_OPTIONS, type PostgresAdapterClass } from '../lib/adapters/postgres.js';
import { createPostgresAuditLog } from '../lib/audit-postgres/index.js';
import { CLIENTS, FIXTURE_CLIENTS, resourceServerInfo, startProvider, USERS } from '../fixtures/provider.js';
import { contextClaims, deploymentSetup } from './deployment.js';
import {
  memoryStore,
  minimalConfiguration,
  minimalSeedRoute,
  postgresStore,
  redisStore,
  registerMinimalGrant,
  type MinimalStore,
} from './minimal-grant.js';
import { ssfStreamSetup } from './ssf-stream.js';
import { standingGrantSetup } from './standing-grant.js';
import { readStat } from './proc-stat.js';
import type { ParentMessage, ServerMessage, ServerStats } from './protocol.js';
import { isCustomer } from './requests.js';
import { serviceUrls } from './stores.js';

/** What the environment tells the provider process, read when it starts. */
interface ServerSettings {
  /** The adapter: `memory+pg-audit` runs on memory, `postgres+pg-audit` on PostgreSQL. */
  kind: 'memory' | 'redis' | 'postgres';
  /** The PostgreSQL audit log's schema, for `memory+pg-audit` and `postgres+pg-audit`. */
  auditSchema: string | undefined;
  storeSchema: string | undefined;
  redisUrl: string;
  redisPrefix: string;
  databaseUrl: string;
  memoryMax: number;
  deployment: boolean;
  webhookUrl: string | undefined;
  /** With a webhook subscription: whether this process delivers the outbox (false: another process on the store does). */
  deliverOutbox: boolean;
  /** With a webhook subscription: whether this process creates the SSF stream (the process measured does). */
  createStream: boolean;
  standingGrant: boolean;
}

function serverSettings(env: NodeJS.ProcessEnv): ServerSettings {
  const adapter = env['BENCH_ADAPTER'];
  return {
    kind:
      adapter === 'redis' || adapter === 'postgres' ? adapter : adapter === 'postgres+pg-audit' ? 'postgres' : 'memory',
    auditSchema:
      adapter === 'memory+pg-audit' || adapter === 'postgres+pg-audit' ? env['BENCH_AUDIT_SCHEMA']! : undefined,
    storeSchema: env['BENCH_STORE_SCHEMA'],
    redisPrefix: env['BENCH_PREFIX'] ?? `bench:${process.pid}:`,
    ...serviceUrls(env),
    memoryMax: Number(env['BENCH_MEMORY_MAX'] ?? 1_000_000),
    deployment: env['BENCH_DEPLOYMENT'] === '1',
    webhookUrl: env['BENCH_WEBHOOK_URL'],
    deliverOutbox: env['BENCH_DELIVER_OUTBOX'] !== '0',
    createStream: env['BENCH_SSF_STREAM'] !== '0',
    standingGrant: env['BENCH_STANDING_GRANT'] === '1',
  };
}

/** The provider's adapter. */
interface Store {
  adapter: MemoryAdapterClass | RedisAdapterClass | PostgresAdapterClass;
  /** The memory adapter, whose size and evictions `stats` reports. */
  memory: MemoryAdapterClass | undefined;
  /** Evictions per model, counted by the memory adapter's onEvict. */
  evicted: Record<string, number>;
  /** The PostgreSQL store's pool, when the audit log shares it. */
  pool?: pg.Pool | undefined;
  close(): Promise<void>;
}

async function openStore(settings: ServerSettings): Promise<Store> {
  const evicted: Record<string, number> = {};
  if (settings.kind === 'postgres') {
    // With the audit log, one pool for both: the exchange's row then goes in its commit.
    const pool = settings.auditSchema
      ? new pg.Pool({ connectionString: settings.databaseUrl, ...POSTGRES_POOL_OPTIONS })
      : undefined;
    const postgres = createPostgresAdapter({
      ...(pool ? { pool } : { connectionString: settings.databaseUrl }),
      schema: settings.storeSchema!,
    });
    // As a deployment starts: the tables exist before the first request.
    await postgres.migrate();
    return {
      adapter: postgres,
      memory: undefined,
      evicted,
      pool,
      close: async () => {
        await postgres.close();
        await pool?.end();
      },
    };
  }
  if (settings.kind === 'redis') {
    const redis = createRedisAdapter({ url: settings.redisUrl, keyPrefix: settings.redisPrefix });
    return { adapter: redis, memory: undefined, evicted, close: () => redis.close() };
  }
  // A full run creates some 150,000 subject tokens, each kept 6 minutes (60 s and a
  // 5-minute tombstone): above the default bound of 100,000, which would evict live
  // ones and fail their exchanges. bench/memory.ts measures the bound itself.
  const memory = createMemoryAdapter({
    max: settings.memoryMax,
    onEvict: (model) => {
      evicted[model] = (evicted[model] ?? 0) + 1;
    },
  });
  return { adapter: memory, memory, evicted, close: async () => {} };
}

/** The minimal grant's store (bench/minimal-grant.ts): of the provider's kind, with a connection of its own. */
async function openMinimalStore(settings: ServerSettings): Promise<{ store: MinimalStore; close(): Promise<void> }> {
  if (settings.kind === 'redis') {
    const redis = new Redis(settings.redisUrl, { keyPrefix: `${settings.redisPrefix}minimal:` });
    return { store: redisStore(redis), close: async () => void (await redis.quit()) };
  }
  if (settings.kind === 'postgres') {
    const pool = new pg.Pool({ connectionString: settings.databaseUrl, ...POSTGRES_POOL_OPTIONS });
    return { store: await postgresStore(pool, settings.storeSchema!), close: () => pool.end() };
  }
  return { store: memoryStore(), close: async () => {} };
}

/**
 * One subscription to every webhook event. Polled every 100 ms rather than
 * the default second, so that what a window enqueues is delivered within it,
 * not in the untimed pause after it (under load the loop claims batch after
 * batch whatever the interval).
 */
function webhookSubscription(url: string): WebhookOptions {
  return {
    subscriptions: [
      { id: 'bench', url, events: [...WEBHOOK_EVENTS], secret: `whsec_${randomBytes(32).toString('base64')}` },
    ],
    pollInterval: 100,
  };
}

/** How long `settle` waits for the outbox to empty before it gives up waiting. */
const DRAIN_TIMEOUT_MS = 5000;

/** Resolves once nothing waits in the outbox, or after DRAIN_TIMEOUT_MS. */
async function drained(webhooks: WebhookDelivery): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const { subscriptions } = await webhooks.stats();
    if (Object.values(subscriptions).every(({ pending }) => pending === 0)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function send(message: ServerMessage): void {
  process.send?.(message);
}

/**
 * CPU seconds of the main thread and of V8's helpers. libuv names its pool
 * threads `libuv-worker` (where jose's WebCrypto signatures run; their share
 * is what process.cpuUsage() leaves); the other threads are V8's platform
 * workers (concurrent GC and JIT compilation) and Node's own. Where the pool's
 * threads have no name, V8's part is null.
 */
function threadCpu(): ServerStats['threads'] {
  try {
    const threads = { main: 0, v8: 0 };
    let poolNamed = false;
    for (const tid of readdirSync('/proc/self/task')) {
      const { name, cpuSeconds: seconds } = readStat(`/proc/self/task/${tid}/stat`);
      if (Number(tid) === process.pid) threads.main += seconds;
      else if (name === 'libuv-worker') poolNamed = true;
      else threads.v8 += seconds;
    }
    // libuv names its threads from 1.48 on (Node 22); before that the pool cannot be told apart.
    return poolNamed ? threads : { ...threads, v8: null };
  } catch {
    return null;
  }
}

/** Answers the parent's requests: stats, settle, and the CPU profiler's start and stop. */
function answerer(
  store: Store,
  webhooks: WebhookDelivery | undefined,
): (message: Exclude<ParentMessage, { type: 'close' }>) => Promise<void> {
  let profiler: Session | undefined;
  return async (message) => {
    switch (message.type) {
      case 'stats':
        send({
          type: 'reply',
          id: message.id,
          stats: {
            cpu: process.cpuUsage(),
            threads: threadCpu(),
            heapUsed: process.memoryUsage().heapUsed,
            adapter: store.memory ? { ...store.memory.stats(), onEvict: { ...store.evicted } } : null,
            webhooks: webhooks ? ((await webhooks.stats()).subscriptions['bench'] ?? null) : null,
          },
        });
        return;
      case 'settle':
        // What the last window enqueued is delivered before the next window starts.
        if (webhooks) await drained(webhooks);
        // Started with --expose-gc by bench/server-process.ts. A scavenge, not a
        // full GC: after a full GC of the idle provider, V8 compiled the hot
        // functions again in every window (--trace-opt: some 200 per window against
        // 3 to 30 after a scavenge), which cost up to a second of its helper
        // threads per 3-second window on 2 cores, and more to the scenarios with
        // more code in their path.
        (globalThis as { gc?: (options: { type: 'minor'; execution: 'sync' }) => void }).gc?.({
          type: 'minor',
          execution: 'sync',
        });
        send({ type: 'reply', id: message.id });
        return;
      case 'profile-start':
        if (!profiler) {
          profiler = new Session();
          profiler.connect();
          await profiler.post('Profiler.enable');
        }
        await profiler.post('Profiler.start');
        send({ type: 'reply', id: message.id });
        return;
      case 'profile-stop': {
        if (!profiler) throw new Error('the profiler was not started');
        const { profile } = await profiler.post('Profiler.stop');
        await writeFile(message.file, JSON.stringify(profile));
        send({ type: 'reply', id: message.id });
      }
    }
  };
}

async function main(env: NodeJS.ProcessEnv): Promise<void> {
  const settings = serverSettings(env);
  const store = await openStore(settings);
  const auditLog = settings.auditSchema
    ? createPostgresAuditLog({
        ...(store.pool ? { pool: store.pool } : { connectionString: settings.databaseUrl }),
        schema: settings.auditSchema,
      })
    : undefined;
  const deployment = settings.deployment ? deploymentSetup() : undefined;
  const standingGrant = settings.standingGrant ? standingGrantSetup() : undefined;
  // With the webhook subscription, an SSF stream is in place too.
  const ssf = settings.webhookUrl ? ssfStreamSetup() : undefined;
  const plugin = {
    // The load comes from one Management API client: its share of subject tokens at the maximum.
    maxSubjectTokensPerClient: 1_000_000,
    ...deployment?.plugin,
    ...standingGrant?.plugin,
    ...ssf?.plugin,
    ...(auditLog ? { auditLog } : {}),
    ...telemetryOption(env['BENCH_TELEMETRY'] as TelemetrySetup | undefined),
    ...(settings.webhookUrl
      ? { webhooks: webhookSubscription(settings.webhookUrl), deliverOutbox: settings.deliverOutbox }
      : {}),
  };
  // The fixture's users (alice signs in as the actor) and the customers the subject tokens are created for.
  const findAccount = (_ctx: unknown, sub: string) =>
    USERS.includes(sub) || isCustomer(sub) ? { accountId: sub, claims: () => ({ sub, name: sub }) } : undefined;
  const minimal = await openMinimalStore(settings);
  const tp = await startProvider({
    adapter: store.adapter,
    configuration: {
      findAccount,
      // The support console may also use the minimal grant, the exchange's bound (bench/minimal-grant.ts).
      ...minimalConfiguration([...FIXTURE_CLIENTS, ...(ssf?.clients ?? [])], CLIENTS.console.client_id),
    },
    plugin,
    // The minimal grant's subject tokens are created through a route of the bench's own, beside the plugin's.
    mount: (provider, install) => {
      install();
      provider.use(minimalSeedRoute(minimal.store));
    },
  });
  tp.server.on('request', tp.provider.callback());
  registerMinimalGrant(tp.provider, {
    store: minimal.store,
    findAccount,
    getResourceServerInfo: resourceServerInfo,
    // As a deployment, with the deployment's claims and its audit line.
    claims: deployment && contextClaims,
    audit: deployment?.write,
  });
  deployment?.listen(tp.provider);
  await standingGrant?.give(tp, plugin);
  if (settings.createStream) await ssf?.open(tp);

  const shutdown = async (): Promise<void> => {
    await tp.close();
    await store.close();
    await minimal.close();
    await auditLog?.close();
    await deployment?.close();
    // Exiting (not being killed) lets --cpu-prof write its profile.
    process.exit(0);
  };
  const answer = answerer(store, settings.webhookUrl ? tp.impersonation.webhooks() : undefined);
  process.on('message', (message: ParentMessage) => {
    if (message.type === 'close') {
      void shutdown();
      return;
    }
    answer(message).catch((error: unknown) => {
      send({ type: 'reply', id: message.id, error: String(error) });
    });
  });
  // The parent went away without saying so: do not linger.
  process.on('disconnect', () => {
    void shutdown();
  });
  process.on('SIGTERM', () => {
    void shutdown();
  });

  console.log(`bench server (${settings.kind} adapter) listening on ${tp.base}`);
  send({ type: 'ready', base: tp.base, adapter: settings.kind, pid: process.pid });
}

await main(process.env);
