import type {
  Attributes,
  Meter,
  MeterProvider,
  ObservableCallback,
  Span,
  SpanKind,
  Tracer,
  TracerProvider,
} from '@opentelemetry/api';
import type * as OpenTelemetryApi from '@opentelemetry/api';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { TelemetryOptions } from './options.js';

type Api = typeof OpenTelemetryApi;

/** The instrumentation scope of every span and instrument. */
export const SCOPE = 'oidc-provider-impersonation';

/** Error types counted apart at most; past them, a refusal counts as `_OTHER`. */
const MAX_ERROR_TYPES = 64;

/** SpanKind and SpanStatusCode, as numbers: the enums' values are fixed by the API's specification. */
export const KIND = { internal: 0 as SpanKind, server: 1 as SpanKind, client: 2 as SpanKind };
const STATUS_ERROR = 2;

/** The spans and instruments of one createImpersonation(); built only with `@opentelemetry/api` installed and the option on. */
export class Telemetry {
  readonly api: Api;
  readonly tracer: Tracer;
  /** `impersonation.instance`: the series of one createImpersonation(), which another in the process does not overwrite. */
  readonly instance = randomUUID();
  /** The meter provider now: the option's, or the global one, which an SDK may register after createImpersonation(). */
  readonly #meterProvider: () => MeterProvider;
  #built: { provider: MeterProvider; instruments: Instruments; metered: boolean } | undefined;
  readonly #observers: Array<{ gauge: Observed; callback: ObservableCallback }> = [];
  /** Exchanges answered, by outcome and error type: each attribute set built once, and a count beside it. */
  readonly #exchanges = new Map<string, { attributes: Attributes; count: number }>();
  /** The sessions this instance issued, by id: their expiry in ms (lib/telemetry/observe.ts). */
  readonly sessions = new Map<string, number>();

  constructor(api: Api, options: Exclude<TelemetryOptions, false>) {
    this.api = api;
    // The global tracer provider is a proxy that follows the SDK registered later; the meter provider is not.
    const tracerProvider = (options.tracerProvider as TracerProvider | undefined) ?? api.trace.getTracerProvider();
    this.tracer = tracerProvider.getTracer(SCOPE);
    const meterProvider = options.meterProvider as MeterProvider | undefined;
    this.#meterProvider = meterProvider ? () => meterProvider : () => api.metrics.getMeterProvider();
    this.observe('exchanges', (result) => {
      for (const { attributes, count } of this.#exchanges.values()) result.observe(count, attributes);
    });
    const instance = { 'impersonation.instance': this.instance };
    this.observe('activeSessions', (result) => {
      const now = Date.now();
      for (const [id, until] of this.sessions) if (until <= now) this.sessions.delete(id);
      result.observe(this.sessions.size, instance);
    });
  }

  /** Counts an exchange answered, as an observable counter: no attribute set is built per exchange. */
  countExchange(outcome: 'issued' | 'refused', errorType?: string): void {
    const key = errorType === undefined ? outcome : `${outcome} ${errorType}`;
    let counted = this.#exchanges.get(key);
    if (!counted) {
      if (errorType !== undefined && errorType !== '_OTHER' && this.#exchanges.size >= MAX_ERROR_TYPES) {
        this.countExchange(outcome, '_OTHER');
        return;
      }
      const attributes: Attributes = { 'impersonation.instance': this.instance, 'impersonation.outcome': outcome };
      if (errorType !== undefined) attributes['error.type'] = errorType;
      counted = { attributes, count: 0 };
      this.#exchanges.set(key, counted);
    }
    counted.count += 1;
    // The meter provider in force: an SDK registered since gets the observers from here on.
    void this.metrics;
  }

  /** The instruments, on the meter provider in force now: whenever the SDK starts, its metrics are complete from then on. */
  get metrics(): Instruments {
    const provider = this.#meterProvider();
    if (this.#built?.provider !== provider) {
      const meter = provider.getMeter(SCOPE);
      const instruments = instrumentsOf(meter);
      for (const { gauge, callback } of this.#observers) instruments[gauge].addCallback(callback);
      this.#built = { provider, instruments, metered: meter !== this.api.createNoopMeter() };
    }
    return this.#built.instruments;
  }

  /** Whether anything collects the metrics: the API's no-op meter (no SDK, no option) reads no gauge. */
  get metered(): boolean {
    void this.metrics;
    return this.#built!.metered;
  }

  /** Reads `gauge` through `callback` at each collection, on whichever meter provider is in force. */
  observe(gauge: Observed, callback: ObservableCallback): void {
    this.#observers.push({ gauge, callback });
    this.metrics[gauge].addCallback(callback);
  }

  /** A span under the active context, ended when `run` settles; an error marks it and passes on. */
  async inSpan<T>(name: string, kind: SpanKind, attributes: Attributes, run: (span: Span) => Promise<T>): Promise<T> {
    const { api } = this;
    const parent = api.context.active();
    const span = this.tracer.startSpan(name, { kind, attributes }, parent);
    return endedWith(
      span,
      api.context.with(api.trace.setSpan(parent, span), () => run(span)),
    );
  }
}

/** What `work` settles to, `span` ended once it has; an error marks the span and passes on. */
export async function endedWith<T>(span: Span, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    markError(span, errorTypeOf(error));
    throw error;
  } finally {
    span.end();
  }
}

/** Marks a span failed with `error.type` only: a message may carry what the caller sent. */
export function markError(span: Span, type: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: STATUS_ERROR });
}

/** An OAuth error's code, a thrown error's class; never its message. */
export function errorTypeOf(error: unknown): string {
  const code = (error as { error?: unknown } | undefined)?.error;
  if (typeof code === 'string' && /^[\w.-]{1,64}$/.test(code)) return code;
  const name = (error as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && /^\w{1,64}$/.test(name) ? name : '_OTHER';
}

type Observed = 'exchanges' | 'outboxBacklog' | 'outboxOldestAge' | 'activeSessions';

type Instruments = ReturnType<typeof instrumentsOf>;

/** Bucket edges in seconds: an append takes 0.1 to 10 ms, a delivery milliseconds to an hour of retries. */
const APPEND_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const DELAY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

function instrumentsOf(meter: Meter) {
  return {
    exchanges: meter.createObservableCounter('impersonation.token_exchange.requests', {
      description:
        'Token exchanges answered, by impersonation.instance, impersonation.outcome (issued, refused) and error.type',
      unit: '{request}',
    }),
    deliveryDelay: meter.createHistogram('impersonation.outbox.delivery.delay', {
      description: 'From an event (a stop) to its delivery to a webhook or an SSF receiver, by impersonation.event',
      unit: 's',
      advice: { explicitBucketBoundaries: DELAY_BUCKETS },
    }),
    trailAppend: meter.createHistogram('impersonation.audit.append.duration', {
      description: 'Appends to the durable audit trail',
      unit: 's',
      advice: { explicitBucketBoundaries: APPEND_BUCKETS },
    }),
    outboxBacklog: meter.createObservableGauge('impersonation.outbox.backlog', {
      description: 'Outbox entries waiting and dead letters kept, per subscription, across every instance',
      unit: '{entry}',
    }),
    outboxOldestAge: meter.createObservableGauge('impersonation.outbox.oldest_age', {
      description: "Age of each subscription's oldest outbox entry waiting (0 when none waits), across every instance",
      unit: 's',
    }),
    activeSessions: meter.createObservableGauge('impersonation.sessions.active', {
      description:
        'Impersonation sessions this instance issued that have not ended or expired, by impersonation.instance',
      unit: '{session}',
    }),
  };
}

/** `@opentelemetry/api` when installed (optional peer), null when not; loaded synchronously on first use. */
let loaded: Api | null | undefined;

/** The telemetry of `options`, or undefined: `false`, or `@opentelemetry/api` not installed. */
export function openTelemetry(options: TelemetryOptions | undefined): Telemetry | undefined {
  if (options === false) return undefined;
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@opentelemetry/api') as Api;
    } catch {
      loaded = null;
    }
  }
  return loaded ? new Telemetry(loaded, options ?? {}) : undefined;
}
