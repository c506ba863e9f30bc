import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import { emit, type ImpersonationEvent } from './events.js';
import { notifyOrReport } from '../webhooks/notify.js';
import { transmitOrReport } from '../ssf/transmit.js';
import type { AuditSink } from './sink.js';

/**
 * Appends to the sink, best effort, emits to listeners, and hands the event to
 * the webhooks that receive it (unless `webhooks` is false) and to the SSF
 * streams: for events whose record must not change their outcome (a refusal
 * stays a refusal, a stop stays a stop). A failure to append or to enqueue is
 * reported on the app's `error` event. Where no token may go out without its
 * record, callers append (and notify) themselves and fail.
 */
export async function record(
  provider: Provider,
  sink: AuditSink | undefined,
  event: ImpersonationEvent,
  ctx: Koa.Context | undefined,
  { webhooks = true }: { webhooks?: boolean } = {},
): Promise<void> {
  if (sink) {
    try {
      await sink.append(event.name, Object.freeze({ ...event }));
    } catch (error) {
      // The provider is the Koa app: its 'error' listeners (or Koa's logger) report the failure.
      (provider as unknown as NodeJS.EventEmitter).emit('error', error, ctx);
    }
  }
  emit(provider, event, ctx);
  await Promise.all([webhooks && notifyOrReport(provider, event, ctx), transmitOrReport(provider, event, ctx)]);
}
