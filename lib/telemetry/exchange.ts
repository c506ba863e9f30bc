import type { Context } from '@opentelemetry/api';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { errorTypeOf, KIND, markError, type Telemetry } from './telemetry.js';

/** Runs one step of an exchange: in a span under the exchange's when it is traced, else `run()` itself. */
export type ExchangeStep = <T>(step: string, run: () => Promise<T>) => Promise<T>;

// Untraced, the step's own promise is handed back: no async frame of its own to resolve into.
const untraced: ExchangeStep = (_step, run) => run();

/** The token-exchange grant handler, traced and counted by outcome and error code; its steps' spans are children of its own. */
export function tracedExchange(
  telemetry: Telemetry | undefined,
  handler: (ctx: KoaContextWithOIDC, step: ExchangeStep) => Promise<void>,
): (ctx: KoaContextWithOIDC) => Promise<void> {
  if (!telemetry) return (ctx) => handler(ctx, untraced);
  const { api } = telemetry;
  return async function tokenExchangeHandler(ctx) {
    const span = telemetry.tracer.startSpan('impersonation.token_exchange', {
      kind: KIND.internal,
      attributes: { 'impersonation.client_id': ctx.oidc.client?.clientId ?? '' },
    });
    const context = api.trace.setSpan(api.context.active(), span);
    // A span nobody records (no SDK, or not sampled) gets no children: its steps run as they are.
    const step: ExchangeStep = span.isRecording() ? (name, run) => tracedStep(telemetry, context, name, run) : untraced;
    try {
      await api.context.with(context, () => handler(ctx, step));
      span.setAttribute('impersonation.outcome', 'issued');
      span.setAttribute('http.response.status_code', 200);
      telemetry.countExchange('issued');
    } catch (error) {
      const type = errorTypeOf(error);
      const status = (error as { statusCode?: unknown }).statusCode;
      span.setAttributes({
        'impersonation.outcome': 'refused',
        'http.response.status_code': typeof status === 'number' ? status : 500,
      });
      markError(span, type);
      telemetry.countExchange('refused', type);
      throw error;
    } finally {
      span.end();
    }
  };
}

/** One step's span under the exchange's, not made active (a driver's spans fall under the exchange's). */
async function tracedStep<T>(telemetry: Telemetry, context: Context, step: string, run: () => Promise<T>): Promise<T> {
  const span = telemetry.tracer.startSpan(`impersonation.token_exchange.${step}`, undefined, context);
  try {
    return await run();
  } catch (error) {
    markError(span, errorTypeOf(error));
    throw error;
  } finally {
    span.end();
  }
}
