import type { EventEmitter } from 'node:events';
import type Koa from 'koa';
import { slotOf } from '../provider-state.js';
import { reportError } from '../report-error.js';
import { SUBSCRIBERS, type EventSubscriber, type Occasion } from './subscriber.js';
import type { ImpersonationEvent } from './types.js';

/**
 * Every state change of the plugin is published once, here: to the
 * provider's listeners (`provider.on(name)`, as oidc-provider emits its own
 * events) and to the plugin's subscribers that install() registered (the
 * trail, webhooks, SSF streams). Three ways, by what the change depends on:
 *
 * - `publish`: a change that stands whether or not it is recorded (a
 *   refusal, a stop, a customer's answer);
 * - `publishRecorded`: changes that may not stand without their record (a
 *   subject token, an access grant): the caller undoes the change when it
 *   rejects;
 * - `shareCommit` (./commit.ts), then `announce`: a change committed in one
 *   store operation with what its subscribers write with it (an exchange).
 */

export interface PublishOptions {
  /** Whether the recorders (the trail) receive it; false for a refusal beyond its budget. Default true. */
  record?: boolean;
  /** The event is of a delegation's session (see `Occasion`). Default false. */
  delegation?: boolean;
}

/**
 * Records the event, best effort, tells the listeners, and hands it to the
 * other subscribers. A failure to record or to enqueue is reported on the
 * provider's `error` event: the change stands.
 */
export async function publish(
  provider: object,
  event: ImpersonationEvent,
  ctx: Koa.Context | undefined,
  { record = true, delegation = false }: PublishOptions = {},
): Promise<void> {
  const subscribers = slotOf(provider, SUBSCRIBERS);
  if (record) {
    for (const subscriber of subscribers) {
      await subscriber.record?.(event).catch((error: unknown) => reportError(provider, error, ctx));
    }
  }
  emit(provider, event, ctx);
  await notice(provider, subscribers, event, { ctx, delegation }, record);
}

/**
 * Records the events, in their order, and only then tells anyone of them:
 * rejects with the recorder's error when one cannot be written (no listener,
 * no webhook has heard of a change that is then undone). Once recorded, as
 * `publish`.
 */
export async function publishRecorded(
  provider: object,
  events: readonly ImpersonationEvent[],
  ctx: Koa.Context | undefined,
): Promise<void> {
  const subscribers = slotOf(provider, SUBSCRIBERS);
  for (const event of events) {
    for (const subscriber of subscribers) await subscriber.record?.(event);
  }
  for (const event of events) emit(provider, event, ctx);
  for (const event of events) await notice(provider, subscribers, event, { ctx, delegation: false }, true);
}

/**
 * Tells the listeners only: of a change whose subscribers had their part in
 * its commit (see `shareCommit`), or of an event no subscriber takes (the
 * revocation feed was read).
 */
export function announce(provider: object, event: ImpersonationEvent, ctx: Koa.Context | undefined): void {
  emit(provider, event, ctx);
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

/**
 * Hands listeners a frozen copy, so that none can change what the next one
 * sees. Callers build the event by setting its fields: `{ ...event, more }`
 * is a slow path of V8 (about 1.7 µs for an event), a plain copy is not.
 */
function emit(provider: object, event: ImpersonationEvent, ctx: Koa.Context | undefined): void {
  const emitter = provider as EventEmitter;
  if (emitter.listenerCount(event.name) === 0) return;
  emitter.emit(event.name, Object.freeze({ ...event }), ctx);
}
