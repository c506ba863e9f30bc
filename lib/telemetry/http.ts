import type Koa from 'koa';
import { KIND, markError, type Telemetry } from './telemetry.js';

/** A server span per request of the plugin's APIs, named by the route's template, never the path sent. */
export function apiSpans(telemetry: Telemetry | undefined, api: (path: string) => string): Koa.Middleware {
  return async function apiSpan(ctx, next) {
    if (!telemetry) return next();
    const method = ctx.method;
    await telemetry.inSpan(
      `${method} impersonation`,
      KIND.server,
      { 'http.request.method': method, 'impersonation.api': api(ctx.path) },
      async (span) => {
        await next();
        const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
        if (typeof route === 'string') {
          span.updateName(`${method} ${route}`);
          span.setAttribute('http.route', route);
        }
        span.setAttribute('http.response.status_code', ctx.status);
        if (ctx.status >= 400) {
          const code = (ctx.body as { error?: unknown } | undefined)?.error;
          markError(span, typeof code === 'string' ? code : String(ctx.status));
        }
      },
    );
  };
}
