import type { Context, Span } from '@opentelemetry/api';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { endedWith, errorTypeOf, KIND, markError, type Telemetry } from './telemetry.js';

/** Starts one step of an exchange (a span under the exchange's when it is traced) and ends it with the work it is given. */
export type ExchangeStep = (step: string) => <T>(work: T | Promise<T>) => T | Promise<T>;

// Untraced, the step's own work is handed back: no async frame of its own to resolve into, no promise for a value.
const asItIs = <T>(work: T | Promise<T>): T | Promise<T> => work;
const untraced: ExchangeStep = () => asItIs;

/** The token-exchange grant handler, traced and counted by outcome and error code; its steps' spans are children of its own. */
export function tracedExchange(
  telemetry: Telemetry | undefined,
  handler: (ctx: KoaContextWithOIDC, step: ExchangeStep) => Promise<void>,
): (ctx: KoaContextWithOIDC) => Promise<void> {
  if (!telemetry) return (ctx) => handler(ctx, untraced);
  const { api } = telemetry;
  return function tokenExchangeHandler(ctx) {
    const span = telemetry.tracer.startSpan('impersonation.token_exchange', {
      kind: KIND.internal,
      attributes: { 'impersonation.client_id': ctx.oidc.client?.clientId ?? '' },
    });
    // The API's no-op tracer (no SDK) makes a span of no trace: nothing records, nothing to carry, only the count.
    const spanContext = span.spanContext();
    if (spanContext === api.INVALID_SPAN_CONTEXT || !api.trace.isSpanContextValid(spanContext)) {
      return counted(telemetry, handler(ctx, untraced));
    }
    const context = api.trace.setSpan(api.context.active(), span);
    // A span not sampled gets no children; its context still carries the decision to a driver's spans.
    const step: ExchangeStep = span.isRecording() ? (name) => tracedStep(telemetry, context, name) : untraced;
    return counted(telemetry, api.context.with(context, handler, undefined, ctx, step), span).finally(() => span.end());
  };
}

/** Counts the exchange by its outcome once `work` settles (the kinds' `handles` only read: it rejects, never throws). */
function counted(telemetry: Telemetry, work: Promise<void>, span?: Span): Promise<void> {
  return work.then(
    () => {
      span?.setAttributes({ 'impersonation.outcome': 'issued', 'http.response.status_code': 200 });
      telemetry.countExchange('issued');
    },
    (error: unknown) => {
      const type = errorTypeOf(error);
      const status = (error as { statusCode?: unknown }).statusCode;
      span?.setAttributes({
        'impersonation.outcome': 'refused',
        'http.response.status_code': typeof status === 'number' ? status : 500,
      });
      if (span) markError(span, type);
      telemetry.countExchange('refused', type);
      throw error;
    },
  );
}

/** One step's span under the exchange's, not made active (a driver's spans fall under the exchange's). */
function tracedStep(telemetry: Telemetry, context: Context, step: string) {
  const span = telemetry.tracer.startSpan(`impersonation.token_exchange.${step}`, undefined, context);
  return <T>(work: T | Promise<T>): Promise<T> => endedWith(span, Promise.resolve(work));
}
