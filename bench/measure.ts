/**
 * One provider's run: the provider started in a child process on its store,
 * one check request per kind, the warm-up, then the timed windows in the
 * order of bench/schedule.ts, summed per scenario.
 */
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { scenariosRun, type Configuration, type Settings } from './command-line.js';
import { fire, type RequestSpec, type RunRecord } from './load.js';
import type { ServerStats } from './protocol.js';
import {
  baselineRequest,
  creationRequest,
  minimalSeedRequest,
  obtainCredentials,
  requestsFor,
  type Credentials,
} from './requests.js';
import { EXCHANGES, MINIMAL_SCENARIOS, type ScenarioName } from './scenarios.js';
import { endsRound, pairedRatios, roundOf, scheduleOf, tokensBefore, type Slot } from './schedule.js';
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

/** A configuration of a cohort, on its store. */
export interface CohortMember {
  config: Configuration;
  store: StoreServerOptions;
  profileDir: string | undefined;
}

/**
 * Runs configurations side by side, each on a provider of its own started
 * together: after every provider's warm-up, round by round, each provider's
 * round (B C B) in turn, the turns' order rotating. Providers compared with
 * one another (telemetry off, its no-op, a real SDK) so meet the machine's
 * drift alike: one after the other, minutes apart, their ratios differed by
 * more than what they are compared for. One configuration alone runs its
 * rounds as one schedule (bench/schedule.ts).
 */
export async function measureCohort(
  members: readonly CohortMember[],
  settings: Settings,
): Promise<ConfigurationResult[]> {
  const opened: Measured[] = [];
  try {
    for (const member of members) opened.push(await openMeasured(member, settings));
    for (const measured of opened) await measured.measurement.prepare();
    const { rounds } = settings;
    if (opened.length === 1) {
      await opened[0]!.measurement.windows(scheduleOf(opened[0]!.measurement.scenarios, rounds), rounds);
    } else {
      for (let round = 0; round < rounds; round += 1) {
        for (let turn = 0; turn < opened.length; turn += 1) {
          const { measurement } = opened[(round + turn) % opened.length]!;
          await measurement.windows(roundOf(measurement.scenarios, round), rounds);
        }
      }
    }
    const results: ConfigurationResult[] = [];
    for (const measured of opened) results.push(await measured.finish());
    return results;
  } finally {
    for (const measured of opened.reverse()) await measured.close();
  }
}

/** A provider started for a configuration, with the processes beside it. */
interface Measured {
  measurement: Measurement;
  finish(): Promise<ConfigurationResult>;
  close(): Promise<void>;
}

async function openMeasured({ config, store, profileDir }: CohortMember, settings: Settings): Promise<Measured> {
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
  let server: ServerProcess | undefined;
  const close = async (): Promise<void> => {
    await server?.close();
    await deliverer?.close();
    await receiver?.close();
  };
  try {
    // Delivered elsewhere: a second provider process on the same store delivers the outbox and serves nothing.
    if (receiver && config.deliveredElsewhere) {
      deliverer = await startServer({ ...options, execArgv: [], createStream: false });
    }
    // The receiver, and a provider that only delivers, stand for machines of their own: on the bench's
    // shared cores they run at the lowest priority, on what the measured provider leaves idle.
    for (const pid of [receiver?.pid, deliverer?.pid]) if (pid !== undefined) setPriority(pid, BACKGROUND_PRIORITY);
    server = await startServer(config.deliveredElsewhere ? { ...options, deliverOutbox: false } : options);
    const credentials = await obtainCredentials(server.base, { namedActor: config.standingGrant === true });
    const measurement = new Measurement(
      config,
      settings,
      server,
      credentials,
      settings.profile ? profileDir : undefined,
    );
    return {
      measurement,
      finish: async () => ({
        ...(await measurement.result()),
        abortedLogged: serverLog.aborted,
        ...(receiver ? { webhooksReceived: await receiver.deliveries() } : {}),
      }),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

class Measurement {
  /** The plugin's subject tokens, and the minimal grant's (bench/minimal-grant.ts). */
  readonly #pools = { plugin: new TokenPool(), minimal: new TokenPool() };
  readonly #untimed = { requests: 0, failed: 0 };
  readonly #bestRate: Partial<Record<ScenarioName, number>> = {};
  readonly #totals: Partial<Record<ScenarioName, ScenarioTotals>> = {};
  /** Timed windows so far: a profile's file is named by its window's number. */
  #windowCount = 0;
  readonly scenarios: readonly ScenarioName[];

  constructor(
    readonly config: Configuration,
    readonly settings: Settings,
    readonly server: ServerProcess,
    readonly credentials: Credentials,
    readonly profileDir: string | undefined,
  ) {
    this.scenarios = scenariosRun(config, settings.only);
  }

  /** One check request per kind, so that a broken setup fails with its reason rather than as a rate; then the warm-up. */
  async prepare(): Promise<void> {
    await checkOnce(this.server.base, baselineRequest(), 200, 'client_credentials');
    const { subjectTokenBody } = this.credentials;
    const creation = creationRequest(await this.credentials.m2m(), undefined, subjectTokenBody);
    await checkOnce(this.server.base, creation, 201, 'subject token creation');
    if (this.scenarios.some((scenario) => MINIMAL_SCENARIOS.includes(scenario)))
      await checkOnce(this.server.base, minimalSeedRequest(new TokenPool()), 201, "the minimal grant's subject token");
    await this.#warmUp(this.scenarios);
  }

  async result(): Promise<Omit<ConfigurationResult, 'abortedLogged'>> {
    // With a webhook subscription: the last window's deliveries made before the figures are read.
    await this.server.settle();
    return {
      configuration: this.config,
      totals: this.#totals,
      endStats: await this.server.stats(),
      untimed: this.#untimed,
      poolExhausted: this.#pools.plugin.exhausted + this.#pools.minimal.exhausted,
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

  /**
   * The timed windows of `schedule`, which starts and ends with a baseline
   * window when it has one, added to the totals; `rounds` is what the log says a round is out of.
   */
  async windows(schedule: readonly Slot[], rounds: number): Promise<void> {
    const { duration } = this.settings;
    const rates: number[] = [];
    let parts: string[] = [];
    for (const [index, { scenario, round }] of schedule.entries()) {
      if (tokensBefore(schedule, index)) await this.#topUp(schedule[index + 1]!.scenario, duration, duration + 1);
      this.#windowCount += 1;
      const profileFile = this.profileDir && join(this.profileDir, `${scenario}.${this.#windowCount}.cpuprofile`);
      const window = await this.#window(scenario, duration, profileFile);
      addWindow((this.#totals[scenario] ??= emptyTotals()), window);
      const { run } = window;
      rates.push(run.ok / run.seconds);
      parts.push(`${scenario} ${Math.round(run.ok / run.seconds)}/s${run.non2xx ? ` (${run.non2xx} non-2xx)` : ''}`);
      if (endsRound(schedule, index)) {
        console.log(`  ${this.config.name} round ${round + 1}/${rounds}: ${parts.join(', ')}`);
        parts = [];
      }
    }
    for (const [scenario, ratio] of pairedRatios(schedule, rates)) this.#totals[scenario]!.pairedRatios.push(ratio);
  }

  /** One window of `scenario`; an exchange's subject tokens are topped up first. */
  async #window(scenario: ScenarioName, seconds: number, profileFile?: string): Promise<WindowResult> {
    if (EXCHANGES.includes(scenario)) await this.#topUp(scenario, seconds);
    const requests = await requestsFor(scenario, this.credentials, this.#poolOf(scenario));
    const window = await timedWindow(this.server, {
      connections: this.settings.connections,
      seconds,
      requests,
      profileFile,
    });
    this.#bestRate[scenario] = Math.max(this.#bestRate[scenario] ?? 0, window.run.ok / window.run.seconds);
    return window;
  }

  #poolOf(scenario: ScenarioName): TokenPool {
    return MINIMAL_SCENARIOS.includes(scenario) ? this.#pools.minimal : this.#pools.plugin;
  }

  /**
   * Outside any window: enough young tokens for one run of `scenario` of `seconds`
   * starting `startsIn` seconds from now (tokensNeeded).
   */
  async #topUp(scenario: ScenarioName, seconds: number, startsIn = 0): Promise<void> {
    const { connections } = this.settings;
    const pool = this.#poolOf(scenario);
    // Each pool's rate from its own scenarios: the minimal grant serves more than the exchanges.
    const sharing = EXCHANGES.filter((name) => this.#poolOf(name) === pool);
    const rates = {
      bestExchange: Math.max(...sharing.map((name) => this.#bestRate[name] ?? 0)),
      baseline: this.#bestRate.baseline,
    };
    const missing = tokensNeeded(rates, seconds, connections) - pool.usable((startsIn + seconds) * 1000 + 5000);
    if (missing <= 0) return;
    const run = await fire({
      base: this.server.base,
      connections,
      amount: Math.max(missing, connections),
      requests: [
        MINIMAL_SCENARIOS.includes(scenario)
          ? minimalSeedRequest(pool)
          : creationRequest(await this.credentials.m2m(), pool, this.credentials.subjectTokenBody),
      ],
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
