/**
 * The OpenTelemetry setups the bench's `--telemetry` flag compares, each on a
 * provider of its own (bench/server.ts, BENCH_TELEMETRY):
 *
 * - `off`: `telemetry: false`, the same code path as `@opentelemetry/api` not installed;
 * - `no-op`: the option left out, the API installed, no SDK registered (its no-op providers);
 * - `sdk`: a real SDK, the OpenTelemetry SDK's batch span processor and a metric reader, exporting to nowhere.
 */
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';

export const TELEMETRY_SETUPS = ['off', 'no-op', 'sdk'] as const;
export type TelemetrySetup = (typeof TELEMETRY_SETUPS)[number];

/** Export results are numbers fixed by the SDK: 0 is success. */
const SUCCESS = { code: 0 };

/** Spans and metrics batched and exported as a deployment's would be, then dropped. */
const nowhere: SpanExporter & PushMetricExporter = {
  export: (_items: unknown, done: (result: typeof SUCCESS) => void) => done(SUCCESS),
  shutdown: async () => {},
  forceFlush: async () => {},
};

/** The plugin's `telemetry` option for `setup`. */
export function telemetryOption(setup: TelemetrySetup | undefined): object {
  if (setup === 'off') return { telemetry: false };
  if (setup !== 'sdk') return {};
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(nowhere)] });
  const reader = new PeriodicExportingMetricReader({ exporter: nowhere, exportIntervalMillis: 10_000 });
  return { telemetry: { tracerProvider, meterProvider: new MeterProvider({ readers: [reader] }) } };
}
