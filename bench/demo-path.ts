/**
 * The demo's own path under load: `npm run demo` as it starts (build/demo/main.js,
 * both halves in one process, memory store, the audit trail in memory, its
 * console output on a pipe this process reads), and against it, from this
 * process, the token exchange the support console makes (an opaque actor
 * token from alice's sign-in, a subject token for dave bound to her and to the
 * console, through the demo's hook, policy, step-up and audit trail) in
 * windows alternating with the demo's own `client_credentials` request (the
 * backend's M2M token for the Management API).
 *
 *   node build/bench/demo-path.js [--rounds N] [--duration S] [--connections C] [--profile]
 *
 * Each round: subject tokens created through the Management API for the next
 * exchange window (untimed), then a baseline window and an exchange window;
 * one more baseline window closes the run, so every exchange window sits
 * between two baseline windows. --profile records the demo's CPU profile
 * (V8's sampler, through bench/demo-profiler.ts loaded into the demo's
 * process) during every timed window and prints where its main thread's time
 * went; the profiler slows the demo down, so its figures are for the split.
 * Extra environment variables reach the demo (e.g. DEMO_LOG_FEED).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort, LOOPBACK } from '../demo/http.js';
import type { Demo } from '../demo/demo.js';
import { signIn } from '../test/demo/helpers.js';
import { runCommand } from './command.js';
import type { DemoProbeReply, DemoProbeRequest } from './demo-profiler.js';
import { fire, percentile, type RequestSpec, type RunRecord } from './load.js';
import { summarizeProfile } from './profile.js';
import { creationRequest } from './requests.js';
import { TokenPool } from './token-pool.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const API = 'https://api.example.com';
/** demo/seed.ts: the backend's client and its default secret; dave needs no approval. */
const BACKEND = { id: 'impersonation-backend', secret: 'impersonation-backend-secret' };
const CONSOLE = 'support-console';
const CUSTOMER = 'dave';
const READY_TIMEOUT_MS = 30_000;

interface Settings {
  rounds: number;
  duration: number;
  connections: number;
  profile: boolean;
}

function parseSettings(argv: readonly string[]): Settings {
  const settings: Settings = { rounds: 4, duration: 4, connections: 16, profile: false };
  for (let index = 0; index < argv.length; index += 1) {
    const flag = argv[index];
    const value = Number(argv[index + 1]);
    if (flag === '--profile') settings.profile = true;
    else if (flag === '--rounds' || flag === '--duration' || flag === '--connections') {
      if (!Number.isInteger(value) || value < 1) throw new TypeError(`${flag} needs a whole number above 0`);
      settings[flag.slice(2) as 'rounds' | 'duration' | 'connections'] = value;
      index += 1;
    } else throw new TypeError(`unknown flag ${flag}`);
  }
  return settings;
}

/** A request to bench/demo-profiler.ts, before it gets its id. */
type ProbeQuestion = DemoProbeRequest extends infer Request
  ? Request extends DemoProbeRequest
    ? Omit<Request, 'id'>
    : never
  : never;

/** The demo's process: its address, its output lines, and the probe bench/demo-profiler.ts answers. */
interface DemoProcess {
  identity: string;
  backend: string;
  /** The identity service at its IP address, for the load generator. */
  target: string;
  /** Lines the demo printed so far. */
  lines(): number;
  ask(request: ProbeQuestion): Promise<DemoProbeReply>;
  stop(): Promise<void>;
}

async function startDemoProcess(): Promise<DemoProcess> {
  const [identityPort, backendPort] = [await freePort(), await freePort()];
  const child: ChildProcess = fork(fileURLToPath(new URL('../demo/main.js', import.meta.url)), [], {
    execArgv: ['--import', new URL('./demo-profiler.js', import.meta.url).href],
    // The backend's hourly bound on subject tokens (10,000 by default) is for people; the windows need more.
    env: {
      SUBJECT_TOKENS_PER_HOUR: '1000000',
      ...process.env,
      PORT: String(identityPort),
      BACKEND_PORT: String(backendPort),
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let lines = 0;
  let banner = false;
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the demo did not start')), READY_TIMEOUT_MS);
    child.once('exit', (code) => reject(new Error(`the demo exited (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (banner) lines += 1;
      else if (line.includes('Impersonation demo is running')) {
        banner = true;
        clearTimeout(timer);
        resolve();
      }
    });
  });
  createInterface({ input: child.stderr! }).on('line', (line) => console.error(`  demo: ${line}`));
  await started;
  // The banner's own lines come with it: count from the first one after it.
  await new Promise((resolve) => setTimeout(resolve, 200));
  lines = 0;

  let nextId = 0;
  const waiting = new Map<number, (reply: DemoProbeReply) => void>();
  child.on('message', (reply: DemoProbeReply) => waiting.get(reply.id)?.(reply));
  return {
    identity: `http://localhost:${identityPort}`,
    backend: `http://localhost:${backendPort}`,
    target: `http://${LOOPBACK}:${identityPort}`,
    lines: () => lines,
    ask: (request) =>
      new Promise((resolve, reject) => {
        const id = (nextId += 1);
        waiting.set(id, (reply) => {
          waiting.delete(id);
          if (reply.error) reject(new Error(reply.error));
          else resolve(reply);
        });
        child.send({ ...request, id });
      }),
    stop: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGINT');
      }),
  };
}

function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/** The backend's M2M token request, as demo/backend-dependencies.ts makes it: the demo's client_credentials. */
function m2mRequest(identity: string): RequestSpec {
  return {
    method: 'POST',
    path: '/oidc/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(BACKEND.id, BACKEND.secret) },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      resource: `${identity}/api`,
      scope: 'subject-tokens:create',
    }).toString(),
    // Built as it is sent, like the exchanges' bodies (bench/requests.ts says why).
    setupRequest: (request) => request,
  };
}

async function m2mToken(identity: string): Promise<string> {
  const spec = m2mRequest(identity);
  const response = await fetch(`${identity}${spec.path}`, {
    method: 'POST',
    headers: spec.headers as Record<string, string>,
    body: spec.body as string,
  });
  const body = (await response.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`the M2M token request answered ${response.status}`);
  return body.access_token;
}

/** What demo/impersonation-requests.ts asks for when alice impersonates dave from the console, to read. */
function creationBody(): string {
  return JSON.stringify({
    userId: CUSTOMER,
    context: { ticketId: 'T-4711', reason: 'checkout fails', supportEngineerId: 'alice', access: 'read' },
    actorId: 'alice',
    clientId: CONSOLE,
    resource: API,
    scope: ['profile:read'],
  });
}

/** The console's exchange (demo/console-page.ts): public client, alice's token as the actor token. */
function exchangeRequest(actorToken: string, pool: TokenPool): RequestSpec {
  const fixed = new URLSearchParams({
    grant_type: TOKEN_EXCHANGE,
    client_id: CONSOLE,
    subject_token_type: ACCESS_TOKEN,
    resource: API,
    scope: 'profile:read',
    actor_token: actorToken,
    actor_token_type: ACCESS_TOKEN,
  }).toString();
  return {
    method: 'POST',
    path: '/oidc/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    setupRequest(request) {
      request.body = `${fixed}&subject_token=${pool.takeOrPlaceholder()}`;
      return request;
    },
  };
}

interface Window {
  scenario: 'baseline' | 'exchange';
  run: RunRecord;
  /** The demo's CPU seconds during the window: all its threads, and its main thread's (NaN without /proc). */
  demoCpu: number;
  mainCpu: number;
  /** Lines the demo printed during the window. */
  lines: number;
}

const rate = (window: Pick<Window, 'run'>): number => window.run.ok / window.run.seconds;

/**
 * Subject tokens for the next exchange window: 1.5 times the best rate of the
 * exchange windows so far (at least MIN_RATE), plus a few per connection.
 * Not more: the demo's memory store holds some 50,000 subject tokens, and
 * redeemed ones stay as tombstones for minutes. The demo runs with
 * SUBJECT_TOKENS_PER_HOUR raised: its default, 10,000, is spent in four windows.
 */
const MIN_RATE = 2000;

function tokensFor(windows: readonly Window[], settings: Settings): number {
  const exchanges = windows.filter((window) => window.scenario === 'exchange');
  const perSecond = Math.max(MIN_RATE, ...exchanges.map(rate));
  return Math.ceil(perSecond * (settings.duration + 0.5) * 1.5) + settings.connections * 4;
}

async function timed(
  demo: DemoProcess,
  scenario: Window['scenario'],
  requests: RequestSpec[],
  settings: Settings,
  profileFile: string | undefined,
): Promise<Window> {
  if (profileFile) await demo.ask({ type: 'profile-start' });
  const before = await demo.ask({ type: 'cpu' });
  const lines = demo.lines();
  const run = await fire({
    base: demo.target,
    connections: settings.connections,
    duration: settings.duration,
    requests,
  });
  const after = await demo.ask({ type: 'cpu' });
  const demoCpu = (after.cpu! - before.cpu!) / 1e6;
  const mainCpu = ((after.mainCpu ?? Number.NaN) - (before.mainCpu ?? Number.NaN)) / 1e6;
  if (profileFile) await demo.ask({ type: 'profile-stop', file: profileFile });
  // Let the last abandoned requests finish before the next window opens.
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { scenario, run, demoCpu, mainCpu, lines: demo.lines() - lines };
}

function describe(windows: readonly Window[]): string[] {
  const lines: string[] = [];
  const of = (scenario: Window['scenario']) => windows.filter((window) => window.scenario === scenario);
  const totals = (scenario: Window['scenario']) => {
    const runs = of(scenario);
    const ok = runs.reduce((sum, window) => sum + window.run.ok, 0);
    const seconds = runs.reduce((sum, window) => sum + window.run.seconds, 0);
    const failed = runs.reduce((sum, window) => sum + window.run.non2xx + window.run.errors, 0);
    const cpu = runs.reduce((sum, window) => sum + window.demoCpu, 0);
    const main = runs.reduce((sum, window) => sum + window.mainCpu, 0);
    const printed = runs.reduce((sum, window) => sum + window.lines, 0);
    const latencies = Float64Array.from(runs.flatMap((window) => window.run.latencies)).sort();
    return { ok, perSecond: ok / seconds, failed, cpu: (cpu / ok) * 1e6, main: (main / ok) * 1e6, printed, latencies };
  };
  const baseline = totals('baseline');
  const exchange = totals('exchange');
  for (const [name, total] of [
    ['client_credentials (baseline)', baseline],
    ['exchange, opaque actor token', exchange],
  ] as const) {
    lines.push(
      `  ${name.padEnd(30)} ${total.perSecond.toFixed(0).padStart(6)} req/s  p50 ${percentile(total.latencies, 50).toFixed(1)} ms  ` +
        `p99 ${percentile(total.latencies, 99).toFixed(1)} ms  demo CPU ${total.cpu.toFixed(0)} µs/req ` +
        `(main thread ${total.main.toFixed(0)})  ` +
        `${(total.printed / total.ok).toFixed(2)} lines/req  non-2xx or errors ${total.failed}`,
    );
  }
  const neighbours = windows.flatMap((window, index) => {
    if (window.scenario !== 'exchange') return [];
    const around = [windows[index - 1], windows[index + 1]].filter((other) => other?.scenario === 'baseline');
    return [rate(window) / (around.reduce((sum, other) => sum + rate(other!), 0) / around.length)];
  });
  neighbours.sort((a, b) => a - b);
  lines.push(
    `  exchange ÷ client_credentials: ${(exchange.perSecond / baseline.perSecond).toFixed(2)} ` +
      `(windows ÷ neighbouring baselines: median ${percentile(neighbours, 50).toFixed(2)}, ` +
      `${neighbours[0]!.toFixed(2)}–${neighbours.at(-1)!.toFixed(2)}); ` +
      `p99 ${(percentile(exchange.latencies, 99) / percentile(baseline.latencies, 99)).toFixed(2)}× the baseline's`,
    // On a machine shared with other work the rates drift; the CPU each request costs the demo drifts less.
    `  CPU per request, client_credentials ÷ exchange: ${(baseline.cpu / exchange.cpu).toFixed(2)} ` +
      `(main thread alone: ${(baseline.main / exchange.main).toFixed(2)})`,
  );
  return lines;
}

async function main(argv: readonly string[]): Promise<string[]> {
  const settings = parseSettings(argv);
  console.log(
    `demo path bench: ${new Date().toISOString()}, node ${process.version}; ${settings.rounds} rounds × ` +
      `${settings.duration} s at ${settings.connections} connections, B E B E … B; the demo in a child process`,
  );
  const profileDir = settings.profile
    ? join(process.cwd(), 'build', 'bench-profiles', `demo-${new Date().toISOString().replace(/[:.]/g, '-')}`)
    : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const demo = await startDemoProcess();
  const windows: Window[] = [];
  try {
    const issuer = `${demo.identity}/oidc`;
    // signIn needs only these two addresses of a Demo.
    const where = { identity: { issuer }, backend: { url: demo.backend } } as unknown as Demo;
    const baseline = [m2mRequest(demo.identity)];
    const pool = new TokenPool();
    const profileFile = (scenario: string) =>
      profileDir && join(profileDir, `${scenario}.${windows.length}.cpuprofile`);
    // Untimed: compiles the hot paths.
    await fire({
      base: demo.target,
      connections: settings.connections,
      duration: 1,
      requests: baseline,
    });
    for (let round = 0; round < settings.rounds; round += 1) {
      // A fresh sign-in each round: the demo's step-up wants one within the last 300 s.
      const actorToken = await signIn(where, { login: 'alice', password: 'alice-password' });
      const needed = tokensFor(windows, settings) - pool.usable(settings.duration * 1000 + 1000);
      if (needed > 0) {
        const minted = await fire({
          base: demo.target,
          connections: settings.connections,
          amount: needed,
          requests: [creationRequest(await m2mToken(demo.identity), pool, creationBody)],
        });
        if (minted.non2xx || minted.errors)
          throw new Error(`subject-token creation failed: ${JSON.stringify(minted.statuses)}`);
      }
      windows.push(await timed(demo, 'baseline', baseline, settings, profileFile('baseline')));
      windows.push(
        await timed(demo, 'exchange', [exchangeRequest(actorToken, pool)], settings, profileFile('exchange')),
      );
      if (pool.exhausted) throw new Error('the subject-token pool ran dry');
    }
    windows.push(await timed(demo, 'baseline', baseline, settings, profileFile('baseline')));
  } finally {
    await demo.stop();
  }
  for (const line of describe(windows)) console.log(line);
  if (profileDir) {
    for (const scenario of ['baseline', 'exchange'] as const) {
      const runs = windows.filter((window) => window.scenario === scenario);
      const files = windows.flatMap((window, index) =>
        window.scenario === scenario ? [join(profileDir, `${scenario}.${index}.cpuprofile`)] : [],
      );
      console.log(`\nCPU profile of the demo, ${scenario} (${files.length} windows, ${profileDir}):`);
      const requests = runs.reduce((sum, window) => sum + window.run.ok + window.run.non2xx, 0);
      for (const line of summarizeProfile(files, { requests, top: 30 })) console.log(line);
    }
  }
  const failed = windows.reduce((sum, window) => sum + window.run.non2xx + window.run.errors, 0);
  const requests = windows.reduce((sum, window) => sum + window.run.ok + window.run.non2xx, 0);
  return failed > requests / 1000 ? [`${failed} of ${requests} requests failed`] : [];
}

await runCommand('demo path bench', main);
