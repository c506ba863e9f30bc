/**
 * The confidential web client `support-web`: a server-side sign-in
 * (`/web/login`, `/web/callback`) that shows the engineer's access token, the
 * actor token of the curl walk-through.
 */
import type Router from '@koa/router';
import type { BackendDependencies } from './backend-dependencies.js';
import { redeemCode } from './code-redemption.js';
import { escapeHtml, HttpError, page } from './http.js';
import type { PendingSignIns } from './pending-sign-ins.js';
import { CLIENTS } from './seed.js';

export function webSignInRoutes(router: Router, deps: BackendDependencies, pending: PendingSignIns): void {
  const { endpoints, secrets, call } = deps;
  const redirectUri = `${deps.url}/web/callback`;

  router.get('/web/login', (ctx) => {
    const { state, codeChallenge } = pending.start();
    ctx.cookies.set('web_state', state, { httpOnly: true, sameSite: 'lax', path: '/web', overwrite: true });
    const target = new URL(endpoints.authorization);
    target.search = new URLSearchParams({
      client_id: CLIENTS.web,
      response_type: 'code',
      scope: 'openid profile',
      redirect_uri: redirectUri,
      state,
      code_challenge: codeChallenge,
      code_challenge_method: 'S256',
    }).toString();
    ctx.redirect(target.href);
  });

  router.get('/web/callback', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    const state = typeof ctx.query['state'] === 'string' ? ctx.query['state'] : '';
    const verifier = pending.take(state);
    if (typeof ctx.query['error'] === 'string') {
      throw new HttpError(400, ctx.query['error'], String(ctx.query['error_description'] ?? 'the sign-in failed'));
    }
    if (!verifier || ctx.cookies.get('web_state') !== state || typeof ctx.query['code'] !== 'string') {
      throw new HttpError(400, 'invalid_request', 'this sign-in is unknown or expired; start again at /web/login');
    }
    const signedIn = await redeemCode(
      { call, endpoints, clientId: CLIENTS.web, clientSecret: secrets.webClientSecret, redirectUri },
      ctx.query['code'],
      verifier,
    );
    ctx.type = 'html';
    ctx.body = webTokenPage(signedIn.claims.sub, signedIn.accessToken, signedIn.expiresIn);
  });
}

function webTokenPage(sub: string, accessToken: string, expiresIn: number): string {
  return page(
    'Support web',
    `<header><h1>Support web</h1><span class="who">signed in as ${escapeHtml(sub)}</span></header>
<main><div class="card">
  <h2>Your access token (the actor token)</h2>
  <p>Scope <code>openid profile</code>, no resource; valid for ${escapeHtml(expiresIn)} seconds. Use it as
  <code>ACTOR_TOKEN</code> in the curl walk-through of the README.</p>
  <pre id="access-token">${escapeHtml(accessToken)}</pre>
  <pre>export ACTOR_TOKEN='${escapeHtml(accessToken)}'</pre>
  <a class="button secondary" href="/">Support console</a>
</div></main>`,
  );
}
