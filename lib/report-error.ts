import type { EventEmitter } from 'node:events';
import type Koa from 'koa';

/** Reports a failure that changes no answer on the provider's (the Koa app's) `error` event. */
export function reportError(provider: object, error: unknown, ctx?: Koa.Context): void {
  (provider as EventEmitter).emit('error', error, ctx);
}

/** Tells the provider's listeners of `name` (when the provider is still there), with a frozen `detail`. */
export function emitOn(provider: object | undefined, name: string, detail: object): void {
  (provider as EventEmitter | undefined)?.emit(name, Object.freeze(detail));
}
