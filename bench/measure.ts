/**
 * One provider's run: the provider started in a child process on its store,
 * one check request per kind, the warm-up, then the timed windows in the
 * order of bench/schedule.ts, summed per scenario.
 */
import { setPriority } from 'node:os';
import { join } from 'node:path';
import type { Configuration, Settings } from './command-line.js';
import { fire, type RequestSpec, type RunRecord } from './load.js';
import type { ServerStats } from './protocol.js';
import { baselineRequest, creationRequest, obtainCredentials, requestsFor, type Credentials } from './requests.js';
import { EXCHANGES, SCENARIOS, type ScenarioName } from './scenarios.js';
import { endsRound, pairedRatios, scheduleOf, tokensBefore } from './schedule.js';
import { ServerLog } from './server-log.js';
import { startServer, type ServerProcess, type ServerProcessOptions } from './server-process.js';
import type { StoreServerOptions } from './stores.js';
import { TokenPool, tokensNeeded } from './token-pool.js';
import { startWebhookReceiver, type WebhookReceiver } from './webhook-receiver.js';
import { timedWindow, type WindowResult } from './window.js';

/** A scenario's windows: each one's run, the CPU figures of WindowResult summed over them. */
export interface ScenarioTotals extends Omit<WindowResult, 'run'> {
  runs: RunRecord[];
  /** Each window's rate over the mean of the baseline windows just before and after it. */
  pairedRatios: number[];
}

export interface ConfigurationResult {
  configuration: Configuration;
  totals: Partial<Record<ScenarioName, ScenarioTotals>>;
  endStats: ServerStats;
  untimed: { requests: number; failed: number };
  /** Exchange requests that found the pool empty (and sent an unknown token). */
  poolExhausted: number;
  /** Abandoned requests the provider logged as "Error: aborted". */
  abortedLogged: number;
  /** With a webhook subscription: the deliveries the receiver answered. */
  webhooksReceived?: number;
}

/** The niceness of the processes that stand for other machines (the lowest priority). */
const BACKGROUND_PRIORITY = 19;

/** Runs one configuration on a provider of its own; `profileDir` is its folder of CPU profiles, if any. */
export async function measureConfiguration(
  config: Configuration,
  settings: Settings,
  store: StoreServerOptions,
  profileDir: string | undefined,
): Promise<ConfigurationResult> {
  const serverLog = new ServerLog();
  const receiver: WebhookReceiver | undefined = config.webhooks ? await startWebhookReceiver() : undefined;
  const options: ServerProcessOptions = {
    adapter: config.adapter,
    deployment: config.deployment,
    telemetry: config.telemetry,
    standingGrant: config.standingGrant === true,
    redisUrl: settings.redisUrl,
    ...store,
    execArgv: profileDir && settings.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', join(profileDir, 'process')] : [],
    log: serverLog.line,
    ...(receiver ? { webhookUrl: receiver.url } : {}),
  };
  let deliverer: ServerProcess | undefined;
  try {
    // Delivered elsewhere: a second provider process on the same store delivers the outbox and serves nothing.
    if (receiver && config.deliveredElsewhere) {
      deliverer = await startServer({ ...options, execArgv: [], createStream: false });
    }
    // The receiver, and a provider that only delivers, stand for machines of their own: on the bench's
    // shared cores they run at the lowest priority, on what the measured provider leaves idle.
    for (const pid of [receiver?.pid, deliverer?.pid]) if (pid !== undefined) setPriority(pid, BACKGROUND_PRIORITY);
    const server = await startServer(config.deliveredElsewhere ? { ...options, deliverOutbox: false } : options);
    try {
      const credentials = await obtainCredentials(server.base, { namedActor: config.standingGrant === true });
      const measurement = new Measurement(config, settings, server, credentials);
      const result = await measurement.run(settings.profile ? profileDir : undefined);
      return {
        ...result,
        abortedLogged: serverLog.aborted,
        ...(receiver ? { webhooksReceived: await receiver.deliveries() } : {}),
      };
    } finally {
      await server.close();
    }
  } finally {
    await deliverer?.close();
    await receiver?.close();
  }
}

class Measurement {
  readonly #pool = new TokenPool();
  readonly #untimed = { requests: 0, failed: 0 };
  readonly #bestRate: Partial<Record<ScenarioName, number>> = {};

  constructor(
    readonly config: Configuration,
    readonly settings: Settings,
    readonly server: ServerProcess,
    readonly credentials: Credentials,
  ) {}

  async run(profileDir: string | undefined): Promise<Omit<ConfigurationResult, 'abortedLogged'>> {
    const { only } = this.settings;
    const scenarios = SCENARIOS.filter(
      (name) => (!only || only.includes(name)) && (!this.config.scenarios || this.config.scenarios.includes(name)),
    );
    // One check request per kind, so that a broken setup fails with its reason rather than as a rate.
    await checkOnce(this.server.base, baselineRequest(), 200, 'client_credentials');
    const { subjectTokenBody } = this.credentials;
    const creation = creationRequest(await this.credentials.m2m(), undefined, subjectTokenBody);
    await checkOnce(this.server.base, creation, 201, 'subject token creation');
    await this.#warmUp(scenarios);
    const totals = await this.#timedWindows(scenarios, profileDir);
    // With a webhook subscription: the last window's deliveries made before the figures are read.
    await this.server.settle();
    return {
      configuration: this.config,
      totals,
      endStats: await this.server.stats(),
      untimed: this.#untimed,
      poolExhausted: this.#pool.exhausted,
    };
  }

  /** Warm-up (JIT, connections, caches), untimed; also the first rate estimates. */
  async #warmUp(scenarios: readonly ScenarioName[]): Promise<void> {
    const { warmup } = this.settings;
    for (const scenario of warmup ? scenarios : []) {
      const { run } = await this.#window(scenario, warmup);
      this.#countUntimed(run);
      if (run.non2xx || run.errors) {
        console.log(
          `  warm-up ${scenario}: ${run.non2xx} non-2xx (${JSON.stringify(run.statuses)}), ${run.errors} connection errors`,
        );
      }
    }
  }

  async #timedWindows(
    scenarios: readonly ScenarioName[],
    profileDir: string | undefined,
  ): Promise<Partial<Record<ScenarioName, ScenarioTotals>>> {
    const { duration, rounds } = this.settings;
    const schedule = scheduleOf(scenarios, rounds);
    const totals: Partial<Record<ScenarioName, ScenarioTotals>> = {};
    const rates: number[] = [];
    let parts: string[] = [];
    for (const [index, { scenario, round }] of schedule.entries()) {
      if (tokensBefore(schedule, index)) await this.#topUp(duration, duration + 1);
      const profileFile = profileDir && join(profileDir, `${scenario}.${index + 1}.cpuprofile`);
      const window = await this.#window(scenario, duration, profileFile);
      addWindow((totals[scenario] ??= emptyTotals()), window);
      const { run } = window;
      rates.push(run.ok / run.seconds);
      parts.push(`${scenario} ${Math.round(run.ok / run.seconds)}/s${run.non2xx ? ` (${run.non2xx} non-2xx)` : ''}`);
      if (endsRound(schedule, index)) {
        console.log(`  ${this.config.name} round ${round + 1}/${rounds}: ${parts.join(', ')}`);
        parts = [];
      }
    }
    for (const [scenario, ratio] of pairedRatios(schedule, rates)) totals[scenario]!.pairedRatios.push(ratio);
    return totals;
  }

  /** One window of `scenario`; an exchange's subject tokens are topped up first. */
  async #window(scenario: ScenarioName, seconds: number, profileFile?: string): Promise<WindowResult> {
    if (EXCHANGES.includes(scenario)) await this.#topUp(seconds);
    const requests = await requestsFor(scenario, this.credentials, this.#pool);
    const window = await timedWindow(this.server, {
      connections: this.settings.connections,
      seconds,
      requests,
      profileFile,
    });
    this.#bestRate[scenario] = Math.max(this.#bestRate[scenario] ?? 0, window.run.ok / window.run.seconds);
    return window;
  }

  /**
   * Outside any window: enough young tokens for one exchange run of `seconds`
   * starting `startsIn` seconds from now (tokensNeeded).
   */
  async #topUp(seconds: number, startsIn = 0): Promise<void> {
    const { connections } = this.settings;
    const rates = {
      bestExchange: Math.max(...EXCHANGES.map((name) => this.#bestRate[name] ?? 0)),
      baseline: this.#bestRate.baseline,
    };
    const missing = tokensNeeded(rates, seconds, connections) - this.#pool.usable((startsIn + seconds) * 1000 + 5000);
    if (missing <= 0) return;
    const run = await fire({
      base: this.server.base,
      connections,
      amount: Math.max(missing, connections),
      requests: [creationRequest(await this.credentials.m2m(), this.#pool, this.credentials.subjectTokenBody)],
    });
    this.#countUntimed(run);
  }

  #countUntimed(run: RunRecord): void {
    this.#untimed.requests += run.ok + run.non2xx;
    this.#untimed.failed += run.non2xx + run.errors;
  }
}

function emptyTotals(): ScenarioTotals {
  return { runs: [], pairedRatios: [], serverCpu: 0, mainCpu: 0, v8Cpu: 0, otherCpu: 0 };
}

function addWindow(totals: ScenarioTotals, window: WindowResult): void {
  totals.runs.push(window.run);
  totals.serverCpu += window.serverCpu;
  totals.mainCpu += window.mainCpu;
  totals.v8Cpu += window.v8Cpu;
  totals.otherCpu += window.otherCpu;
}

async function checkOnce(base: string, spec: RequestSpec, expected: number, what: string): Promise<void> {
  // Built as autocannon builds it: a request whose body changes each time has it set by setupRequest.
  const request = typeof spec.setupRequest === 'function' ? spec.setupRequest({ ...spec }, {}) : spec;
  const response = await fetch(`${base}${request.path}`, {
    method: request.method ?? 'GET',
    headers: request.headers as Record<string, string>,
    body: request.body as string,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (response.status !== expected) throw new Error(`${what}: expected ${expected}, got ${response.status} ${text}`);
}
