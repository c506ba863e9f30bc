/**
 * The customer's own pages: `/account`. A customer signs in (authorization
 * code with PKCE, confidential client `customer-account`, server side) and
 * sees who from support accessed their account, when and why, from the audit
 * trail, with the changes made while acting as them. Newest first.
 */
import { randomBytes } from 'node:crypto';
import type Router from '@koa/router';
import type Koa from 'koa';
import { LRUCache } from 'lru-cache';
import { activityLines, CUSTOMER_EVENTS, type ChangeRecord, type TrailEvent } from './activity.js';
import { redeemCode } from './code-redemption.js';
import { escapeHtml, HttpError, page } from './http.js';
import type { PendingSignIns } from './pending-sign-ins.js';
import { CLIENTS, type DemoSecrets, type DemoUser } from './seed.js';
import type { Management } from './stop-routes.js';

export interface AccountOptions {
  /** This backend's URL. */
  url: string;
  endpoints: { authorization: string; token: string; userinfo: string };
  secrets: DemoSecrets;
  users: ReadonlyMap<string, DemoUser>;
  /** Calls the identity service (bounded, a failure is a 502). */
  call(target: string, init: RequestInit): Promise<Response>;
  /** The audit trail's rows about this subject, newest first. */
  trailOf(subject: string): Promise<TrailEvent[]>;
  changesOf(customer: string): ChangeRecord[];
  /** Sign-ins in progress: unauthenticated, so kept apart from signed-in sessions, bounded, never evicted. */
  pending: PendingSignIns;
}

interface AccountSession {
  sub: string;
  name: string;
}

const SESSION_COOKIE = 'account_session';
const STATE_COOKIE = 'account_state';
const SESSION_TTL = 60 * 60_000;

/**
 * The audit trail's rows about a subject, from the Management API: every
 * access and every stop, page after page. Refusals and other rows are not
 * asked for, so no number of them can push an access out of what the
 * customer is shown.
 */
export function auditTrailOf(management: Management, sessionsUrl: string): (subject: string) => Promise<TrailEvent[]> {
  return async (subject) => {
    const rows: TrailEvent[] = [];
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams([
        ['subject', subject],
        ...CUSTOMER_EVENTS.map((name) => ['event', name]),
        ['limit', '100'],
      ]);
      if (cursor) query.set('cursor', cursor);
      const answer = await management('GET', `${sessionsUrl}/events?${query}`);
      if (answer.status !== 200 || !Array.isArray(answer.body?.['items']))
        throw new HttpError(502, 'bad_gateway', `the audit trail answered ${answer.status}`);
      rows.push(...(answer.body['items'] as TrailEvent[]));
      const next: unknown = answer.body['nextCursor'];
      cursor = typeof next === 'string' ? next : null;
    } while (cursor);
    return rows;
  };
}

export function accountRoutes(router: Router, options: AccountOptions): void {
  const redirectUri = `${options.url}/account/callback`;
  const { pending } = options;
  const sessions = new LRUCache<string, AccountSession>({ max: 10_000, ttl: SESSION_TTL });

  router.get('/account', async (ctx) => {
    noStore(ctx);
    const id = ctx.cookies.get(SESSION_COOKIE);
    const session = id ? sessions.get(id) : undefined;
    ctx.type = 'html';
    if (!session) {
      ctx.body = accountPage(
        undefined,
        `<section class="card"><h2>Your account</h2>
<p>Sign in to see your account's activity, including every time our support team accessed it.</p>
<a class="button" id="account-sign-in" href="/account/login">Sign in</a></section>`,
      );
      return;
    }
    const lines = activityLines(await options.trailOf(session.sub), options.changesOf(session.sub), options.users);
    ctx.body = accountPage(
      session,
      `<section class="card" aria-labelledby="activity-title">
<h2 id="activity-title">Account activity</h2>
<p class="muted">Every time someone from our support team acted on your account, newest first.</p>
${
  lines.length
    ? `<ol class="activity" id="activity">${lines.map((line) => `<li>${escapeHtml(line.text)}</li>`).join('')}</ol>`
    : '<p id="activity-empty">No one from support has accessed your account.</p>'
}
</section>`,
    );
  });

  router.get('/account/login', (ctx) => {
    const { state, codeChallenge } = pending.start();
    ctx.cookies.set(STATE_COOKIE, state, { httpOnly: true, sameSite: 'lax', path: '/account', overwrite: true });
    const target = new URL(options.endpoints.authorization);
    target.search = new URLSearchParams({
      client_id: CLIENTS.account,
      response_type: 'code',
      scope: 'openid profile',
      redirect_uri: redirectUri,
      state,
      code_challenge: codeChallenge,
      code_challenge_method: 'S256',
      // A shared computer: whoever is signed in at the identity service, the customer signs in here themselves.
      prompt: 'login',
    }).toString();
    ctx.redirect(target.href);
  });

  router.get('/account/callback', async (ctx) => {
    noStore(ctx);
    const state = typeof ctx.query['state'] === 'string' ? ctx.query['state'] : '';
    const verifier = pending.take(state);
    if (typeof ctx.query['error'] === 'string') {
      throw new HttpError(400, ctx.query['error'], String(ctx.query['error_description'] ?? 'the sign-in failed'));
    }
    if (!verifier || ctx.cookies.get(STATE_COOKIE) !== state || typeof ctx.query['code'] !== 'string') {
      throw new HttpError(400, 'invalid_request', 'this sign-in is unknown or expired; start again at /account');
    }
    const { claims } = await redeemCode(
      {
        call: options.call,
        endpoints: options.endpoints,
        clientId: CLIENTS.account,
        clientSecret: options.secrets.accountClientSecret,
        redirectUri,
      },
      ctx.query['code'],
      verifier,
    );
    const id = randomBytes(32).toString('base64url');
    sessions.set(id, { sub: claims['sub'], name: typeof claims['name'] === 'string' ? claims['name'] : claims['sub'] });
    ctx.cookies.set(STATE_COOKIE, null, { path: '/account' });
    ctx.cookies.set(SESSION_COOKIE, id, {
      httpOnly: true,
      sameSite: 'lax',
      path: '/account',
      maxAge: SESSION_TTL,
      overwrite: true,
    });
    ctx.redirect('/account');
  });

  router.post('/account/logout', (ctx) => {
    const id = ctx.cookies.get(SESSION_COOKIE);
    if (id) sessions.delete(id);
    ctx.cookies.set(SESSION_COOKIE, null, { path: '/account' });
    ctx.redirect('/account');
    ctx.status = 303;
  });
}

function noStore(ctx: Koa.Context): void {
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Referrer-Policy', 'no-referrer');
}

const ACCOUNT_STYLE = `
.activity { list-style: none; padding: 0; margin: 0; }
.activity li { padding: 10px 0; border-bottom: 1px solid var(--line); }
.activity li:last-child { border-bottom: 0; }
header form { margin: 0; }
header button { margin: 0; }
`;

function accountPage(session: AccountSession | undefined, content: string): string {
  return page(
    'Your account',
    `<header>
  <h1>Your account</h1>
  ${
    session
      ? `<span class="who" id="account-user">Signed in as ${escapeHtml(session.name)} (${escapeHtml(session.sub)})</span>
  <form method="post" action="/account/logout"><button class="secondary" type="submit">Sign out</button></form>`
      : ''
  }
</header>
<main>
${content}
</main>`,
    `<style>${ACCOUNT_STYLE}</style>`,
  );
}
