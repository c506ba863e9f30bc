import { invalidOption } from '../errors.js';

/** The `telemetry` option: absent, the global providers when `@opentelemetry/api` is installed; `false`, none; typed structurally. */
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
