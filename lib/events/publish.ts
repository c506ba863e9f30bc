import type { EventEmitter } from 'node:events';
import type Koa from 'koa';
import { reportError } from '../report-error.js';
import type { EventBus, EventSubscriber, Occasion } from './subscriber.js';
import type { ImpersonationEvent } from '../event-types.js';

// Every state change is published once, here: `publish` (it stands), `publishRecorded` (undone without its record), `shareCommit`.

export interface PublishOptions {
  /** Whether the recorders (the trail) receive it; false for a refusal beyond its budget. Default true. */
  record?: boolean;
  /** The event is of a delegation's session (see `Occasion`). Default false. */
  delegation?: boolean;
}

/** Records the event best effort, then tells listeners and subscribers; a failure is reported, the change stands. */
export async function publish(
  { provider, subscribers }: EventBus,
  event: ImpersonationEvent,
  ctx: Koa.Context | undefined,
  { record = true, delegation = false }: PublishOptions = {},
): Promise<void> {
  if (record) {
    for (const subscriber of subscribers) {
      await subscriber.record?.(event).catch((error: unknown) => reportError(provider, error, ctx));
    }
  }
  announce(provider, event, ctx);
  await notice(provider, subscribers, event, { ctx, delegation }, record);
}

/** Records the events in order, then publishes them; rejects when one cannot be recorded (Invariant 42). */
export async function publishRecorded(
  { provider, subscribers }: EventBus,
  events: readonly ImpersonationEvent[],
  ctx: Koa.Context | undefined,
): Promise<void> {
  for (const event of events) {
    for (const subscriber of subscribers) await subscriber.record?.(event);
  }
  for (const event of events) announce(provider, event, ctx);
  for (const event of events) await notice(provider, subscribers, event, { ctx, delegation: false }, true);
}

async function notice(
  provider: object,
  subscribers: readonly EventSubscriber[],
  event: ImpersonationEvent,
  occasion: Occasion,
  recorded: boolean,
): Promise<void> {
  const noticing = subscribers.filter((subscriber) => subscriber.notice && (recorded || !subscriber.record));
  if (!noticing.length) return;
  await Promise.all(
    noticing.map((subscriber) =>
      subscriber.notice!(event, occasion).catch((error: unknown) => reportError(provider, error, occasion.ctx)),
    ),
  );
}

/** Tells the listeners only (the subscribers had their part in the commit, or none takes the event); a frozen copy, so none changes what the next sees. */
export function announce(provider: object, event: ImpersonationEvent, ctx: Koa.Context | undefined): void {
  const emitter = provider as EventEmitter;
  if (emitter.listenerCount(event.name) === 0) return;
  emitter.emit(event.name, Object.freeze({ ...event }), ctx);
}
