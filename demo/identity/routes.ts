/**
 * The identity service's own routes beside the provider: the sign-in
 * interaction oidc-provider hands over to (login form, first-party consent,
 * cancel) and the landing page.
 */
import Router from '@koa/router';
import type Koa from 'koa';
import type Provider from 'oidc-provider';
import type { Interaction } from 'oidc-provider';
import { HttpError, readForm } from '../http.js';
import { CLIENTS } from '../seed.js';
import type { DemoAccounts } from './accounts.js';
import { FIRST_PARTY } from './configuration.js';
import { landingPage, loginPage, signInProblemPage } from './views.js';

/** The customer's support-access API: its resource indicator and the scope its tokens need. */
export interface CustomerApiScope {
  resource: string;
  scope: string;
}

/** The clients a customer already signed in consents to without a screen: the first-party ones and the agent. */
const CONSENTED: ReadonlySet<string> = new Set([...FIRST_PARTY, CLIENTS.ordersAgent]);

export function interactionRoutes(provider: Provider, accounts: DemoAccounts, customerApi: CustomerApiScope): Router {
  const router = new Router();

  router.get('/interaction/:uid', async (ctx) => {
    const details = await interactionDetails(ctx, provider);
    const clientId = String(details.params['client_id']);
    if (details.prompt.name === 'login') {
      ctx.set('Cache-Control', 'no-store');
      ctx.type = 'html';
      ctx.body = loginPage(details, clientId, accounts.users);
      return;
    }
    const missing = (details.prompt.details as { missingResourceScopes?: Record<string, string[]> })
      .missingResourceScopes;
    if (details.prompt.name === 'consent' && missing && customerApi.resource in missing) {
      // Only the customers' account pages get it, at the customer's own sign-in: no other client ever does.
      await finish(ctx, provider, {
        error: 'access_denied',
        error_description: "the customer's support-access API is for the customers' account pages only",
      });
      return;
    }
    if (details.prompt.name === 'consent' && CONSENTED.has(clientId) && details.session?.accountId) {
      // First-party clients get no consent screen: what they asked for is granted. Nor does the agent: as at
      // its sign-in, what it asked for (offline_access, with prompt=consent) is granted to the customer signed in.
      const grantId = await grantRequested(provider, details, details.session.accountId, customerApi);
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
    const user = accounts.authenticate(login, form.get('password') ?? '');
    if (!user) {
      ctx.status = 401;
      ctx.set('Cache-Control', 'no-store');
      ctx.type = 'html';
      ctx.body = loginPage(
        details,
        String(details.params['client_id']),
        accounts.users,
        login,
        'Invalid login or password.',
      );
      return;
    }
    const grantId = await grantRequested(provider, details, user.id, customerApi);
    await finish(ctx, provider, { login: { accountId: user.id }, consent: { grantId } });
  });

  router.get('/interaction/:uid/abort', async (ctx) => {
    await interactionDetails(ctx, provider);
    await finish(ctx, provider, { error: 'access_denied', error_description: 'the user cancelled the sign-in' });
  });

  return router;
}

/** `GET /`: the issuer, its discovery document and the support console's address. */
export function landing(issuer: string, backendOrigin: string): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.method !== 'GET' || ctx.path !== '/') return next();
    ctx.type = 'html';
    ctx.body = landingPage(issuer, backendOrigin);
  };
}

/** An interaction that cannot go on is a page that says so, not a stack trace. */
export async function renderHttpErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    if (!(caught instanceof HttpError)) throw caught;
    ctx.status = caught.status;
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'html';
    ctx.body = signInProblemPage(caught.message);
  }
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

/**
 * A grant of everything the client asked for, the user having signed in for
 * it (or the client being first-party). The customer's support-access API is
 * granted to the customers' account pages only, and only its one scope: the
 * token that gives or approves support access must come from the customer's
 * own sign-in there.
 */
async function grantRequested(
  provider: Provider,
  details: Interaction,
  accountId: string,
  customerApi: CustomerApiScope,
): Promise<string> {
  const clientId = String(details.params['client_id']);
  const existing = details.grantId ? await provider.Grant.find(details.grantId) : undefined;
  const grant =
    existing && existing.accountId === accountId && existing.clientId === clientId
      ? existing
      : new provider.Grant({ accountId, clientId });
  const scope = typeof details.params['scope'] === 'string' ? details.params['scope'] : '';
  const oidcScope = scope
    .split(' ')
    .filter((name) => name && name !== customerApi.scope)
    .join(' ');
  if (oidcScope) grant.addOIDCScope(oidcScope);
  const forCustomerApi = (resource: string) => resource === customerApi.resource;
  const resources = [details.params['resource']].flat().filter((value): value is string => typeof value === 'string');
  for (const resource of resources) {
    if (!forCustomerApi(resource)) {
      if (scope) grant.addResourceScope(resource, scope);
    } else if (clientId === CLIENTS.account && scope.split(' ').includes(customerApi.scope)) {
      grant.addResourceScope(resource, customerApi.scope);
    }
  }
  const missing = details.prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope);
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {}))
    if (!forCustomerApi(resource)) grant.addResourceScope(resource, scopes);
  return grant.save();
}
