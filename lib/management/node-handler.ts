import type { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Koa from 'koa';
import { reportError } from '../report-error.js';

/** The Management API as a Connect-style Node handler; other requests go to `next` untouched (404 without it). */
export type ManagementApiHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
) => void;

/** Wraps the API's Koa middleware in an app of its own; 5xx go to the provider's `error` listeners when it has some. */
export function managementApiHandler(api: Koa.Middleware, provider: EventEmitter): ManagementApiHandler {
  const app = new Koa();
  /** Requests whose host has a next handler; those the API leaves alone go on to it. */
  const passing = new WeakSet<IncomingMessage>();
  const unanswered = new WeakSet<IncomingMessage>();
  app.use(api);
  app.use((ctx) => {
    if (!passing.has(ctx.req)) return; // Koa answers 404
    unanswered.add(ctx.req);
    ctx.respond = false;
  });
  app.on('error', (error: unknown, ctx: Koa.Context) => {
    if (provider.listenerCount('error')) reportError(provider, error, ctx);
    else app.onerror(error as Error);
  });
  const handle = app.callback();
  return (req, res, next) => {
    if (!next) {
      void handle(req, res);
      return;
    }
    // Koa sets 404 before the middleware runs; a request passed on reaches the host as it came.
    const status = res.statusCode;
    passing.add(req);
    handle(req, res).then(() => {
      passing.delete(req);
      if (!unanswered.has(req)) return;
      unanswered.delete(req);
      res.statusCode = status;
      next();
    }, next);
  };
}
