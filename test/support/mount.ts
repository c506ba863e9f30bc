import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import type Provider from 'oidc-provider';
import type { ImpersonationOptions } from '../../lib/index.js';
import { startProvider, type TestProvider } from './provider.js';

export const PREFIX = '/oidc';

/**
 * What koa-mount does: the mounted app's middleware is composed once, when
 * it is mounted, and runs with the parent's context and the prefix cut off.
 * Whatever the mounted app `use()`s later is not part of that composition.
 */
export function mountComposedNow(prefix: string, app: Koa): Koa.Middleware {
  const stack = [...app.middleware];
  const downstream = (ctx: Koa.Context, last: Koa.Next) => {
    const dispatch = (index: number): Promise<void> =>
      Promise.resolve(index === stack.length ? last() : stack[index]!(ctx, () => dispatch(index + 1)));
    return dispatch(0);
  };
  return async (ctx, upstream) => {
    if (ctx.path !== prefix && !ctx.path.startsWith(`${prefix}/`)) return upstream();
    const outer = ctx.path;
    const inner = outer.slice(prefix.length) || '/';
    ctx.mountPath = prefix;
    ctx.path = inner;
    try {
      await downstream(ctx, async () => {
        ctx.path = outer;
        await upstream();
        ctx.path = inner;
      });
    } finally {
      ctx.path = outer;
    }
  };
}

/**
 * What oidc-provider's documentation does for Express, Fastify or plain Node: `provider.callback()` below a prefix, the request's
 * `originalUrl` telling the provider its mount path.
 */
export function mountCallback(prefix: string, provider: Provider): Koa.Middleware {
  const handle = provider.callback();
  return async (ctx, next) => {
    if (ctx.path !== prefix && !ctx.path.startsWith(`${prefix}/`)) return next();
    const req = ctx.req as IncomingMessage & { originalUrl?: string };
    const url = req.url ?? '/';
    req.originalUrl = url;
    req.url = url.slice(prefix.length) || '/';
    ctx.respond = false;
    await handle(req, ctx.res);
  };
}

export type Mount = (prefix: string, provider: Provider) => Koa.Middleware;

/**
 * A provider from the test configuration, mounted at /oidc of a parent Koa
 * app with `mount`, install() called before or after mounting. The returned
 * TestProvider's `base` is the provider's own (the parent's origin + /oidc),
 * so every helper of the suite drives it as it drives a bare provider.
 */
export async function mounted(
  mount: Mount,
  order: 'install, then mount' | 'mount, then install',
  plugin: Partial<ImpersonationOptions> = {},
): Promise<{ tp: TestProvider; origin: string; installError?: unknown }> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let installError: unknown;
  const parent = new Koa();
  const tp = await startProvider({
    issuer: `${origin}${PREFIX}`,
    plugin,
    mount: (provider, install) => {
      if (order === 'install, then mount') install();
      parent.use(mount(PREFIX, provider));
      if (order === 'mount, then install') {
        try {
          install();
        } catch (error) {
          installError = error;
        }
      }
    },
  });
  server.on('request', parent.callback());
  const close = tp.close;
  return {
    tp: {
      ...tp,
      base: `${origin}${PREFIX}`,
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await close();
      },
    },
    origin,
    installError,
  };
}
