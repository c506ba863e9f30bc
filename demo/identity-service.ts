/**
 * The identity service of the demo: oidc-provider with the impersonation
 * plugin, mounted at /oidc of a parent Koa app that also serves the sign-in
 * pages and the Management API (POST /api/subject-tokens). The plugin is
 * installed right after the provider is built, before it is mounted, as
 * docs/adding-to-your-deployment.md says. Its configuration, routes, pages
 * and console lines are in identity/: configuration.ts, routes.ts, views.ts,
 * audit-console.ts.
 */
import type http from 'node:http';
import Koa from 'koa';
import Provider from 'oidc-provider';
import type { AdapterSource } from '../lib/core-options.js';
import { EVENTS, onImpersonationEvent, type AuditSink, type Impersonation } from '../lib/index.js';
import { closeServer, freePort, listen } from './http.js';
import { demoAccounts } from './identity/accounts.js';
import { supportPolicy } from './identity/support-policy.js';
import { auditLine, READ_EVENTS } from './identity/audit-console.js';
import { demoImpersonation, providerConfiguration } from './identity/configuration.js';
import { interactionRoutes, landing, renderHttpErrors } from './identity/routes.js';
import { generateDemoKeys, type DemoKeys } from './keys.js';
import { demoSecrets, type DemoSecrets } from './seed.js';

export interface IdentityServiceOptions {
  /** Port to listen on. Default 3000; 0 picks a free one. */
  port?: number;
  /** Address to bind. Default 127.0.0.1. */
  bindAddress?: string;
  /** Host name in every URL (issuer, redirects). The browser must use the same. Default `localhost`. */
  hostname?: string;
  /**
   * The address every instance of the identity service is reached at, when
   * several serve one (the issuer is built on it). Default: this server's.
   */
  publicUrl?: string;
  /** Signing and cookie keys; instances that share a store must share them. Default: fresh ones. */
  keys?: DemoKeys;
  /** Origin of the integrator backend: the clients' redirect URIs and the console's CORS origin. */
  backendOrigin: string;
  /**
   * The backends of the other instances behind the same `publicUrl`: a
   * sign-in that one of their consoles starts may reach this instance, which
   * must let it return there too.
   */
  peerBackendOrigins?: readonly string[];
  /** Subject-token lifetime, seconds. Default: the plugin's (60). */
  subjectTokenTTL?: number;
  /** Subject tokens the backend may create per hour. Default: the plugin's (10,000). */
  subjectTokensPerHour?: number;
  /** How long a request waits for the customer's answer, seconds. Default: the plugin's (900). */
  approvalRequestTTL?: number;
  /** The backend's webhook receiver for the customers' notifications (http on a loopback address), and its secret. */
  notifications?: { url: string; secret: string };
  secrets?: DemoSecrets;
  /** The provider's adapter, shared with the subject-token store. Default: the plugin's memory adapter. */
  adapter?: AdapterSource;
  /** The audit trail: every impersonation is recorded there before its token goes out. */
  auditLog: AuditSink;
  /**
   * How recent the engineer's sign-in must be for an exchange, seconds
   * (the plugin's actorAuthentication). Default 300.
   */
  actorMaxAge?: number;
  /** Where audit events and errors go, a line each. Default: nowhere. */
  log?: (line: string) => void;
  /** Also log each read of the revocation feed (several a second per resource server). Default false. */
  logFeedReads?: boolean;
}

export interface IdentityService {
  /** http://{hostname}:{port} */
  baseUrl: string;
  /** {baseUrl}/oidc */
  issuer: string;
  /** The resource indicator of the Management API: {baseUrl}/api */
  managementResource: string;
  /** {baseUrl}/api/subject-tokens */
  managementUrl: string;
  /** The resource indicator of the customer's support-access API: {baseUrl}/api/support-access */
  customerResource: string;
  provider: Provider;
  impersonation: Impersonation;
  server: http.Server;
  close(): Promise<void>;
}

const OIDC_PREFIX = '/oidc';
/** Where the plugin serves the customer's API (its default `approvals.customerPath`), also its resource indicator. */
const SUPPORT_ACCESS_PATH = '/api/support-access';
/** RFC 8414's metadata path: for an issuer with a path, that path is appended to it (3.1). */
const AUTHORIZATION_SERVER_METADATA = '/.well-known/oauth-authorization-server';

/**
 * Builds the identity service, then listens: the server accepts its first
 * connection once the provider is configured, the plugin installed and every
 * route mounted.
 */
export async function startIdentityService(options: IdentityServiceOptions): Promise<IdentityService> {
  let port = options.port ?? 3000;
  // The issuer names the port, and the provider is built on the issuer: a port to be picked is picked first.
  if (port === 0 && !options.publicUrl) port = await freePort(options.bindAddress);
  const baseUrl = options.publicUrl?.replace(/\/$/, '') ?? `http://${options.hostname ?? 'localhost'}:${port}`;
  const issuer = `${baseUrl}${OIDC_PREFIX}`;
  const managementResource = `${baseUrl}/api`;
  const customerResource = `${baseUrl}${SUPPORT_ACCESS_PATH}`;
  const secrets = options.secrets ?? demoSecrets();
  const log = options.log ?? (() => {});
  const accounts = demoAccounts(secrets.users);
  const policy = supportPolicy(accounts);

  const impersonation = demoImpersonation({
    policy,
    accounts,
    managementResource,
    apiOrigin: baseUrl,
    auditLog: options.auditLog,
    customerResource,
    ...(options.subjectTokenTTL === undefined ? {} : { subjectTokenTTL: options.subjectTokenTTL }),
    ...(options.subjectTokensPerHour === undefined ? {} : { subjectTokensPerHour: options.subjectTokensPerHour }),
    ...(options.actorMaxAge === undefined ? {} : { actorMaxAge: options.actorMaxAge }),
    ...(options.approvalRequestTTL === undefined ? {} : { approvalRequestTTL: options.approvalRequestTTL }),
    ...(options.notifications ? { notifications: options.notifications } : {}),
  });
  const configuration = providerConfiguration({
    impersonation,
    policy,
    accounts,
    secrets,
    keys: options.keys ?? generateDemoKeys(),
    backendOrigins: [...new Set([options.backendOrigin, ...(options.peerBackendOrigins ?? [])])],
  });
  const provider = new Provider(
    issuer,
    impersonation.configure(options.adapter ? { ...configuration, adapter: options.adapter } : configuration),
  );
  // Installed before anything mounts the provider. The Management API is served by the parent app
  // (at /api, not below /oidc), which mounts it below.
  impersonation.install(provider, { mountManagementApi: false });
  // An event nobody listens to is not even built: the feed's reads cost nothing unless they are logged.
  for (const name of Object.values(EVENTS)) {
    if (READ_EVENTS.has(name) && !options.logFeedReads) continue;
    onImpersonationEvent(provider, name, (event) => log(auditLine(name, event)));
  }
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    log(`[identity] server error: ${error.stack ?? error.message}`),
  );

  const app = new Koa();
  app.on('error', (error: Error) => log(`[identity] ${error.stack ?? error.message}`));
  app.use(renderHttpErrors);
  const router = interactionRoutes(provider, accounts, {
    resource: customerResource,
    scope: impersonation.options.approvals?.customerScope ?? '',
  });
  app.use(router.routes()).use(router.allowedMethods());
  app.use(landing(issuer, options.backendOrigin));
  // With the Management API at the root, so is the SSF metadata at its SSF 1.0 7.2 location,
  // /.well-known/ssf-configuration/oidc for the issuer {baseUrl}/oidc.
  app.use(impersonation.managementApi());
  app.use(mountProvider(OIDC_PREFIX, provider));

  const server = await listen(app, port, options.bindAddress);
  return {
    baseUrl,
    issuer,
    managementResource,
    managementUrl: `${baseUrl}${impersonation.options.managementPath}`,
    customerResource,
    provider,
    impersonation,
    server,
    close: async () => {
      // Deliveries in flight are abandoned: their leases run out, and another instance on the same store delivers them.
      // One delivery carries the webhooks and the SSF streams.
      await impersonation.ssf().stop();
      await closeServer(server);
    },
  };
}

/**
 * Serves the provider below `prefix` as oidc-provider's documentation mounts
 * it in a host app: `provider.callback()` gets the request with the prefix cut
 * off and `originalUrl` naming it, from which the provider builds its URLs.
 * OpenID Connect Discovery's `{issuer}/.well-known/openid-configuration` is
 * below the prefix; RFC 8414's `/.well-known/oauth-authorization-server{prefix}`
 * is not, and is handed to the provider as its own metadata path.
 */
export function mountProvider(prefix: string, provider: Provider): Koa.Middleware {
  const handle = provider.callback();
  return async (ctx, next) => {
    let inner: string;
    if (ctx.path === `${AUTHORIZATION_SERVER_METADATA}${prefix}`) inner = AUTHORIZATION_SERVER_METADATA;
    else if (ctx.path === prefix || ctx.path.startsWith(`${prefix}/`)) inner = ctx.path.slice(prefix.length) || '/';
    else return next();
    const req = ctx.req as http.IncomingMessage & { originalUrl?: string };
    req.url = `${inner}${ctx.search}`;
    req.originalUrl = `${prefix}${req.url}`;
    ctx.respond = false;
    await handle(req, ctx.res);
  };
}
