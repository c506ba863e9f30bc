/**
 * What the plugin's telemetry adds to one exchange, in one process, without
 * the exchange itself: the grant handler's wrapper and four steps (subject,
 * policy, claims, commit), each doing nothing, with telemetry off, on the
 * API's no-op providers, and on a real SDK (bench/telemetry.ts: batch span
 * processor, exporting to nowhere).
 *
 *   node build/bench/telemetry-cost.js [--count N] [--json]
 *
 * `npm run bench` runs it in a child process whenever it measures the
 * telemetry setups (bench/child-measurements.ts), and sets the SDK's cost
 * beside the exchange's main-thread time per request (bench/targets.ts): on a
 * shared machine the load test's ratios spread wider than the 0.03 the
 * target allows, the time in one process does not.
 */
import { fileURLToPath } from 'node:url';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { tracedExchange, type ExchangeStep } from '../lib/telemetry/exchange.js';
import type { TelemetryOptions } from '../lib/telemetry/options.js';
import { openTelemetry } from '../lib/telemetry/telemetry.js';
import { positiveInteger } from './flags.js';
import { TELEMETRY_SETUPS, telemetryOption, type TelemetrySetup } from './telemetry.js';

const STEPS = ['subject', 'policy', 'claims', 'commit'];
const WARM_UP = 20_000;
/**
 * Each setup is timed this many times, taking turns; the fastest counts (the
 * least disturbed by other work). Timed in CPU time (process.cpuUsage): a
 * turn the operating system gave another process's work is not counted.
 */
const TURNS = 5;

export interface TelemetryCostResult {
  exchanges: number;
  steps: number;
  /** Microseconds of CPU per exchange, by setup. */
  micros: Record<TelemetrySetup, number>;
}

async function handler(_ctx: KoaContextWithOIDC, step: ExchangeStep): Promise<void> {
  for (const name of STEPS) await step(name)(Promise.resolve());
}

/** The handler as install() registers it under `option`. */
function registered(option: TelemetryOptions | undefined): (ctx: KoaContextWithOIDC) => Promise<void> {
  return tracedExchange(openTelemetry(option), handler);
}

export async function measureTelemetryCost(exchanges: number): Promise<TelemetryCostResult> {
  const ctx = { oidc: { client: { clientId: 'console' } } } as unknown as KoaContextWithOIDC;
  const handlers = TELEMETRY_SETUPS.map((setup) => {
    const { telemetry } = telemetryOption(setup) as { telemetry?: TelemetryOptions };
    return { setup, exchange: registered(telemetry) };
  });
  for (const { exchange } of handlers) for (let i = 0; i < WARM_UP; i++) await exchange(ctx);
  const micros = Object.fromEntries(TELEMETRY_SETUPS.map((setup) => [setup, Infinity])) as Record<
    TelemetrySetup,
    number
  >;
  for (let turn = 0; turn < TURNS; turn++) {
    for (const { setup, exchange } of handlers) {
      const started = process.cpuUsage();
      for (let i = 0; i < exchanges; i++) await exchange(ctx);
      const { user, system } = process.cpuUsage(started);
      micros[setup] = Math.min(micros[setup], (user + system) / exchanges);
    }
  }
  return { exchanges, steps: STEPS.length, micros };
}

/** The lines `npm run bench` prints. */
export function describeTelemetryCost(result: TelemetryCostResult): string[] {
  const each = TELEMETRY_SETUPS.map((setup) => `${setup} ${result.micros[setup].toFixed(1)} µs`).join(', ');
  return [
    `telemetry in one process, the exchange's wrapper and ${result.steps} steps that do nothing ` +
      `(fastest of ${TURNS} × ${result.exchanges.toLocaleString('en')} exchanges): ${each} of CPU per exchange`,
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await measureTelemetryCost(positiveInteger(process.argv, '--count', 100_000));
  if (process.argv.includes('--json')) console.log(JSON.stringify(result));
  else for (const line of describeTelemetryCost(result)) console.log(line);
  process.exit(0);
}
