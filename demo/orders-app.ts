/**
 * The orders application: an authorization server of its own (oidc-provider
 * with the plugin, on its own port) and the API it guards. It signs nobody in:
 * an agent that holds a customer's sign-in at the identity service brings an
 * ID-JAG from there and redeems it with the jwt-bearer grant (RFC 7523,
 * docs/cross-app-access.md) for a token of the orders API, which checks it
 * with the package's resource-server helper. It follows the identity
 * service's SSF stream: an ID-JAG session stopped there ends the tokens
 * redeemed from it here.
 */
import type { EventEmitter } from 'node:events';
import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import Koa from 'koa';
import Provider, { errors, type Configuration } from 'oidc-provider';
import {
  createImpersonation,
  createMemoryAuditLog,
  EVENTS,
  onImpersonationEvent,
  type Impersonation,
} from '../lib/index.js';
import { createImpersonationVerifier, type ImpersonationVerifier } from '../lib/resource-server/index.js';
import { auditLine } from './identity/audit-console.js';
import { closeServer, freePort, HttpError, listen } from './http.js';
import { generateDemoKeys } from './keys.js';
import { logText } from './log-text.js';
import { receiverStream } from './receiver-stream.js';
import { createTokenCheck, type VerifiedRequest } from './resource-api.js';
import { CLIENTS, customerSeed, ORDERS_API, ORDERS_API_SCOPES, ORDERS_AUTH_ISSUER, type DemoSecrets } from './seed.js';

const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** Where the orders API answers, on the authorization server's port. */
export const ORDERS_API_PATH = '/api/orders';
/** How long the start waits for the first read of the identity service's stream, ms. */
const FIRST_READ_WAIT = 3000;

export interface OrdersAppOptions {
  /** Default 3002; 0 picks a free one. */
  port?: number;
  bindAddress?: string;
  /** Host name in this server's URL. Default `localhost`. */
  hostname?: string;
  /**
   * The identity service whose ID-JAGs are redeemed here: its issuer (keys at
   * `{issuer}/jwks`), and where its SSF streams are managed (`{baseUrl}/ssf/streams`, with a token for `managementResource`).
   */
  identity: { issuer: string; baseUrl: string; managementResource: string };
  secrets: DemoSecrets;
  log: (line: string) => void;
}

export interface OrdersApp {
  /** http://{hostname}:{port}: the authorization server's endpoints (`/token`, `/jwks`) and the orders API. */
  url: string;
  /** Its issuer identifier, as ID-JAGs name it in `aud`: an https name, not where it listens. */
  issuer: string;
  provider: Provider;
  impersonation: Impersonation;
  server: http.Server;
  close(): Promise<void>;
}

/**
 * Builds the orders application's authorization server and listens; its API
 * answers once it has read its own revocation feed, and (for up to 3 s) once
 * the identity service's SSF stream was read, without which its ID-JAGs are refused.
 */
export async function startOrdersApp(options: OrdersAppOptions): Promise<OrdersApp> {
  let port = options.port ?? 3002;
  if (port === 0) port = await freePort(options.bindAddress);
  const url = `http://${options.hostname ?? 'localhost'}:${port}`;
  // The orders application's customers are the identity service's, by the same login.
  const customers = customerSeed();
  const { identity } = options;
  // The ID-JAG sessions that stop at the identity service, from a stream of its own there.
  const stream = receiverStream({
    call: (target, init) => fetch(target, { ...init, signal: AbortSignal.timeout(5000) }),
    endpoints: { token: `${identity.issuer}/token`, ssfStreams: `${identity.baseUrl}/ssf/streams` },
    managementResource: identity.managementResource,
    client: { id: CLIENTS.ordersAuthReceiver, secret: options.secrets.ordersAuthReceiverClientSecret },
    description: `demo orders authorization server at ${url}`,
  });
  const impersonation = createImpersonation({
    managementResource: `${url}/api`,
    auditLog: createMemoryAuditLog(),
    idJag: {
      trustedIssuers: [
        {
          issuer: identity.issuer,
          jwksUri: `${identity.issuer}/jwks`,
          // A subject of the identity service is an account here only when the orders application knows them.
          accountOf: ({ sub }) => (customers.has(sub) ? sub : undefined),
          // A stop there ends what its ID-JAG was redeemed for here: the orders API refuses its tokens.
          ssf: stream.ssf,
        },
      ],
    },
  });
  const provider = new Provider(ORDERS_AUTH_ISSUER, impersonation.configure(configuration(options.secrets, customers)));
  impersonation.install(provider, { mountManagementApi: false });
  onImpersonationEvent(provider, EVENTS.idJagRedeemed, (event) =>
    options.log(`[orders] ${auditLine(EVENTS.idJagRedeemed, event)}`),
  );
  onImpersonationEvent(provider, EVENTS.sessionEnded, (event) =>
    options.log(
      `[orders] ${logText(event.clientId ?? '?')} no longer acts for ${logText(event.subject ?? '?')} here, session ${event.sessionId ?? '?'}: ${logText(event.endReason ?? 'ended')}`,
    ),
  );
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    options.log(`[orders] server error: ${error.stack ?? error.message}`),
  );
  // What fails outside a request (a read of the identity service's stream): its first of a streak.
  (provider as unknown as EventEmitter).on('error', (error: Error) => options.log(`[orders] ${error.message}`));

  let verifier: ImpersonationVerifier | undefined;
  let verifyRequest: ((ctx: Koa.Context) => Promise<VerifiedRequest>) | undefined;
  const app = new Koa();
  app.on('error', (error: Error) => options.log(`[orders] ${error.stack ?? error.message}`));
  app.use(jsonErrors);
  app.use(async (ctx, next) => {
    if (ctx.path !== ORDERS_API_PATH) return next();
    if (ctx.method !== 'GET') throw new HttpError(405, 'invalid_request', 'the orders API answers GET only');
    ctx.set('Cache-Control', 'no-store');
    if (!verifyRequest) throw new HttpError(503, 'temporarily_unavailable', 'the orders API is starting');
    const payload = await verifyRequest(ctx);
    // Reading is all it does: a token without scope (from an ID-JAG that named none) reads too.
    const scopes = typeof payload['scope'] === 'string' ? payload['scope'].split(' ').filter(Boolean) : [];
    if (scopes.length && !scopes.includes('orders:read'))
      throw new HttpError(403, 'insufficient_scope', 'orders:read is required');
    ctx.body = {
      customer: payload.sub,
      client: payload['client_id'] ?? null,
      orders: customers.get(payload.sub)?.orders ?? [],
      expires_at: new Date(payload.exp * 1000).toISOString(),
    };
  });
  app.use(impersonation.managementApi());
  const handle = provider.callback();
  app.use((ctx) => {
    ctx.respond = false;
    return handle(ctx.req, ctx.res);
  });

  const server = await listen(app, port, options.bindAddress);
  const close = async () => {
    impersonation.stopIssuerStreams();
    verifier?.close();
    await Promise.all([stream.close(), closeServer(server)]);
  };
  try {
    // Its own revocation feed is read over HTTP, once the server answers.
    verifier = createImpersonationVerifier({
      issuer: ORDERS_AUTH_ISSUER,
      audience: ORDERS_API,
      jwks: `${url}/jwks`,
      revocationsUri: `${url}${impersonation.options.sessionsPath}/revocations`,
      refreshInterval: 250,
    });
    await verifier.ready();
    // Until then, the identity service's ID-JAGs are refused (503): its stops could not be followed.
    const waited = await Promise.race([
      stream.firstRead.then(() => true),
      sleep(FIRST_READ_WAIT, false, { ref: false }),
    ]);
    if (!waited) options.log("[orders] the identity service's SSF stream is not read yet: its ID-JAGs wait for it");
    verifyRequest = createTokenCheck({ verifier, publicUrl: (ctx) => `${url}${ctx.path}` });
  } catch (error) {
    await close();
    throw error;
  }
  return { url, issuer: ORDERS_AUTH_ISSUER, provider, impersonation, server, close };
}

function configuration(secrets: DemoSecrets, customers: ReadonlyMap<string, unknown>): Configuration {
  const keys = generateDemoKeys();
  return {
    clients: [
      {
        client_id: CLIENTS.ordersAgent,
        client_name: 'Orders assistant (an agent)',
        client_secret: secrets.ordersAgentClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: [JWT_BEARER_GRANT],
        response_types: [],
        redirect_uris: [],
      },
    ],
    findAccount: (_ctx, id) => (customers.has(id) ? { accountId: id, claims: () => ({ sub: id }) } : undefined),
    jwks: keys.jwks,
    cookies: { keys: keys.cookieKeys },
    // Never past the ID-JAG's exp either: the plugin cuts it there.
    ttl: { AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 300 },
    features: {
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => ORDERS_API,
        useGrantedResource: () => false,
        getResourceServerInfo: (_ctx, resource) => {
          if (resource !== ORDERS_API) throw new errors.InvalidTarget();
          return {
            scope: ORDERS_API_SCOPES.join(' '),
            audience: ORDERS_API,
            accessTokenFormat: 'jwt',
            accessTokenTTL: 300,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  };
}

/** An error of the orders API is an OAuth-style JSON body. */
async function jsonErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    if (!(caught instanceof HttpError)) throw caught;
    ctx.status = caught.status;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { error: caught.error, error_description: caught.message };
  }
}
