import { optionChecks, type OptionChecks } from '../config/checks.js';

/** The `telemetry` option: absent, the global providers when `@opentelemetry/api` is installed; `false`, none; typed structurally. */
export type TelemetryOptions =
  | false
  | {
      /** An OpenTelemetry `TracerProvider` (`trace.getTracerProvider()` by default). */
      tracerProvider?: { getTracer(name: string, version?: string): unknown } | undefined;
      /** An OpenTelemetry `MeterProvider` (`metrics.getMeterProvider()` by default). */
      meterProvider?: { getMeter(name: string, version?: string): unknown } | undefined;
    };

const check: OptionChecks = optionChecks('createImpersonation');

export function checkTelemetryOptions(telemetry: unknown): void {
  if (telemetry === undefined || telemetry === false) return;
  if (typeof telemetry !== 'object' || telemetry === null || Array.isArray(telemetry))
    check.fail('telemetry', 'must be false or { tracerProvider?, meterProvider? }');
  check.known(telemetry, ['tracerProvider', 'meterProvider'], 'telemetry.');
  const { tracerProvider, meterProvider } = telemetry as Record<string, { getTracer?: unknown; getMeter?: unknown }>;
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== 'function')
    check.fail('telemetry.tracerProvider', 'must be a TracerProvider (getTracer())');
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== 'function')
    check.fail('telemetry.meterProvider', 'must be a MeterProvider (getMeter())');
}
