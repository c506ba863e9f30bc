/**
 * `node build/bench/scale-out.js`: one and then two provider processes on one
 * shared store, and what the store pays per exchange.
 *
 *   node build/bench/scale-out.js [--duration S] [--connections C] [--stores redis,postgres,memory+pg-audit]
 *
 * Each provider is set up as a deployment runs it (bench/deployment.ts) and
 * serves the exchange with an opaque actor token at `connections` connections
 * of its own, all processes at once. The store's CPU is read around each
 * window: Redis's own account (INFO cpu), PostgreSQL's processes from /proc
 * (as the PostgreSQL adapter's store, or as the audit log beside memory). One
 * Redis runs commands on one core, so `1 s ÷ Redis CPU per exchange` is the
 * most exchanges per second it can serve; divided by what one provider serves,
 * it is how many providers one Redis carries before it, not they, is the
 * bottleneck. PostgreSQL spreads over its cores, but every audited exchange
 * appends to one chain whose head is taken in turn: its bound is the lower of
 * its CPU and of that serialised append.
 *
 * On a 2-core machine two providers, the load generator and the store share
 * the same cores, so the second process cannot add throughput: the figures
 * that carry over to a deployment are the store's costs per exchange.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Redis } from 'ioredis';
import pg from 'pg';
import { basic, m2mToken, userAccessToken } from '../fixtures/flows.js';
import { ACCESS_TOKEN, API, CLIENTS, TOKEN_EXCHANGE, type FixtureProvider } from '../fixtures/provider.js';
import { fire, type RequestSpec, type RunRecord } from './load.js';
import type { AdapterKind } from './protocol.js';
import { startServer, type ServerProcess } from './server-process.js';

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index >= 0 ? process.argv[index + 1] : undefined;
}
const duration = Number(argument('--duration') ?? 5);
const connections = Number(argument('--connections') ?? 16);
const stores = (argument('--stores') ?? 'redis,postgres,memory+pg-audit').split(',') as AdapterKind[];
/** More subject tokens than the fastest process could redeem in a window. */
const TOKENS_PER_SECOND = 3000;

interface Measurement {
  store: AdapterKind;
  processes: number;
  exchangesPerSecond: number;
  baselinePerSecond: number;
  /** Store CPU seconds per exchange (and per baseline request, which touches no store). */
  storeCpuPerExchange: number;
  failed: number;
}

/** CPU seconds the store has used so far. */
async function storeCpuSeconds(store: AdapterKind, redis: Redis): Promise<number> {
  if (store === 'redis') {
    const info = await redis.info('cpu');
    const value = (name: string): number => Number(new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1] ?? Number.NaN);
    return value('used_cpu_user') + value('used_cpu_sys');
  }
  // PostgreSQL: every process whose command is postgres (the backends, the WAL writer, the checkpointer).
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process ended meanwhile.
    }
  }
  return ticks / 100;
}

function form(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}

async function prepare(server: ServerProcess): Promise<{ exchange: RequestSpec; baseline: RequestSpec }> {
  const tp = { base: server.base } as FixtureProvider;
  const actor = await userAccessToken(tp, 'alice');
  const m2m = await m2mToken(tp);
  const tokens: string[] = [];
  const created = await fire({
    base: server.base,
    connections: 16,
    amount: TOKENS_PER_SECOND * duration,
    requests: [
      {
        method: 'POST',
        path: '/api/subject-tokens',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${m2m}` },
        body: JSON.stringify({ userId: 'bob', context: { ticketId: 'T-4711', reason: 'checkout fails' } }),
        onResponse(status: number, body: string) {
          if (status === 201) tokens.push((JSON.parse(body) as { subjectToken: string }).subjectToken);
        },
      } as RequestSpec,
    ],
  });
  if (created.non2xx || created.errors)
    throw new Error(`subject-token creation failed: ${JSON.stringify(created.statuses)}`);
  const fixed = form({
    grant_type: TOKEN_EXCHANGE,
    client_id: CLIENTS.console.client_id,
    subject_token_type: ACCESS_TOKEN,
    resource: API,
    scope: 'profile:read',
    actor_token: actor,
    actor_token_type: ACCESS_TOKEN,
  });
  let next = 0;
  return {
    exchange: {
      method: 'POST',
      path: '/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      setupRequest(request) {
        request.body = `${fixed}&subject_token=${tokens[next++] ?? 'ist_unknown'}`;
        return request;
      },
    },
    baseline: {
      method: 'POST',
      path: '/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.noScopeBackend) },
      body: form({ grant_type: 'client_credentials', resource: API, scope: 'profile:read' }),
      setupRequest: (request: RequestSpec) => request,
    },
  };
}

async function measure(store: AdapterKind, processes: number, redis: Redis, schema: string): Promise<Measurement> {
  const prefix = `bench:scale:${randomUUID()}:`;
  const servers = await Promise.all(
    Array.from({ length: processes }, () =>
      startServer({
        adapter: store,
        deployment: true,
        redisUrl: REDIS_URL,
        redisPrefix: prefix,
        log: () => {},
        ...(store === 'postgres' ? { storeSchema: schema } : { auditSchema: schema }),
      }),
    ),
  );
  try {
    const requests = await Promise.all(servers.map(prepare));
    const window = async (pick: 'exchange' | 'baseline'): Promise<{ runs: RunRecord[]; cpu: number }> => {
      await Promise.all(servers.map((server) => server.settle()));
      const before = await storeCpuSeconds(store, redis);
      const runs = await Promise.all(
        servers.map((server, index) =>
          fire({
            base: server.base,
            connections,
            duration,
            requests: [requests[index]![pick]],
          }),
        ),
      );
      return { runs, cpu: (await storeCpuSeconds(store, redis)) - before };
    };
    const baseline = await window('baseline');
    const exchange = await window('exchange');
    const rate = (runs: RunRecord[]): number => runs.reduce((sum, run) => sum + run.ok / run.seconds, 0);
    const exchanges = exchange.runs.reduce((sum, run) => sum + run.ok, 0);
    return {
      store,
      processes,
      exchangesPerSecond: rate(exchange.runs),
      baselinePerSecond: rate(baseline.runs),
      storeCpuPerExchange: exchange.cpu / exchanges,
      failed: [...exchange.runs, ...baseline.runs].reduce((sum, run) => sum + run.non2xx + run.errors, 0),
    };
  } finally {
    await Promise.all(servers.map((server) => server.close()));
    if (store === 'redis') {
      let cursor = '0';
      do {
        const [nextCursor, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        if (keys.length) await redis.del(...keys);
        cursor = nextCursor;
      } while (cursor !== '0');
    }
  }
}

async function main(): Promise<void> {
  console.log(
    `scale-out: ${new Date().toISOString()}, node ${process.version}, ${availableParallelism()} cores, ` +
      `${duration} s windows, ${connections} connections per process, providers set up as a deployment`,
  );
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const database = new pg.Client({ connectionString: DATABASE_URL });
  await database.connect();
  const measurements: Measurement[] = [];
  try {
    for (const store of stores) {
      for (const processes of [1, 2]) {
        const schema = `bench_scale_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
        await database.query(`CREATE SCHEMA "${schema}"`);
        try {
          const measured = await measure(store, processes, redis, schema);
          measurements.push(measured);
          console.log(
            `  ${store}, ${processes} process(es): ${measured.exchangesPerSecond.toFixed(0)} exchanges/s, ` +
              `baseline ${measured.baselinePerSecond.toFixed(0)}/s, store CPU ${(measured.storeCpuPerExchange * 1e6).toFixed(0)} µs per exchange`,
          );
        } finally {
          await database.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        }
      }
    }
  } finally {
    redis.disconnect();
    await database.end();
  }

  console.log('');
  console.log(
    '| store | provider processes | exchanges/s (all processes) | client_credentials/s (all processes) | store CPU µs per exchange | exchanges/s one store core carries | providers one store core carries |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  const single = (store: AdapterKind) => measurements.find((m) => m.store === store && m.processes === 1);
  for (const m of measurements) {
    const perCore = 1 / m.storeCpuPerExchange;
    const perProvider = single(m.store)?.exchangesPerSecond ?? m.exchangesPerSecond / m.processes;
    console.log(
      `| ${m.store} | ${m.processes} | ${m.exchangesPerSecond.toFixed(0)} | ${m.baselinePerSecond.toFixed(0)} | ` +
        `${(m.storeCpuPerExchange * 1e6).toFixed(0)} | ${perCore.toFixed(0)} | ${(perCore / perProvider).toFixed(1)} |`,
    );
  }
  const failed = measurements.reduce((sum, m) => sum + m.failed, 0);
  if (failed) {
    console.error(`ERROR: ${failed} requests failed`);
    process.exitCode = 1;
  }
}

try {
  await main();
} catch (error) {
  console.error('scale-out failed:', error);
  process.exitCode = 1;
}
