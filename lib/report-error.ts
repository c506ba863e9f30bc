import type { EventEmitter } from 'node:events';
import type Koa from 'koa';

/**
 * Reports a failure that changes no answer (a trail row that could not be
 * written for a change that stands, a delivery whose store failed) on the
 * provider's `error` event: the provider is the Koa app, so its `error`
 * listeners, or Koa's own logger, report it. `ctx` is the request it
 * happened in, when one did.
 */
export function reportError(provider: object, error: unknown, ctx?: Koa.Context): void {
  (provider as EventEmitter).emit('error', error, ctx);
}
