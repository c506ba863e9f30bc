/**
 * `node build/bench/scale-out.js`: one and then two provider processes on one
 * shared store, and what the store pays per exchange.
 *
 *   node build/bench/scale-out.js [--duration S] [--connections C] [--stores redis,postgres,memory+pg-audit,postgres+pg-audit] [--help]
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
 *
 * The parts it shares with `npm run bench`: stores.ts (each run's key prefix
 * or schema, deleted afterwards), requests.ts and token-pool.ts (what is
 * sent); its own: scale-out-command-line.ts (flags) and store-cpu.ts.
 */
import { availableParallelism } from 'node:os';
import { runCommand } from './command.js';
import { fire, type RequestSpec, type RunRecord } from './load.js';
import type { AdapterKind } from './protocol.js';
import { baselineRequest, creationRequest, exchangeRequest, obtainCredentials, type Credentials } from './requests.js';
import { parseScaleOutSettings, SCALE_OUT_USAGE, type ScaleOutSettings } from './scale-out-command-line.js';
import { startServer, type ServerProcess } from './server-process.js';
import { storeCpu, type StoreCpu } from './store-cpu.js';
import { onStore, type StoreServerOptions } from './stores.js';
import { TokenPool } from './token-pool.js';

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

/** One provider process with what its requests carry. */
interface Provider {
  server: ServerProcess;
  credentials: Credentials;
  pool: TokenPool;
}

/** Subject tokens for one exchange window, created outside it; a failed creation ends the run. */
async function fillPool(provider: Provider, settings: ScaleOutSettings): Promise<void> {
  const created = await fire({
    base: provider.server.base,
    connections: 16,
    amount: TOKENS_PER_SECOND * settings.duration,
    requests: [creationRequest(await provider.credentials.m2m(), provider.pool)],
  });
  if (created.non2xx || created.errors)
    throw new Error(`subject-token creation failed: ${JSON.stringify(created.statuses)}`);
}

/** One window on every provider at once, and the store CPU used meanwhile. */
async function window(
  providers: readonly Provider[],
  settings: ScaleOutSettings,
  cpu: StoreCpu,
  request: (provider: Provider) => RequestSpec,
): Promise<{ runs: RunRecord[]; cpu: number }> {
  await Promise.all(providers.map(({ server }) => server.settle()));
  const before = await cpu.seconds();
  const runs = await Promise.all(
    providers.map((provider) =>
      fire({
        base: provider.server.base,
        connections: settings.connections,
        duration: settings.duration,
        requests: [request(provider)],
      }),
    ),
  );
  return { runs, cpu: (await cpu.seconds()) - before };
}

async function measure(
  store: AdapterKind,
  processes: number,
  settings: ScaleOutSettings,
  storeOptions: StoreServerOptions,
): Promise<Measurement> {
  const servers = await Promise.all(
    Array.from({ length: processes }, () =>
      startServer({ adapter: store, deployment: true, redisUrl: settings.redisUrl, log: () => {}, ...storeOptions }),
    ),
  );
  try {
    const cpu = await storeCpu(store, settings.redisUrl);
    try {
      const providers = await Promise.all(
        servers.map(async (server) => ({
          server,
          credentials: await obtainCredentials(server.base),
          pool: new TokenPool(),
        })),
      );
      const baseline = await window(providers, settings, cpu, () => baselineRequest());
      await Promise.all(providers.map((provider) => fillPool(provider, settings)));
      const exchange = await window(providers, settings, cpu, (provider) =>
        exchangeRequest(provider.credentials.actorToken, provider.pool),
      );
      return measurementOf(store, processes, baseline.runs, exchange);
    } finally {
      cpu.close();
    }
  } finally {
    await Promise.all(servers.map((server) => server.close()));
  }
}

function measurementOf(
  store: AdapterKind,
  processes: number,
  baseline: RunRecord[],
  exchange: { runs: RunRecord[]; cpu: number },
): Measurement {
  const rate = (runs: RunRecord[]): number => runs.reduce((sum, run) => sum + run.ok / run.seconds, 0);
  const exchanges = exchange.runs.reduce((sum, run) => sum + run.ok, 0);
  return {
    store,
    processes,
    exchangesPerSecond: rate(exchange.runs),
    baselinePerSecond: rate(baseline),
    storeCpuPerExchange: exchange.cpu / exchanges,
    failed: [...exchange.runs, ...baseline].reduce((sum, run) => sum + run.non2xx + run.errors, 0),
  };
}

function table(measurements: readonly Measurement[]): string[] {
  const lines = [
    '| store | provider processes | exchanges/s (all processes) | client_credentials/s (all processes) | store CPU µs per exchange | exchanges/s one store core carries | providers one store core carries |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  const single = (store: AdapterKind) => measurements.find((m) => m.store === store && m.processes === 1);
  for (const m of measurements) {
    const perCore = 1 / m.storeCpuPerExchange;
    const perProvider = single(m.store)?.exchangesPerSecond ?? m.exchangesPerSecond / m.processes;
    lines.push(
      `| ${m.store} | ${m.processes} | ${m.exchangesPerSecond.toFixed(0)} | ${m.baselinePerSecond.toFixed(0)} | ` +
        `${(m.storeCpuPerExchange * 1e6).toFixed(0)} | ${perCore.toFixed(0)} | ${(perCore / perProvider).toFixed(1)} |`,
    );
  }
  return lines;
}

async function main(argv: readonly string[]): Promise<string[]> {
  const settings = parseScaleOutSettings(argv);
  if (settings.help) {
    console.log(SCALE_OUT_USAGE);
    return [];
  }
  console.log(
    `scale-out: ${new Date().toISOString()}, node ${process.version}, ${availableParallelism()} cores, ` +
      `${settings.duration} s windows, ${settings.connections} connections per process, providers set up as a deployment`,
  );
  const measurements: Measurement[] = [];
  for (const store of settings.stores) {
    for (const processes of [1, 2]) {
      const name = `${store}, ${processes} process(es)`;
      const measured = await onStore(store, name, settings, async (storeOptions) => {
        const result = await measure(store, processes, settings, storeOptions);
        console.log(
          `  ${name}: ${result.exchangesPerSecond.toFixed(0)} exchanges/s, ` +
            `baseline ${result.baselinePerSecond.toFixed(0)}/s, store CPU ${(result.storeCpuPerExchange * 1e6).toFixed(0)} µs per exchange`,
        );
        return result;
      });
      measurements.push(measured);
    }
  }
  for (const line of ['', ...table(measurements)]) console.log(line);
  const failed = measurements.reduce((sum, m) => sum + m.failed, 0);
  return failed ? [`${failed} requests failed`] : [];
}

await runCommand('scale-out', main);
