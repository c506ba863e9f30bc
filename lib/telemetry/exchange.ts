import type { Context } from '@opentelemetry/api';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import { errorTypeOf, KIND, markError, type Telemetry } from './telemetry.js';

type GrantHandler = (ctx: KoaContextWithOIDC) => Promise<void>;

/** An exchange under way that is traced: the telemetry, and the context its steps' spans are children in. */
interface TracedExchange {
  telemetry: Telemetry;
  context: Context;
}

/** The span of each exchange under way, by its request: the parent of its steps' spans. */
const exchangeSpans = new WeakMap<object, TracedExchange>();

/** The token-exchange grant handler, traced and counted by outcome and error code. Without telemetry, the handler itself. */
function tracedExchange(telemetry: Telemetry | undefined, handler: GrantHandler): GrantHandler {
  if (!telemetry) return handler;
  const { api } = telemetry;
  return async function tokenExchangeHandler(ctx) {
    const span = telemetry.tracer.startSpan('impersonation.token_exchange', {
      kind: KIND.internal,
      attributes: { 'impersonation.client_id': ctx.oidc.client?.clientId ?? '' },
    });
    const context = api.trace.setSpan(api.context.active(), span);
    // A span nobody records (no SDK, or not sampled) gets no children: its steps run as they are.
    if (span.isRecording()) exchangeSpans.set(ctx, { telemetry, context });
    try {
      await api.context.with(context, () => handler(ctx));
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
      exchangeSpans.delete(ctx);
      span.end();
    }
  };
}

/** `provider.registerGrantType`, with the token-exchange handler traced. */
export function tracedGrants(
  provider: Provider,
  telemetry: Telemetry | undefined,
): Pick<Provider, 'registerGrantType'> {
  return {
    registerGrantType: (name, handler, ...rest) =>
      provider.registerGrantType(
        name,
        tracedExchange(telemetry, handler as unknown as GrantHandler) as unknown as typeof handler,
        ...rest,
      ),
  };
}

/** One step's span under the exchange's, not made active (a driver's spans fall under the exchange's). Without telemetry, `run()`. */
export function exchangeStep<T>(ctx: object, step: string, run: () => Promise<T>): Promise<T> {
  const traced = exchangeSpans.get(ctx);
  // Untraced, the step's own promise is handed back: no async frame of its own to resolve into.
  return traced ? tracedStep(traced, step, run) : run();
}

async function tracedStep<T>(traced: TracedExchange, step: string, run: () => Promise<T>): Promise<T> {
  const span = traced.telemetry.tracer.startSpan(`impersonation.token_exchange.${step}`, undefined, traced.context);
  try {
    return await run();
  } catch (error) {
    markError(span, errorTypeOf(error));
    throw error;
  } finally {
    span.end();
  }
}
