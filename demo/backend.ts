/**
 * The integrator's backend of the demo (spec 4.1): the support console it
 * serves, the API the console calls, a demo resource API for
 * https://api.example.com, and the customers' account pages. Each concern's
 * routes are in their own module; they share one `BackendDependencies`.
 */
import type http from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import { accountRoutes, auditTrailOf } from './account.js';
import { agentCallbackRoute } from './agent-access.js';
import { backendDependencies, type IdentityServiceAddresses } from './backend-dependencies.js';
import { consoleRoutes } from './console-routes.js';
import { closeServer, escapeHtml, freePort, HttpError, listen, page } from './http.js';
import { impersonationRequestRoutes } from './impersonation-requests.js';
import { NotificationInbox, notificationRoutes, type NotificationLimits } from './notifications.js';
import { PendingSignIns, type PendingSignInLimits } from './pending-sign-ins.js';
import { resourceRoutes } from './resource-routes.js';
import { demoSecrets, type DemoSecrets } from './seed.js';
import { StopListeners, stopRoutes } from './stop-routes.js';
import { webSignInRoutes } from './web-sign-in.js';

export interface BackendOptions extends IdentityServiceAddresses {
  /** Port to listen on. Default 3001; 0 picks a free one. */
  port?: number;
  /** Address to bind. Default 127.0.0.1. */
  bindAddress?: string;
  /** Host name in this backend's URLs (redirect URIs). Default `localhost`. */
  hostname?: string;
  secrets?: DemoSecrets;
  /** Bound on every call to the identity service, milliseconds. Default 5000. */
  timeoutMs?: number;
  /** Bound and lifetime of the sign-ins in progress at `/web/login` and, apart, at `/account/login`. */
  pendingSignIns?: PendingSignInLimits;
  /**
   * The customers' notifications: the secret the identity service signs its
   * webhooks with (`whsec_…`), and the receiver's bounds. Without it, no
   * receiver is mounted and the account page shows no notifications.
   */
  notifications?: { secret: string; limits?: NotificationLimits };
  log?: (line: string) => void;
}

export interface Backend {
  /** http://{hostname}:{port} */
  url: string;
  server: http.Server;
  /** How many M2M tokens were fetched (the rest came from the cache). */
  readonly m2mTokensFetched: number;
  /** Sign-ins started and not yet back, at `/web/login` and at `/account/login`. */
  readonly pendingSignIns: { web: number; account: number };
  close(): Promise<void>;
}

/**
 * Builds the backend, then listens: the server accepts its first connection
 * once every route is mounted and the resource API has read the revocation
 * feed once (or found it unreadable), so that nothing it answers depends on
 * a start-up still in progress.
 */
export async function startBackend(options: BackendOptions): Promise<Backend> {
  let port = options.port ?? 3001;
  // The redirect URIs name the port: a port to be picked is picked before the routes are built.
  if (port === 0) port = await freePort(options.bindAddress);
  const deps = backendDependencies({
    ...options,
    url: `http://${options.hostname ?? 'localhost'}:${port}`,
    secrets: options.secrets ?? demoSecrets(),
    timeoutMs: options.timeoutMs ?? 5000,
    log: options.log ?? (() => {}),
  });
  // One store per sign-in page: a flood of one cannot refuse sign-ins at the other.
  const webLogins = new PendingSignIns(options.pendingSignIns);
  const accountLogins = new PendingSignIns(options.pendingSignIns);

  const router = new Router();
  const inbox = new NotificationInbox(options.notifications?.limits);
  const listeners = new StopListeners();
  if (options.notifications) {
    notificationRoutes(router, inbox, {
      ...deps,
      ...options.notifications,
      stopped: (sessionId) => listeners.stopped(sessionId),
    });
  }
  await consoleRoutes(router, deps);
  impersonationRequestRoutes(router, deps);
  const resources = resourceRoutes(router, deps);
  stopRoutes(router, { ...deps, sessionsUrl: deps.endpoints.sessions, listeners });
  await accountRoutes(router, {
    ...deps,
    pending: accountLogins,
    changesOf: resources.changesOf,
    trailOf: auditTrailOf(deps.management, deps.endpoints.sessions),
    ...(options.notifications ? { notificationsOf: (customer: string) => inbox.of(customer) } : {}),
  });
  webSignInRoutes(router, deps, webLogins);
  agentCallbackRoute(router);

  const app = new Koa();
  app.on('error', (error: Error) => deps.log(`[backend] ${error.stack ?? error.message}`));
  app.use(renderErrors);
  app.use(router.routes()).use(router.allowedMethods());

  let server: http.Server;
  try {
    // Until the first read, the resource API refuses every impersonation token as if revocations were unknown.
    await resources.ready();
    server = await listen(app, port, options.bindAddress);
  } catch (error) {
    await resources.close();
    throw error;
  }
  return {
    url: deps.url,
    server,
    get m2mTokensFetched() {
      return deps.m2m.fetched;
    },
    get pendingSignIns() {
      return { web: webLogins.size, account: accountLogins.size };
    },
    close: async () => {
      await resources.close();
      await closeServer(server);
    },
  };
}

/** An error is an OAuth-style JSON body below /api/, a page elsewhere; an unexpected one is logged and a 500. */
async function renderErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    const error =
      caught instanceof HttpError ? caught : new HttpError(500, 'server_error', 'the backend failed; see its log');
    if (!(caught instanceof HttpError)) ctx.app.emit('error', caught, ctx);
    ctx.status = error.status;
    ctx.set('Cache-Control', 'no-store');
    if (ctx.path.startsWith('/api/')) {
      ctx.body = { error: error.error, error_description: error.message };
    } else {
      ctx.type = 'html';
      ctx.body = page(
        'Support web',
        `<header><h1>Support web</h1></header>
<main><div class="card"><h2>Sign-in failed</h2><div class="error" role="alert">${escapeHtml(`${error.error}: ${error.message}`)}</div>
<a class="button" href="/web/login">Start again</a></div></main>`,
      );
    }
  }
}
