import { invalidOption } from '../errors.js';

/**
 * The `telemetry` option. Absent: the providers registered globally with
 * `@opentelemetry/api` (as the OpenTelemetry Node SDK does), when that package
 * is installed; none (nothing loaded, nothing recorded) when it is not.
 * `false`: no telemetry at all. An object: these providers, and the global
 * ones for a provider it leaves out.
 *
 * Typed structurally, so that the package's types need no `@opentelemetry/api`.
 */
export type TelemetryOptions =
  | false
  | {
      /** An OpenTelemetry `TracerProvider` (`trace.getTracerProvider()` by default). */
      tracerProvider?: { getTracer(name: string, version?: string): unknown } | undefined;
      /** An OpenTelemetry `MeterProvider` (`metrics.getMeterProvider()` by default). */
      meterProvider?: { getMeter(name: string, version?: string): unknown } | undefined;
    };

const NAMES = new Set(['tracerProvider', 'meterProvider']);

export function checkTelemetryOptions(telemetry: unknown): void {
  if (telemetry === undefined || telemetry === false) return;
  if (typeof telemetry !== 'object' || telemetry === null || Array.isArray(telemetry)) {
    throw invalidOption('createImpersonation', 'telemetry', 'must be false or { tracerProvider?, meterProvider? }');
  }
  for (const name of Object.keys(telemetry)) {
    if (!NAMES.has(name)) throw invalidOption('createImpersonation', `telemetry.${name}`, 'is not an option');
  }
  const { tracerProvider, meterProvider } = telemetry as Record<string, { getTracer?: unknown; getMeter?: unknown }>;
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== 'function') {
    throw invalidOption('createImpersonation', 'telemetry.tracerProvider', 'must be a TracerProvider (getTracer())');
  }
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== 'function') {
    throw invalidOption('createImpersonation', 'telemetry.meterProvider', 'must be a MeterProvider (getMeter())');
  }
}
