import type { EventEmitter } from 'node:events';
import type Koa from 'koa';

/** Reports a failure that changes no answer on the provider's (the Koa app's) `error` event. */
export function reportError(provider: object, error: unknown, ctx?: Koa.Context): void {
  (provider as EventEmitter).emit('error', error, ctx);
}
