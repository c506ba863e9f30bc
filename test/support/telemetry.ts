import { readFileSync } from 'node:fs';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';

/** A real OpenTelemetry SDK whose spans and metrics stay in memory, for the `telemetry` option. */
export interface InMemoryTelemetry {
  options: { tracerProvider: BasicTracerProvider; meterProvider: MeterProvider };
  spans(): ReadableSpan[];
  /** Every metric, collected now (cumulative). */
  metrics(): Promise<MetricData[]>;
  close(): Promise<void>;
}

export function inMemoryTelemetry(): InMemoryTelemetry {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Read on demand (forceFlush): an interval longer than any test.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    options: { tracerProvider, meterProvider },
    spans: () => spans.getFinishedSpans(),
    async metrics() {
      exporter.reset();
      await reader.forceFlush();
      return exporter.getMetrics().flatMap((resource) => resource.scopeMetrics.flatMap((scope) => scope.metrics));
    },
    async close() {
      await Promise.all([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** The names a table of docs/operations.md lists under `heading`: each row's first cell, in backquotes. */
export function documentedNames(heading: string): string[] {
  const text = readFileSync(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/operations.md has no "${heading}"`);
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(/\n#{2,3} /);
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^\| `([^`]+)` \|/gm)].map(([, name]) => name!);
}
