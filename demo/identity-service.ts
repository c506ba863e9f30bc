import type { AdapterSource } from '../lib/adapters/contract.js';
/**
 * The identity service of the demo: oidc-provider with the impersonation
 * plugin, mounted at /oidc of a parent Koa app that also serves the login
 * pages and the Management API (POST /api/subject-tokens). The plugin is
 * installed right after the provider is built, before it is mounted, as
 * docs/adding-to-your-deployment.md says.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { EventEmitter } from 'node:events';
import type http from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import Provider, { errors, type Account, type Configuration, type Interaction } from 'oidc-provider';
import { createImpersonation, EVENTS, TOKEN_EXCHANGE_GRANT, type AuditSink, type Impersonation } from '../lib/index.js';
import { closeServer, escapeHtml, HttpError, listen, page, portOf, readForm, serve } from './http.js';
import { generateDemoKeys, type DemoKeys } from './keys.js';
import { API_RESOURCE, API_SCOPES, CLIENTS, demoSecrets, type DemoSecrets, type DemoUser } from './seed.js';

export interface IdentityServiceOptions {
  /** A server from `listen()`, when the port must be known before the other half of the demo is built. */
  server?: http.Server;
  /** Port to listen on when no server is given. Default 3000; 0 picks a free one. */
  port?: number;
  /** Address to bind when no server is given. Default 127.0.0.1. */
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
  /** Where audit events and errors go. Default: nowhere. */
  log?: (line: string) => void;
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
  provider: Provider;
  impersonation: Impersonation;
  server: http.Server;
  close(): Promise<void>;
}

const OIDC_PREFIX = '/oidc';
const DEFAULT_ACTOR_MAX_AGE = 300;
const WRITE_SCOPE = 'profile:write';

export async function startIdentityService(options: IdentityServiceOptions): Promise<IdentityService> {
  const server = options.server ?? (await listen(options.port ?? 3000, options.bindAddress));
  const baseUrl =
    options.publicUrl?.replace(/\/$/, '') ?? `http://${options.hostname ?? 'localhost'}:${portOf(server)}`;
  const keys = options.keys ?? generateDemoKeys();
  const issuer = `${baseUrl}${OIDC_PREFIX}`;
  const managementResource = `${baseUrl}/api`;
  const secrets = options.secrets ?? demoSecrets();
  const log = options.log ?? (() => {});
  const users = new Map(secrets.users.map((user) => [user.id, user]));
  const backendOrigins = [...new Set([options.backendOrigin, ...(options.peerBackendOrigins ?? [])])];
  const at = (suffix: string) => backendOrigins.map((origin) => `${origin}${suffix}`);

  const impersonation = createImpersonation({
    managementResource,
    ...(options.subjectTokenTTL === undefined ? {} : { subjectTokenTTL: options.subjectTokenTTL }),
    // "carol is refused": the identity service will not mint subject tokens for protected accounts.
    canImpersonate: ({ subject, account }) =>
      account['impersonable'] === false ? { reason: `${subject} is protected from impersonation` } : true,
    // The sample function of the spec (2.7).
    auditLog: options.auditLog,
    // Impersonation needs a recent sign-in of the engineer (step-up, RFC 9470).
    actorAuthentication: { maxAge: options.actorMaxAge ?? DEFAULT_ACTOR_MAX_AGE },
    // Changes need an impersonation asked for them: any other is narrowed to reading.
    canExchange: ({ scope, context }) =>
      scope.includes(WRITE_SCOPE) && context['access'] !== 'edit'
        ? { scope: scope.filter((name) => name !== WRITE_SCOPE) }
        : true,
    getCustomJwtClaims: ({ context }) => {
      if (context.grant.type !== TOKEN_EXCHANGE_GRANT) return {};
      const { ticketId, reason, supportEngineerId } = context.grant.subjectTokenContext;
      return {
        impersonation_context: { ticket_id: ticketId, reason, support_engineer: supportEngineerId },
      };
    },
  });
  const managementScope = impersonation.options.managementScope;
  const firstParty = new Set<string>([CLIENTS.console, CLIENTS.web]);

  const configuration: Configuration = {
    clients: [
      {
        client_id: CLIENTS.console,
        client_name: 'Support console',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', TOKEN_EXCHANGE_GRANT],
        response_types: ['code'],
        redirect_uris: at('/callback'),
        post_logout_redirect_uris: at('/'),
      },
      {
        client_id: CLIENTS.web,
        client_name: 'Support web',
        client_secret: secrets.webClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code', TOKEN_EXCHANGE_GRANT],
        response_types: ['code'],
        redirect_uris: at('/web/callback'),
      },
      {
        client_id: CLIENTS.account,
        client_name: 'Your account',
        client_secret: secrets.accountClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['authorization_code'],
        response_types: ['code'],
        redirect_uris: at('/account/callback'),
      },
      {
        client_id: CLIENTS.backend,
        client_name: 'Impersonation backend',
        client_secret: secrets.backendClientSecret,
        token_endpoint_auth_method: 'client_secret_basic',
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        // Creates subject tokens; lists and stops impersonations for the console.
        impersonation_management_scope: [
          managementScope,
          impersonation.options.readScope,
          impersonation.options.revokeScope,
        ].join(' '),
      },
    ],
    scopes: ['openid', 'offline_access', 'profile'],
    claims: { openid: ['sub'], profile: ['name', 'roles'] },
    findAccount: (_ctx, id) => accountOf(users.get(id)),
    cookies: { keys: keys.cookieKeys },
    jwks: keys.jwks,
    pkce: { required: () => true },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Grant: 8 * 3600,
      Session: 8 * 3600,
    },
    clientBasedCORS: (_ctx, origin, client) => client.clientId === CLIENTS.console && backendOrigins.includes(origin),
    // oidc-provider's own pages load a web font from the internet; the demo's stay on this machine.
    renderError: (ctx, out) => {
      ctx.type = 'html';
      ctx.body = messagePage(
        'Something went wrong',
        `<div class="error" role="alert" id="oidc-error">${escapeHtml(
          [out.error, out.error_description].filter(Boolean).join(': '),
        )}</div>`,
      );
    },
    features: {
      devInteractions: { enabled: false },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: (ctx, form) => {
          ctx.type = 'html';
          ctx.body = messagePage(
            'Sign out',
            `<p>Sign out of the identity service at <code>${escapeHtml(ctx.host)}</code>?</p>
${form}
<button id="logout-yes" type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button>
<button class="secondary" type="submit" form="op.logoutForm">Stay signed in</button>`,
          );
        },
        postLogoutSuccessSource: (ctx) => {
          ctx.type = 'html';
          ctx.body = messagePage('Signed out', '<p>You are signed out of the identity service.</p>');
        },
      },
      clientCredentials: { enabled: true },
      // The backend learns which application an engineer's token was issued to, and binds the subject token to it.
      introspection: {
        enabled: true,
        // Spelt out (oidc-provider's default): a public client may introspect only its own tokens.
        allowedPolicy: (ctx, client, token) =>
          client.clientAuthMethod !== 'none' || token.clientId === ctx.oidc.client?.clientId,
      },
      resourceIndicators: {
        enabled: true,
        // Without a resource the access token is for userinfo: the actor token of the flow.
        defaultResource: () => undefined,
        useGrantedResource: () => false,
        getResourceServerInfo: (_ctx, resource, client) => {
          if (resource === API_RESOURCE && firstParty.has(client.clientId)) {
            return {
              scope: API_SCOPES.join(' '),
              audience: API_RESOURCE,
              accessTokenFormat: 'jwt',
              accessTokenTTL: 600,
              jwt: { sign: { alg: 'RS256' } },
            };
          }
          throw new errors.InvalidTarget();
        },
      },
    },
  };

  const provider = new Provider(
    issuer,
    impersonation.configure(options.adapter ? { ...configuration, adapter: options.adapter } : configuration),
  );
  // Installed before anything mounts the provider. The Management API is served by the parent app
  // (at /api, not below /oidc), which mounts it below.
  impersonation.install(provider, { mountManagementApi: false });
  // Provider's typings know only oidc-provider's own events.
  const events = provider as unknown as EventEmitter;
  for (const name of Object.values(EVENTS)) {
    events.on(name, (event: unknown) => log(`[audit] ${name} ${JSON.stringify(event)}`));
  }
  provider.on('server_error', (_ctx: unknown, error: Error) =>
    log(`[identity] server error: ${error.stack ?? error.message}`),
  );

  const app = new Koa();
  app.on('error', (error: Error) => log(`[identity] ${error.stack ?? error.message}`));
  app.use(renderHttpErrors);
  const router = interactionRouter(provider, users, firstParty);
  app.use(router.routes()).use(router.allowedMethods());
  app.use(async (ctx, next) => {
    if (ctx.method !== 'GET' || ctx.path !== '/') return next();
    ctx.type = 'html';
    ctx.body = landingPage(issuer, options.backendOrigin);
  });
  app.use(impersonation.managementApi());
  app.use(mountProvider(OIDC_PREFIX, provider));

  serve(server, app);
  return {
    baseUrl,
    issuer,
    managementResource,
    managementUrl: `${baseUrl}${impersonation.options.managementPath}`,
    provider,
    impersonation,
    server,
    close: () => closeServer(server),
  };
}

/**
 * Serves the provider below `prefix`, what koa-mount would do. The provider
 * is handed the request with the prefix removed and `originalUrl` set, the way
 * oidc-provider learns its mount path to build its URLs.
 */
function mountProvider(prefix: string, provider: Provider): Koa.Middleware {
  const handle = provider.callback();
  return async (ctx, next) => {
    if (ctx.path !== prefix && !ctx.path.startsWith(`${prefix}/`)) return next();
    const req = ctx.req as http.IncomingMessage & { originalUrl?: string };
    const url = req.url ?? '/';
    const rest = url.slice(prefix.length);
    req.originalUrl = url;
    req.url = rest.startsWith('/') ? rest : `/${rest}`;
    ctx.respond = false;
    await handle(req, ctx.res);
  };
}

function accountOf(user: DemoUser | undefined): Account | undefined {
  if (!user) return undefined;
  return {
    accountId: user.id,
    impersonable: user.impersonable,
    claims: () => ({ sub: user.id, name: user.name, roles: [...user.roles] }),
  };
}

/** Compares in constant time; an unknown login costs the same as a wrong password. */
function passwordMatches(user: DemoUser | undefined, password: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value).digest();
  const expected = digest(user?.password ?? randomBytes(16).toString('hex'));
  return timingSafeEqual(expected, digest(password)) && user !== undefined;
}

function interactionRouter(provider: Provider, users: Map<string, DemoUser>, firstParty: Set<string>): Router {
  const router = new Router();

  router.get('/interaction/:uid', async (ctx) => {
    const details = await interactionDetails(ctx, provider);
    const clientId = String(details.params['client_id']);
    if (details.prompt.name === 'login') {
      ctx.set('Cache-Control', 'no-store');
      ctx.type = 'html';
      ctx.body = loginPage(details, clientId);
      return;
    }
    if (details.prompt.name === 'consent' && firstParty.has(clientId) && details.session?.accountId) {
      // First-party clients get no consent screen: what they asked for is granted.
      const grantId = await grantRequested(provider, details, details.session.accountId);
      await finish(ctx, provider, { consent: { grantId } });
      return;
    }
    await finish(ctx, provider, {
      error: 'access_denied',
      error_description: `no interaction for prompt ${details.prompt.name}`,
    });
  });

  router.post('/interaction/:uid/login', async (ctx) => {
    const details = await interactionDetails(ctx, provider);
    if (details.prompt.name !== 'login')
      throw new HttpError(400, 'invalid_request', 'this sign-in step is already done');
    const form = await readForm(ctx);
    const login = (form.get('login') ?? '').trim();
    const user = users.get(login);
    if (!passwordMatches(user, form.get('password') ?? '') || !user) {
      ctx.status = 401;
      ctx.set('Cache-Control', 'no-store');
      ctx.type = 'html';
      ctx.body = loginPage(details, String(details.params['client_id']), login, 'Invalid login or password.');
      return;
    }
    const grantId = await grantRequested(provider, details, user.id);
    await finish(ctx, provider, { login: { accountId: user.id }, consent: { grantId } });
  });

  router.get('/interaction/:uid/abort', async (ctx) => {
    await interactionDetails(ctx, provider);
    await finish(ctx, provider, { error: 'access_denied', error_description: 'the user cancelled the sign-in' });
  });

  return router;
}

async function interactionDetails(ctx: Koa.Context, provider: Provider): Promise<Interaction> {
  let details: Interaction;
  try {
    details = await provider.interactionDetails(ctx.req, ctx.res);
  } catch {
    throw new HttpError(
      400,
      'invalid_request',
      'This sign-in has expired or was already completed. Start again from the application.',
    );
  }
  if (details.uid !== ctx.params['uid'])
    throw new HttpError(400, 'invalid_request', 'This sign-in does not match the browser session. Start again.');
  return details;
}

async function finish(
  ctx: Koa.Context,
  provider: Provider,
  result: Parameters<Provider['interactionResult']>[2],
): Promise<void> {
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
  ctx.redirect(returnTo);
  ctx.status = 303;
}

/** A grant of everything the client asked for (first-party clients only). */
async function grantRequested(provider: Provider, details: Interaction, accountId: string): Promise<string> {
  const clientId = String(details.params['client_id']);
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const grant =
    existing && existing.accountId === accountId && existing.clientId === clientId
      ? existing
      : new provider.Grant({ accountId, clientId });
  const scope = typeof details.params['scope'] === 'string' ? details.params['scope'] : '';
  if (scope) grant.addOIDCScope(scope);
  const resources = [details.params['resource']].flat().filter((value): value is string => typeof value === 'string');
  for (const resource of resources) if (scope) grant.addResourceScope(resource, scope);
  const missing = details.prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope);
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {}))
    grant.addResourceScope(resource, scopes);
  return grant.save();
}

async function renderHttpErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    if (!(caught instanceof HttpError)) throw caught;
    ctx.status = caught.status;
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'html';
    ctx.body = page(
      'Sign-in problem',
      `<header><h1>Identity service</h1></header>
<main><div class="card"><h2>Something went wrong</h2><div class="error" role="alert">${escapeHtml(caught.message)}</div></div></main>`,
    );
  }
}

function loginPage(details: Interaction, clientId: string, login = '', error?: string): string {
  const uid = encodeURIComponent(details.uid);
  const scope = typeof details.params['scope'] === 'string' ? details.params['scope'] : '';
  return page(
    'Sign in',
    `<header><h1>Identity service</h1></header>
<main>
  <div class="card" style="max-width: 420px; margin: 40px auto;">
    <h2>Sign in to continue to <code>${escapeHtml(clientId)}</code></h2>
    ${error ? `<div class="error" role="alert" id="login-error">${escapeHtml(error)}</div>` : ''}
    <form method="post" action="/interaction/${uid}/login" autocomplete="off">
      <label for="login">Login</label>
      <input id="login" name="login" value="${escapeHtml(login)}" required autofocus autocapitalize="off" spellcheck="false">
      <label for="password">Password</label>
      <input id="password" name="password" type="password" required>
      <button type="submit">Sign in</button>
      <a class="button secondary" href="/interaction/${uid}/abort">Cancel</a>
    </form>
    <p class="muted">Requested scope: <code>${escapeHtml(scope)}</code>. Demo users: alice (support staff), bob, carol.</p>
  </div>
</main>`,
  );
}

function messagePage(title: string, content: string): string {
  return page(
    title,
    `<header><h1>Identity service</h1></header>
<main><div class="card" style="max-width: 480px; margin: 40px auto;"><h2>${escapeHtml(title)}</h2>
${content}
</div></main>`,
  );
}

function landingPage(issuer: string, backendOrigin: string): string {
  return page(
    'Identity service',
    `<header><h1>Identity service</h1></header>
<main><div class="card">
  <h2>oidc-provider with user impersonation</h2>
  <table>
    <tr><th>Issuer</th><td><code>${escapeHtml(issuer)}</code></td></tr>
    <tr><th>Discovery</th><td><a href="${escapeHtml(`${issuer}/.well-known/openid-configuration`)}">${escapeHtml(`${issuer}/.well-known/openid-configuration`)}</a></td></tr>
    <tr><th>Management API</th><td><code>POST /api/subject-tokens</code></td></tr>
    <tr><th>Support console</th><td><a href="${escapeHtml(`${backendOrigin}/`)}">${escapeHtml(`${backendOrigin}/`)}</a></td></tr>
  </table>
</div></main>`,
  );
}
