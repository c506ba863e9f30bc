/**
 * The support console: its page (`/`, and `/callback` where the sign-in
 * returns) and its script (`/console.js`, compiled from browser/console.ts).
 */
import { readFile } from 'node:fs/promises';
import type Router from '@koa/router';
import type { BackendDependencies } from './backend-dependencies.js';
import { consolePage, type ConsoleConfig } from './console-page.js';
import { API_RESOURCE, CLIENTS } from './seed.js';

export async function consoleRoutes(router: Router, deps: BackendDependencies): Promise<void> {
  const { url, issuer, endpoints } = deps;
  const config: ConsoleConfig = {
    issuer,
    clientId: CLIENTS.console,
    redirectUri: `${url}/callback`,
    authorizationEndpoint: endpoints.authorization,
    tokenEndpoint: endpoints.token,
    userinfoEndpoint: endpoints.userinfo,
    endSessionEndpoint: endpoints.endSession,
    postLogoutRedirectUri: `${url}/`,
    resource: API_RESOURCE,
    scope: 'profile:read',
    editScope: 'profile:read profile:write',
    accountUrl: `${url}/account`,
  };
  const script = await readFile(new URL('./browser/console.js', import.meta.url), 'utf8');
  // The script talks to this backend and to the identity service only.
  const contentSecurityPolicy = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'unsafe-inline'",
    `connect-src 'self' ${deps.identityOrigin}`,
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');

  router.get(['/', '/callback'], (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Content-Security-Policy', contentSecurityPolicy);
    ctx.type = 'html';
    ctx.body = consolePage(config);
  });

  router.get('/console.js', (ctx) => {
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/javascript';
    ctx.body = script;
  });
}
