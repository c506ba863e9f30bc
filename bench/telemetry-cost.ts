/**
 * `node build/bench/telemetry-cost.js`: what the plugin's telemetry adds to one
 * exchange, in one process, without the exchange itself: the grant handler's
 * wrapper and four steps (subject, policy, claims, commit), each doing nothing,
 * with telemetry off, on the API's no-op providers, and on a real SDK
 * (bench/telemetry.ts: batch span processor, exporting to nowhere).
 */
import type { KoaContextWithOIDC } from 'oidc-provider';
import { exchangeStep, tracedGrants } from '../lib/telemetry/exchange.js';
import type { TelemetryOptions } from '../lib/telemetry/options.js';
import { openTelemetry } from '../lib/telemetry/telemetry.js';
import { TELEMETRY_SETUPS, telemetryOption } from './telemetry.js';

const STEPS = ['subject', 'policy', 'claims', 'commit'];
const WARM_UP = 20_000;
const EXCHANGES = 100_000;

async function handler(ctx: KoaContextWithOIDC): Promise<void> {
  for (const step of STEPS) await exchangeStep(ctx, step, async () => undefined);
}

/** The handler as install() registers it under `option`. */
function registered(option: TelemetryOptions | undefined): (ctx: KoaContextWithOIDC) => Promise<void> {
  let registeredHandler: unknown;
  const provider = { registerGrantType: (_name: string, wrapped: unknown) => (registeredHandler = wrapped) };
  tracedGrants(provider as never, openTelemetry(option)).registerGrantType('token-exchange', handler as never);
  return registeredHandler as (ctx: KoaContextWithOIDC) => Promise<void>;
}

for (const setup of TELEMETRY_SETUPS) {
  const { telemetry } = telemetryOption(setup) as { telemetry?: TelemetryOptions };
  const exchange = registered(telemetry);
  const ctx = { oidc: { client: { clientId: 'console' } } } as unknown as KoaContextWithOIDC;
  for (let i = 0; i < WARM_UP; i++) await exchange(ctx);
  const started = performance.now();
  for (let i = 0; i < EXCHANGES; i++) await exchange(ctx);
  const micros = ((performance.now() - started) * 1000) / EXCHANGES;
  console.log(`telemetry ${setup}: ${micros.toFixed(1)} µs per exchange (the wrapper and ${STEPS.length} steps)`);
}
process.exit(0);
