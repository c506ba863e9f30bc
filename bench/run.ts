/**
 * `npm run bench`: throughput and latency of the plugin against oidc-provider's
 * own client_credentials grant, on one machine, in one run, against one
 * provider per adapter.
 *
 *   node build/bench/run.js [--smoke] [--rounds N] [--duration S] [--connections C]
 *                           [--memory-only | --redis-only | --postgres-only | --audit-only]
 *                           [--deployment-only | --no-deployment]
 *                           [--only SCENARIO[,SCENARIO]] [--skip-memory] [--profile] [--cpu-prof]
 *
 * The provider runs in a child process (bench/server.ts), autocannon in this
 * one, so that neither runs on the other's event loop: the operating system
 * spreads them (and the provider's thread pool, where jose's WebCrypto signs)
 * over the cores, and the table shows each one's CPU.
 * Each adapter gets `rounds` rounds; a round runs every candidate scenario
 * once for `duration` seconds at 16 connections, each between two baseline
 * windows, in the order B C1 B C2 B C3 B C4 B, the next round in reverse
 * (C4 first), so that a drift of the machine falls on baseline and candidates
 * alike; each candidate window is also compared with the two baseline windows
 * around it. Runs are summed: requests/s is all 2xx over all windows, p50/p99 are
 * over every 2xx latency of every window.
 *
 * Exchanges need a fresh subject token each: they come from a pool filled by
 * the timed creation runs and, outside any window (before the baseline window
 * in front of each exchange window), topped up through the Management API to
 * 1.5x what the fastest run so far could use. Tokens older than 40 s are
 * dropped (subject tokens live 60 s).
 *
 * --profile records the provider's CPU profile (V8's sampler, through the
 * inspector) during every timed window and prints, per adapter and scenario,
 * where the main thread's time went; --cpu-prof starts the provider with
 * node --cpu-prof instead (one profile of the whole process). Both slow the
 * provider down: their numbers are for the profile, not for the table.
 *
 * Exit code: 0 whatever the targets say (a MISS is a finding, not a failure);
 * 1 when something failed: a non-2xx or connection error rate above 0.1%, the
 * pool ran dry, Redis unreachable, the server died.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, mkdirSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { ACTOR_API, API, CLIENTS, TOKEN_EXCHANGE, ACCESS_TOKEN, type TestProvider } from '../test/support/provider.js';
import { basic, m2mToken, userAccessToken } from '../test/support/http.js';
import { fire, percentile, type RequestSpec, type RunRecord } from './load.js';
import pg from 'pg';
import { describeMemory, type MemoryResult } from './memory.js';
import { describeVerifier, type VerifierResult } from './resource-server.js';
import { summarizeProfile } from './profile.js';
import type { AdapterKind, ServerStats } from './protocol.js';
import { startServer, type ServerProcess } from './server-process.js';

// ---------------------------------------------------------------- options

/**
 * One provider to measure: its store, and whether it is set up as a
 * deployment runs it (bench/server.ts, BENCH_DEPLOYMENT): a custom-claims hook
 * reading the creation context, an audit listener writing a JSON line per
 * event. Its scenarios are those a deployment serves most.
 */
interface Configuration {
  adapter: AdapterKind;
  deployment: boolean;
  /** The scenarios it runs, when not all (before --only). */
  scenarios?: readonly ScenarioName[];
  /** How rows, targets and logs name it. */
  name: string;
}

const DEPLOYMENT_SCENARIOS: readonly ScenarioName[] = ['baseline', 'create', 'exchange-actor'];

function configuration(adapter: AdapterKind, deployment: boolean, scenarios?: readonly ScenarioName[]): Configuration {
  return {
    adapter,
    deployment,
    name: deployment ? `${adapter} · deployment` : adapter,
    ...(scenarios ? { scenarios } : deployment ? { scenarios: DEPLOYMENT_SCENARIOS } : {}),
  };
}

/**
 * What --smoke runs, in under a minute: four providers, so that every
 * configuration's and every scenario's code runs once: on memory set up as a
 * deployment, creation and both exchanges with an actor token; on Redis and
 * on PostgreSQL, the exchange with an opaque actor token; with the audit log,
 * the exchange without an actor.
 */
const SMOKE_CONFIGURATIONS: Configuration[] = [
  configuration('memory', true, ['baseline', 'create', 'exchange-actor', 'exchange-actor-jwt']),
  configuration('redis', false, ['baseline', 'exchange-actor']),
  configuration('postgres', false, ['baseline', 'exchange-actor']),
  configuration('memory+pg-audit', false, ['baseline', 'exchange']),
];

interface Settings {
  smoke: boolean;
  rounds: number;
  duration: number;
  warmup: number;
  connections: number;
  configurations: Configuration[];
  only: ScenarioName[] | undefined;
  profile: boolean;
  cpuProf: boolean;
  /** Subject tokens for the heap measurement; 0 skips it. */
  memoryCount: number;
  verifierCount: number;
}

const SCENARIOS = ['baseline', 'create', 'exchange', 'exchange-actor', 'exchange-actor-jwt'] as const;
type ScenarioName = (typeof SCENARIOS)[number];

const LABELS: Record<ScenarioName, string> = {
  baseline: 'client_credentials (baseline)',
  create: 'create subject token (Management API)',
  exchange: 'token exchange',
  'exchange-actor': 'token exchange + actor_token (opaque)',
  'exchange-actor-jwt': 'token exchange + actor_token (JWT)',
};
const EXCHANGES: readonly ScenarioName[] = ['exchange', 'exchange-actor', 'exchange-actor-jwt'];

function parseSettings(argv: string[]): Settings {
  const value = (name: string): string | undefined => {
    const index = argv.indexOf(name);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  const smoke = argv.includes('--smoke');
  const only = value('--only')
    ?.split(',')
    .map((name) => {
      if (!(SCENARIOS as readonly string[]).includes(name))
        throw new TypeError(`--only: unknown scenario ${name} (${SCENARIOS.join(', ')})`);
      return name as ScenarioName;
    });
  const settings: Settings = {
    smoke,
    rounds: Number(value('--rounds') ?? (smoke ? 1 : 6)),
    duration: Number(value('--duration') ?? (smoke ? 1 : 3)),
    // The smoke run skips the warm-up: it keeps the script working, its numbers mean little.
    warmup: smoke ? 0 : 2,
    connections: Number(value('--connections') ?? 16),
    configurations: configurationsOf(argv),
    only,
    profile: argv.includes('--profile'),
    cpuProf: argv.includes('--cpu-prof'),
    memoryCount: argv.includes('--skip-memory') ? 0 : smoke ? 5_000 : 100_000,
    verifierCount: smoke ? 2_000 : 20_000,
  };
  if (!Number.isSafeInteger(settings.rounds) || settings.rounds < 1)
    throw new TypeError('--rounds must be a positive integer');
  if (!Number.isSafeInteger(settings.connections) || settings.connections < 1)
    throw new TypeError('--connections must be a positive integer');
  // autocannon checks its deadline once a second: a window is a whole number of seconds.
  if (!Number.isSafeInteger(settings.duration) || settings.duration < 1)
    throw new TypeError('--duration must be a positive integer (seconds)');
  return settings;
}

/**
 * --memory-only, --redis-only, --postgres-only, --audit-only pick the store; --deployment-only
 * and --no-deployment pick the providers set up as a deployment or the plain ones.
 */
function configurationsOf(argv: string[]): Configuration[] {
  if (
    argv.includes('--smoke') &&
    !['--memory-only', '--redis-only', '--audit-only', '--deployment-only', '--no-deployment'].some((flag) =>
      argv.includes(flag),
    )
  ) {
    return SMOKE_CONFIGURATIONS;
  }
  const adapters: AdapterKind[] = argv.includes('--memory-only')
    ? ['memory']
    : argv.includes('--redis-only')
      ? ['redis']
      : argv.includes('--postgres-only')
        ? ['postgres']
        : argv.includes('--audit-only')
          ? ['memory+pg-audit']
          : ['memory', 'redis', 'postgres', 'memory+pg-audit'];
  const kinds = argv.includes('--deployment-only')
    ? [true]
    : argv.includes('--no-deployment')
      ? [false]
      : [false, true];
  return kinds.flatMap((deployment) => adapters.map((adapter) => configuration(adapter, deployment)));
}

const settings = parseSettings(process.argv.slice(2));
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
/** Above this share of non-2xx responses or connection errors the numbers mean nothing: exit 1. */
const ERROR_TOLERANCE = 0.001;
/** Subject tokens live 60 s; one older than this is not handed to a run. */
const TOKEN_MAX_AGE_MS = 40_000;
const SUBJECT_TOKEN_BODY = JSON.stringify({ userId: 'bob', context: { ticketId: 'T-4711', reason: 'checkout fails' } });
/** Shaped like a subject token, known to nobody: what a run gets should the pool run dry (a 400, counted). */
const NO_TOKEN = `ist_${'A'.repeat(43)}`;

const problems: string[] = [];
const log = (line: string): void => {
  console.log(line);
};

// ---------------------------------------------------------------- subject-token pool

class TokenPool {
  #values: string[] = [];
  #born: number[] = [];
  #head = 0;
  exhausted = 0;

  add(value: string): void {
    this.#values.push(value);
    this.#born.push(Date.now());
  }

  /** The oldest token young enough to redeem, or undefined. */
  take(): string | undefined {
    const oldest = Date.now() - TOKEN_MAX_AGE_MS;
    while (this.#head < this.#values.length) {
      const index = this.#head++;
      if (this.#born[index]! >= oldest) return this.#values[index];
    }
    return undefined;
  }

  /** Tokens that will still be young enough `withinMs` from now. */
  usable(withinMs: number): number {
    const oldest = Date.now() + withinMs - TOKEN_MAX_AGE_MS;
    this.#compact();
    let count = 0;
    for (let index = this.#values.length - 1; index >= this.#head && this.#born[index]! >= oldest; index -= 1)
      count += 1;
    return count;
  }

  #compact(): void {
    if (this.#head < 10_000) return;
    this.#values = this.#values.slice(this.#head);
    this.#born = this.#born.slice(this.#head);
    this.#head = 0;
  }
}

// ---------------------------------------------------------------- one adapter's run

interface ScenarioTotals {
  runs: RunRecord[];
  /** Each window's rate over the mean of the baseline windows just before and after it. */
  pairedRatios: number[];
  /** Provider CPU seconds (all its threads) used during the timed windows. */
  serverCpu: number;
  /** Of serverCpu, the main thread's (NaN without /proc). */
  mainCpu: number;
  /** Of serverCpu, that of V8's helper threads: concurrent GC and compilation (NaN without /proc). */
  v8Cpu: number;
  /** CPU seconds the rest of the machine used meanwhile (Redis, other processes); NaN off Linux. */
  otherCpu: number;
}

interface AdapterResult {
  configuration: Configuration;
  totals: Partial<Record<ScenarioName, ScenarioTotals>>;
  endStats: ServerStats;
  untimed: { requests: number; failed: number };
  /** Exchange requests that found the pool empty (and sent an unknown token). */
  poolExhausted: number;
  /** Abandoned requests the provider logged as "Error: aborted". */
  abortedLogged: number;
}

function form(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}

/**
 * The provider's output, passed through, except the "Error: aborted" stacks Koa
 * prints for Management API requests whose connection autocannon closes at
 * the end of a window: those are counted.
 */
class ServerLog {
  aborted = 0;
  #inStack = false;

  readonly line = (line: string): void => {
    if (/^\s*Error: aborted$/.test(line)) {
      this.aborted += 1;
      this.#inStack = true;
      return;
    }
    if (this.#inStack && /^\s+at /.test(line)) return;
    this.#inStack = false;
    if (line.trim()) log(`  [server] ${line}`);
  };
}

async function runAdapter(
  config: Configuration,
  prefix: string,
  profileDir: string | undefined,
  schemas: { auditSchema?: string; storeSchema?: string } = {},
): Promise<AdapterResult> {
  const serverLog = new ServerLog();
  const server = await startServer({
    adapter: config.adapter,
    deployment: config.deployment,
    redisUrl: REDIS_URL,
    redisPrefix: prefix,
    ...schemas,
    execArgv: profileDir && settings.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, 'process')] : [],
    log: serverLog.line,
  });
  try {
    const result = await measure(config, server, settings.profile ? profileDir : undefined);
    return { ...result, abortedLogged: serverLog.aborted };
  } finally {
    await server.close();
  }
}

async function measure(
  config: Configuration,
  server: ServerProcess,
  profileDir: string | undefined,
): Promise<Omit<AdapterResult, 'abortedLogged'>> {
  const { base } = server;
  const tp = { base } as TestProvider;
  const connections = settings.connections;
  const pool = new TokenPool();
  const untimed = { requests: 0, failed: 0 };
  const bestRate: Partial<Record<ScenarioName, number>> = {};

  // Credentials the requests carry, obtained once through the real flows: alice's
  // access token from a plain OpenID Connect login (opaque, bound to her session,
  // so checking it reads the token and the session from the store), and one
  // issued as a JWT for a resource (checked by signature, no store access).
  const actorToken = await userAccessToken(tp, 'alice');
  const jwtActorToken = await userAccessToken(tp, 'alice', { scope: 'openid profile:read', resource: ACTOR_API });
  // The backend's M2M token for the Management API (fetched per run: it lives 5 minutes).
  const m2m = (): Promise<string> => m2mToken(tp);

  // Exchanges need a new body for every request, so autocannon builds each one
  // as it sends it (setupRequest). The other scenarios are built the same way,
  // though their requests never change: autocannon would otherwise build them
  // once and resend the bytes, and on a machine it shares with the provider the
  // baseline would get CPU that the exchanges give to the load generator.
  const rebuiltEachTime = (request: RequestSpec): RequestSpec => request;
  const baselineRequest: RequestSpec = {
    method: 'POST',
    path: '/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.noScopeBackend) },
    body: form({ grant_type: 'client_credentials', resource: API, scope: 'profile:read' }),
    setupRequest: rebuiltEachTime,
  };
  const creationRequest = (token: string): RequestSpec => ({
    method: 'POST',
    path: '/api/subject-tokens',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: SUBJECT_TOKEN_BODY,
    setupRequest: rebuiltEachTime,
    onResponse(status, body) {
      if (status === 201) pool.add((JSON.parse(body) as { subjectToken: string }).subjectToken);
    },
  });
  const exchangeRequest = (actor: string | undefined): RequestSpec => {
    const fixed = form({
      grant_type: TOKEN_EXCHANGE,
      client_id: CLIENTS.console.client_id,
      subject_token_type: ACCESS_TOKEN,
      resource: API,
      scope: 'profile:read',
      ...(actor ? { actor_token: actor, actor_token_type: ACCESS_TOKEN } : {}),
    });
    return {
      method: 'POST',
      path: '/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      setupRequest(request) {
        let token = pool.take();
        if (token === undefined) {
          pool.exhausted += 1;
          token = NO_TOKEN;
        }
        // Subject tokens are base64url: nothing to escape.
        request.body = `${fixed}&subject_token=${token}`;
        return request;
      },
    };
  };

  const requestsFor = async (scenario: ScenarioName): Promise<RequestSpec[]> => {
    switch (scenario) {
      case 'baseline':
        return [baselineRequest];
      case 'create':
        return [creationRequest(await m2m())];
      case 'exchange':
        return [exchangeRequest(undefined)];
      case 'exchange-actor':
        return [exchangeRequest(actorToken)];
      case 'exchange-actor-jwt':
        return [exchangeRequest(jwtActorToken)];
    }
  };

  /**
   * Outside any window: enough young tokens for one exchange run of `seconds`
   * starting `startsIn` seconds from now, at 1.5x the best exchange rate seen
   * so far (before any, 1.5x the baseline's; before that, a generous guess).
   */
  const topUp = async (seconds: number, startsIn = 0): Promise<void> => {
    const exchangeRate = Math.max(...EXCHANGES.map((name) => bestRate[name] ?? 0));
    const rate = exchangeRate || (bestRate.baseline ? bestRate.baseline * 1.5 : 4000);
    const needed = Math.ceil(rate * (seconds + 0.5) * 1.5) + connections * 4;
    const missing = needed - pool.usable((startsIn + seconds) * 1000 + 5000);
    if (missing <= 0) return;
    const run = await fire({
      base,
      connections,
      amount: Math.max(missing, connections),
      requests: [creationRequest(await m2m())],
    });
    untimed.requests += run.ok + run.non2xx;
    untimed.failed += run.non2xx + run.errors;
  };

  const runOnce = async (
    scenario: ScenarioName,
    seconds: number,
    profile?: string,
  ): Promise<{ run: RunRecord; serverCpu: number; mainCpu: number; v8Cpu: number; otherCpu: number }> => {
    if (EXCHANGES.includes(scenario)) await topUp(seconds);
    const requests = await requestsFor(scenario);
    // Every window starts with an empty young generation: the top-up before an
    // exchange window would otherwise leave its garbage to that window, and to no
    // other. Only a scavenge: after a full GC, V8 compiled the hot code again (bench/server.ts).
    await server.settle();
    if (profile) await server.profileStart();
    const before = await server.stats();
    const machineBefore = machineCpuSeconds();
    const run = await fire({ base, connections, duration: seconds, requests });
    const machineAfter = machineCpuSeconds();
    const after = await server.stats();
    if (profile) await server.profileStop(profile);
    const serverCpu = (after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system) / 1e6;
    const otherCpu = Math.max(0, machineAfter - machineBefore - serverCpu - run.generatorCpu);
    const mainCpu = after.threads && before.threads ? after.threads.main - before.threads.main : Number.NaN;
    const v8Cpu =
      after.threads?.v8 != null && before.threads?.v8 != null ? after.threads.v8 - before.threads.v8 : Number.NaN;
    bestRate[scenario] = Math.max(bestRate[scenario] ?? 0, run.ok / run.seconds);
    // Let the last abandoned requests finish on the server before the next window opens.
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { run, serverCpu, mainCpu, v8Cpu, otherCpu };
  };

  const scenarios = SCENARIOS.filter(
    (name) =>
      (!settings.only || settings.only.includes(name)) && (!config.scenarios || config.scenarios.includes(name)),
  );

  // One check request per scenario, so that a broken setup fails with its reason rather than as a rate.
  await checkOnce(base, baselineRequest, 200, 'client_credentials');
  await checkOnce(base, { ...creationRequest(await m2m()), onResponse: undefined }, 201, 'subject token creation');

  // Warm-up (JIT, connections, caches), untimed; also the first rate estimates.
  for (const scenario of settings.warmup ? scenarios : []) {
    const { run } = await runOnce(scenario, settings.warmup);
    untimed.requests += run.ok + run.non2xx;
    untimed.failed += run.non2xx + run.errors;
    if (run.non2xx || run.errors) {
      log(
        `  warm-up ${scenario}: ${run.non2xx} non-2xx (${JSON.stringify(run.statuses)}), ${run.errors} connection errors`,
      );
    }
  }

  // Every candidate window sits between two baseline windows (a round's last
  // baseline is the next round's first), so each has a baseline measured just
  // before and just after it: the machine drifts over tens of seconds, and a
  // candidate is compared with the baseline of its own moment.
  const candidates = scenarios.filter((name) => name !== 'baseline');
  const bracketed = scenarios.includes('baseline');
  const schedule: { scenario: ScenarioName; round: number }[] = [];
  for (let round = 0; round < settings.rounds; round += 1) {
    const order = round % 2 === 0 ? candidates : [...candidates].reverse();
    if (bracketed && round === 0) schedule.push({ scenario: 'baseline', round });
    for (const scenario of order) {
      schedule.push({ scenario, round });
      if (bracketed) schedule.push({ scenario: 'baseline', round });
    }
  }

  const totals: Partial<Record<ScenarioName, ScenarioTotals>> = {};
  const rates: number[] = [];
  let parts: string[] = [];
  for (const [index, { scenario, round }] of schedule.entries()) {
    // An exchange's subject tokens are created before the baseline window in front of it, so that
    // nothing but a collection (which starts every window) separates the two windows.
    const next = schedule[index + 1];
    if (scenario === 'baseline' && next && EXCHANGES.includes(next.scenario)) {
      await topUp(settings.duration, settings.duration + 1);
    }
    const profile = profileDir && join(profileDir, `${scenario}.${index + 1}.cpuprofile`);
    const { run, serverCpu, mainCpu, v8Cpu, otherCpu } = await runOnce(scenario, settings.duration, profile);
    const entry = (totals[scenario] ??= {
      runs: [],
      pairedRatios: [],
      serverCpu: 0,
      mainCpu: 0,
      v8Cpu: 0,
      otherCpu: 0,
    });
    entry.runs.push(run);
    entry.serverCpu += serverCpu;
    entry.mainCpu += mainCpu;
    entry.v8Cpu += v8Cpu;
    entry.otherCpu += otherCpu;
    rates.push(run.ok / run.seconds);
    parts.push(`${scenario} ${Math.round(run.ok / run.seconds)}/s${run.non2xx ? ` (${run.non2xx} non-2xx)` : ''}`);
    if (next?.round !== round) {
      log(`  ${config.name} round ${round + 1}/${settings.rounds}: ${parts.join(', ')}`);
      parts = [];
    }
  }
  if (bracketed) {
    for (const [index, { scenario }] of schedule.entries()) {
      if (scenario === 'baseline') continue;
      totals[scenario]!.pairedRatios.push(rates[index]! / ((rates[index - 1]! + rates[index + 1]!) / 2));
    }
  }

  return {
    configuration: config,
    totals,
    endStats: await server.stats(),
    untimed,
    poolExhausted: pool.exhausted,
  };
}

async function checkOnce(base: string, request: RequestSpec, expected: number, what: string): Promise<void> {
  const response = await fetch(`${base}${request.path}`, {
    method: request.method ?? 'GET',
    headers: request.headers as Record<string, string>,
    body: request.body as string,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${what}: expected ${expected}, got ${response.status} ${text}`);
}

// ---------------------------------------------------------------- summary

interface Row {
  /** The configuration's name. */
  adapter: string;
  scenario: ScenarioName;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  /** Each window's rate over that of the baseline windows on either side of it. */
  pairedRatios: number[];
  /** Provider CPU (all threads) per 2xx response, in ms. */
  cpuPerRequest: number;
  /** The main thread's part of it (NaN without /proc). */
  mainCpuPerRequest: number;
  /** V8's helper threads' part of it (NaN without /proc). */
  v8CpuPerRequest: number;
  serverCpuShare: number;
  generatorCpuShare: number;
  otherCpuShare: number;
}

function summarize(result: AdapterResult): Row[] {
  const rows: Row[] = [];
  for (const scenario of SCENARIOS) {
    const totals = result.totals[scenario];
    if (!totals) continue;
    const seconds = totals.runs.reduce((sum, run) => sum + run.seconds, 0);
    const latencies = Float64Array.from(totals.runs.flatMap((run) => run.latencies)).sort();
    const ok = totals.runs.reduce((sum, run) => sum + run.ok, 0);
    rows.push({
      adapter: result.configuration.name,
      scenario,
      rps: ok / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      requests: ok + totals.runs.reduce((sum, run) => sum + run.non2xx, 0),
      non2xx: totals.runs.reduce((sum, run) => sum + run.non2xx, 0),
      errors: totals.runs.reduce((sum, run) => sum + run.errors, 0),
      pairedRatios: totals.pairedRatios,
      cpuPerRequest: (totals.serverCpu * 1000) / ok,
      mainCpuPerRequest: (totals.mainCpu * 1000) / ok,
      v8CpuPerRequest: (totals.v8Cpu * 1000) / ok,
      serverCpuShare: totals.serverCpu / seconds,
      otherCpuShare: totals.otherCpu / seconds,
      generatorCpuShare: totals.runs.reduce((sum, run) => sum + run.generatorCpu, 0) / seconds,
    });
  }
  return rows;
}

function table(rows: Row[]): string[] {
  const header = [
    'adapter',
    'scenario',
    'req/s',
    'p50 ms',
    'p99 ms',
    'req/s ÷ baseline',
    '÷ neighbouring baselines: median (min–max)',
    'p99 ÷ baseline',
    'provider CPU ms/req (main thread / V8 helpers)',
    'CPU/req ÷ baseline',
    'requests',
    'non-2xx',
    'CPU: provider / autocannon / rest',
  ];
  const lines = [header, header.map((cell, index) => (index < 2 ? '---' : '---:'))];
  for (const row of rows) {
    const baseline = rows.find((candidate) => candidate.adapter === row.adapter && candidate.scenario === 'baseline');
    lines.push([
      row.adapter,
      LABELS[row.scenario],
      row.rps.toFixed(0),
      row.p50.toFixed(1),
      row.p99.toFixed(1),
      baseline ? (row.rps / baseline.rps).toFixed(2) : 'n/a',
      row.scenario === 'baseline' ? '' : spread(row.pairedRatios),
      baseline ? (row.p99 / baseline.p99).toFixed(2) : 'n/a',
      `${row.cpuPerRequest.toFixed(2)} (${[row.mainCpuPerRequest, row.v8CpuPerRequest].map((ms) => (Number.isNaN(ms) ? '?' : ms.toFixed(2))).join(' / ')})`,
      baseline ? (row.cpuPerRequest / baseline.cpuPerRequest).toFixed(2) : 'n/a',
      String(row.requests),
      String(row.non2xx + row.errors),
      [row.serverCpuShare, row.generatorCpuShare, row.otherCpuShare]
        .map((share) => (Number.isNaN(share) ? '?' : `${Math.round(share * 100)}%`))
        .join(' / '),
    ]);
  }
  return lines.map((cells) => `| ${cells.join(' | ')} |`);
}

/** Median and range of the ratios of single windows: how much the pooled ratio beside it can be trusted. */
function spread(ratios: readonly number[]): string {
  if (ratios.length === 0) return 'n/a';
  const sorted = [...ratios].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  const median = sorted.length % 2 ? sorted[Math.floor(middle)]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return `${median.toFixed(2)} (${sorted[0]!.toFixed(2)}–${sorted.at(-1)!.toFixed(2)})`;
}

interface Target {
  label: string;
  value: number;
  limit: number;
  better: 'higher' | 'lower';
  unit: string;
}

/**
 * The exchange with an opaque actor token against the baseline: 0.9 on memory
 * and 0.8 on the other stores for the plain providers; as a deployment runs
 * it, 0.9 on memory, 0.85 on Redis, 0.8 with the PostgreSQL audit log.
 */
function exchangeTarget(config: Configuration): number {
  if (config.adapter === 'memory') return 0.9;
  if (config.deployment && config.adapter === 'redis') return 0.85;
  return 0.8;
}

function targets(rows: Row[], memory: MemoryResult | undefined): Target[] {
  const list: Target[] = [];
  const row = (name: string, scenario: ScenarioName) => rows.find((r) => r.adapter === name && r.scenario === scenario);
  for (const config of settings.configurations) {
    const { name } = config;
    const baseline = row(name, 'baseline');
    if (!baseline) continue;
    for (const scenario of ['exchange-actor', 'exchange-actor-jwt'] as const) {
      const actor = row(name, scenario);
      if (!actor) continue;
      const limit = exchangeTarget(config);
      list.push({
        label: `${name}: ${LABELS[scenario]} req/s ≥ ${limit} × client_credentials`,
        value: actor.rps / baseline.rps,
        limit,
        better: 'higher',
        unit: '×',
      });
    }
    const audited = config.adapter === 'memory+pg-audit' && !config.deployment ? row(name, 'exchange') : undefined;
    if (audited) {
      list.push({
        label: `${name}: token exchange with the PostgreSQL audit log req/s ≥ 0.8 × client_credentials`,
        value: audited.rps / baseline.rps,
        limit: 0.8,
        better: 'higher',
        unit: '×',
      });
    }
    const create = row(name, 'create');
    if (create) {
      list.push({
        label: `${name}: creation req/s ≥ 0.9 × client_credentials`,
        value: create.rps / baseline.rps,
        limit: 0.9,
        better: 'higher',
        unit: '×',
      });
    }
    for (const scenario of EXCHANGES) {
      const candidate = row(name, scenario);
      if (candidate) {
        list.push({
          label: `${name}: ${LABELS[scenario]} p99 ≤ 1.5 × client_credentials p99`,
          value: candidate.p99 / baseline.p99,
          limit: 1.5,
          better: 'lower',
          unit: '×',
        });
      }
    }
  }
  if (memory) {
    list.push({
      label: 'memory adapter: heap per outstanding subject token ≤ 1 KiB',
      value: memory.bytesPerToken,
      limit: 1024,
      better: 'lower',
      unit: ' B',
    });
  }
  return list;
}

function formatTarget(target: Target): string {
  const pass = target.better === 'higher' ? target.value >= target.limit : target.value <= target.limit;
  const value = target.unit === ' B' ? `${Math.round(target.value)} B` : `${target.value.toFixed(2)}×`;
  return `${pass ? 'PASS' : 'MISS'}  ${target.label}: ${value}`;
}

// ---------------------------------------------------------------- Redis, memory child, machine

/** CPU seconds all processes of the machine used so far (Linux /proc/stat, USER_HZ 100); NaN elsewhere. */
function machineCpuSeconds(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait.
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return Number.NaN;
  }
}

async function redisReachable(): Promise<void> {
  const client = new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    throw new Error(
      `Redis is not reachable at ${REDIS_URL} (set REDIS_URL, or pass --memory-only): ${(error as Error).message}`,
    );
  } finally {
    client.disconnect();
  }
}

/** Deletes every key under the run's prefix; returns how many there were. */
async function deleteKeys(prefix: string): Promise<number> {
  const client = new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  let deleted = 0;
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length) deleted += await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
  return deleted;
}

/** A connection to DATABASE_URL, or an error saying how to start PostgreSQL (or pass --memory-only / --redis-only). */
async function postgres(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(
      `PostgreSQL is not reachable at ${DATABASE_URL} (set DATABASE_URL, start it, or pass --memory-only): ${(error as Error).message}`,
    );
  }
  return client;
}

/** bench/memory.ts in a child with --expose-gc, so that gc() can be called and nothing else is on its heap. */
function runMemoryChild(count: number): Promise<MemoryResult> {
  return runJsonChild<MemoryResult>('memory', [
    '--expose-gc',
    fileURLToPath(new URL('./memory.js', import.meta.url)),
    '--count',
    String(count),
    '--json',
  ]);
}

/** bench/resource-server.ts in a child: its provider and verifier share nothing with the load. */
function runVerifierChild(count: number): Promise<VerifierResult> {
  return runJsonChild<VerifierResult>('resource-server', [
    fileURLToPath(new URL('./resource-server.js', import.meta.url)),
    '--count',
    String(count),
    '--json',
  ]);
}

function runJsonChild<T>(name: string, args: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) {
        reject(new Error(`the ${name} measurement exited with ${code}`));
        return;
      }
      try {
        resolve(JSON.parse(output.trim().split('\n').at(-1)!) as T);
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}

// ---------------------------------------------------------------- main

/** A configuration's folder under the profile directory. */
function folderOf(config: Configuration): string {
  return `${config.adapter.replace('memory+', '')}${config.deployment ? '-deployment' : ''}`;
}

function mkdir(path: string): string {
  mkdirSync(path, { recursive: true });
  return path;
}

async function main(): Promise<void> {
  const started = performance.now();
  const cores = availableParallelism();
  log(
    `oidc-provider-impersonation bench${settings.smoke ? ' (smoke)' : ''}: ${new Date().toISOString()}, ` +
      `node ${process.version}, ${cores} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'})`,
  );
  log(
    `  ${settings.rounds} rounds × ${settings.duration} s per scenario at ${settings.connections} connections, ` +
      'every candidate window between two baseline windows (B C1 B C2 … B, then in reverse); ' +
      'provider in a child process, autocannon in this one',
  );
  if (settings.smoke) log('  smoke run: 1-second windows, no warm-up; the numbers only show that the script works');
  if (Number(process.versions.node.split('.')[0]) < 22) {
    log(
      "  note: oidc-provider 9 supports Node.js 22 LTS and later; this runtime's V8 is slow on tokens that carry claims " +
        'from extraTokenClaims, act included (README, "Benchmarks")',
    );
  }

  const profileDir =
    settings.profile || settings.cpuProf
      ? join(process.cwd(), 'build', 'bench-profiles', new Date().toISOString().replace(/[:.]/g, '-'))
      : undefined;

  const results: AdapterResult[] = [];
  for (const config of settings.configurations) {
    const { adapter } = config;
    const profileFolder = (): string | undefined => profileDir && mkdir(join(profileDir, folderOf(config)));
    if (adapter === 'redis') {
      await redisReachable();
      const prefix = `bench:${randomUUID()}:`;
      try {
        results.push(await runAdapter(config, prefix, profileFolder()));
      } finally {
        const deleted = await deleteKeys(prefix);
        log(`  ${config.name}: deleted ${deleted} keys under ${prefix}`);
      }
    } else if (adapter === 'postgres') {
      const schema = `bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const database = await postgres();
      try {
        await database.query(`CREATE SCHEMA "${schema}"`);
        results.push(await runAdapter(config, '', profileFolder(), { storeSchema: schema }));
        const {
          rows: [counted],
        } = await database.query(`SELECT count(*)::int AS rows FROM "${schema}"."oidc_provider_store"`);
        log(
          `  ${config.name}: ${(counted as { rows: number }).rows} rows in the store's table in schema ${schema} (dropped)`,
        );
      } finally {
        await database.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
        await database.end();
      }
    } else if (adapter === 'memory+pg-audit') {
      const schema = `bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
      const database = await postgres();
      try {
        await database.query(`CREATE SCHEMA "${schema}"`);
        results.push(await runAdapter(config, '', profileFolder(), { auditSchema: schema }));
        const {
          rows: [counted],
        } = await database.query(`SELECT count(*)::int AS rows FROM "${schema}"."impersonation_audit"`);
        log(
          `  ${config.name}: ${(counted as { rows: number }).rows} rows appended to one chain in schema ${schema} (dropped)`,
        );
      } finally {
        await database.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
        await database.end();
      }
    } else {
      results.push(await runAdapter(config, '', profileFolder()));
    }
  }

  let memory: MemoryResult | undefined;
  if (settings.memoryCount) {
    log(
      `  memory adapter: filling with ${settings.memoryCount.toLocaleString('en')} subject tokens (node --expose-gc child)`,
    );
    memory = await runMemoryChild(settings.memoryCount);
  }

  log(
    `  resource-server helper: ${settings.verifierCount.toLocaleString('en')} verifications per variant (child process)`,
  );
  const verifier = await runVerifierChild(settings.verifierCount);

  const rows = results.flatMap(summarize);
  log('');
  for (const line of table(rows)) log(line);
  log('');
  if (memory) for (const line of describeMemory(memory)) log(line);
  for (const line of describeVerifier(verifier)) log(line);

  for (const result of results) {
    const stats = result.endStats.adapter;
    if (stats) {
      const evicted = stats.evictedUnexpired['SubjectToken'] ?? 0;
      log(
        `memory adapter of the provider after the run: ${stats.size} entries, evictedUnexpired ${JSON.stringify(stats.evictedUnexpired)}`,
      );
      if (evicted > 0)
        log(`WARNING: the provider's memory adapter evicted ${evicted} unexpired subject tokens during the run`);
    }
    if (result.abortedLogged) {
      log(
        `${result.configuration.name}: ${result.abortedLogged} Management API requests cut off at the end of a window were logged by the provider as "Error: aborted" (not shown)`,
      );
    }
    if (result.poolExhausted)
      problems.push(`${result.configuration.name}: the subject-token pool ran dry ${result.poolExhausted} times`);
    if (result.untimed.failed > result.untimed.requests * ERROR_TOLERANCE) {
      problems.push(
        `${result.configuration.name}: ${result.untimed.failed} of ${result.untimed.requests} untimed requests (warm-up, token creation) failed`,
      );
    }
  }
  for (const row of rows) {
    if (row.non2xx + row.errors > Math.max(0, row.requests * ERROR_TOLERANCE)) {
      const statuses: Record<string, number> = {};
      for (const run of results.find((r) => r.configuration.name === row.adapter)!.totals[row.scenario]!.runs) {
        for (const [status, count] of Object.entries(run.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
      }
      problems.push(
        `${row.adapter} ${row.scenario}: ${row.non2xx} non-2xx and ${row.errors} connection errors ` +
          `in ${row.requests} requests (statuses ${JSON.stringify(statuses)})`,
      );
    }
  }

  log('');
  for (const target of targets(rows, memory)) log(formatTarget(target));

  if (profileDir) {
    for (const result of results) {
      const dir = join(profileDir, folderOf(result.configuration));
      for (const scenario of settings.profile ? SCENARIOS : []) {
        const runs = result.totals[scenario]?.runs;
        if (!runs) continue;
        const files = readdirSync(dir)
          .filter((name) => name.startsWith(`${scenario}.`))
          .map((name) => join(dir, name));
        log('');
        log(
          `CPU profile of the provider, ${result.configuration.name}, ${LABELS[scenario]} (${files.length} windows, ${join(dir, `${scenario}.*.cpuprofile`)}):`,
        );
        for (const line of summarizeProfile(files, {
          requests: runs.reduce((sum, run) => sum + run.ok + run.non2xx, 0),
        }))
          log(line);
      }
      if (settings.cpuProf) {
        for (const file of readdirSync(join(dir, 'process')).filter((name) => name.endsWith('.cpuprofile'))) {
          log('');
          log(
            `CPU profile of the whole provider process (node --cpu-prof), ${result.configuration.name}: ${join(dir, 'process', file)}`,
          );
          for (const line of summarizeProfile(join(dir, 'process', file))) log(line);
        }
      }
    }
  }

  log('');
  log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (problems.length) {
    for (const problem of problems) console.error(`ERROR: ${problem}`);
    process.exitCode = 1;
  }
}

try {
  await main();
} catch (error) {
  console.error('bench failed:', error);
  process.exitCode = 1;
}
