/**
 * The customer's own pages: `/account`. A customer signs in (authorization
 * code with PKCE, confidential client `customer-account`, server side) and
 * sees who from support accessed their account, when and why, from the audit
 * trail, with the changes made while acting as them, newest first; and, under
 * "Support access", answers support's requests and gives or ends access
 * (support-access.ts). The sign-in also yields a refresh token, which the
 * backend keeps in the session to obtain the customer's own token for the
 * identity service's support-access API.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type Router from '@koa/router';
import type Koa from 'koa';
import { LRUCache } from 'lru-cache';
import {
  activityLines,
  actorName,
  CUSTOMER_EVENTS,
  formatDate,
  type ChangeRecord,
  type TrailEvent,
} from './activity.js';
import { agentAccess, agentSection, type AgentSession } from './agent-access.js';
import { redeemCode } from './code-redemption.js';
import { escapeHtml, HttpError, page, readForm } from './http.js';
import type { Notification } from './notifications.js';
import type { PendingSignIns } from './pending-sign-ins.js';
import { API_RESOURCE, CLIENTS, type DemoSecrets, type DemoUser } from './seed.js';
import type { Management } from './stop-routes.js';
import {
  accessOfGrant,
  durationOf,
  GRANT_ID,
  REQUEST_ID,
  scopeOf,
  SupportAccessApi,
  supportAccessSection,
  versionOf,
  type Answer,
  type CustomerTokens,
  type Flash,
} from './support-access.js';

export interface AccountOptions {
  /** This backend's URL. */
  url: string;
  endpoints: { authorization: string; token: string; userinfo: string; supportAccess: string };
  /** The resource indicator of the identity service's support-access API. */
  customerResource: string;
  secrets: DemoSecrets;
  users: ReadonlyMap<string, DemoUser>;
  /** Calls the identity service (bounded, a failure is a 502). */
  call(target: string, init: RequestInit): Promise<Response>;
  /** The audit trail's rows about this subject, newest first. */
  trailOf(subject: string): Promise<TrailEvent[]>;
  changesOf(customer: string): ChangeRecord[];
  /** The customer's notifications (from the identity service's webhooks), newest first; none without them. */
  notificationsOf?(customer: string): Notification[];
  /** Sign-ins in progress: unauthenticated, so kept apart from signed-in sessions, bounded, never evicted. */
  pending: PendingSignIns;
}

interface AccountSession {
  sub: string;
  name: string;
  /** Sent back by every form of the page: a form posted from elsewhere (another port of this host is same-site) lacks it. */
  csrf: string;
  tokens: CustomerTokens;
  /** What the last action did, shown once. */
  flash?: Flash;
}

const SESSION_COOKIE = 'account_session';
const STATE_COOKIE = 'account_state';
const SESSION_TTL = 60 * 60_000;
/** The scope of the support-access API (the plugin's default `approvals.customerScope`). */
const CUSTOMER_SCOPE = 'support-access';
/** The page's script talks to this backend only, and its forms post here only. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'unsafe-inline'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

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

export async function accountRoutes(router: Router, options: AccountOptions): Promise<void> {
  const script = await readFile(new URL('./browser/account.js', import.meta.url), 'utf8');
  const redirectUri = `${options.url}/account/callback`;
  const { pending } = options;
  const sessions = new LRUCache<string, AccountSession>({ max: 10_000, ttl: SESSION_TTL });
  const api = new SupportAccessApi(options);
  // The agents acting for the customer (ID-JAGs issued for them), listed and ended through the same API.
  const agentSessions = agentAccess(api);

  function sessionOf(ctx: Koa.Context): AccountSession | undefined {
    const id = ctx.cookies.get(SESSION_COOKIE);
    return id ? sessions.get(id) : undefined;
  }

  /** The signed-in customer and their form, once the form proves it comes from their own page. */
  async function formOf(ctx: Koa.Context): Promise<{ session: AccountSession; form: URLSearchParams }> {
    noStore(ctx);
    const session = sessionOf(ctx);
    if (!session) throw new HttpError(401, 'invalid_request', 'your sign-in has ended: sign in again at /account');
    const form = await readForm(ctx);
    if (!sameToken(form.get('csrf') ?? '', session.csrf))
      throw new HttpError(
        403,
        'access_denied',
        'this form did not come from your account page: open /account and try again',
      );
    return { session, form };
  }

  router.get('/account', async (ctx) => {
    noStore(ctx);
    const session = sessionOf(ctx);
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
    const [trail, support, agents] = await Promise.all([
      options.trailOf(session.sub),
      api.state(session.tokens),
      agentSessions.of(session.tokens),
    ]);
    const lines = activityLines(trail, options.changesOf(session.sub), options.users);
    const notifications = options.notificationsOf?.(session.sub);
    const flash = session.flash;
    delete session.flash;
    ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
    ctx.body = accountPage(
      session,
      `${notifications?.length ? notificationSection(notifications) : ''}
${supportAccessSection(support, session.csrf, options.users, flash, session.sub)}
${agentSection(agents, session.csrf)}
<section class="card" aria-labelledby="activity-title">
<h2 id="activity-title">Account activity</h2>
<p class="muted">Every time someone from our support team acted on your account, newest first.</p>
${
  lines.length
    ? `<ol class="activity" id="activity">${lines
        .map((line) =>
          line.emergency
            ? `<li class="emergency"><strong class="mark">Emergency access</strong> ${escapeHtml(line.text)}</li>`
            : `<li>${escapeHtml(line.text)}</li>`,
        )
        .join('')}</ol>`
    : '<p id="activity-empty">No one from support has accessed your account.</p>'
}
</section>`,
      versionOf(support, [...notificationIds(notifications), ...agentIds(agents)]),
    );
  });

  // What the page's script asks every few seconds: when it changed, the page reloads itself.
  router.get('/account/support-access/version', async (ctx) => {
    noStore(ctx);
    const session = sessionOf(ctx);
    if (!session) throw new HttpError(401, 'invalid_request', 'sign in at /account first');
    const notifications = options.notificationsOf?.(session.sub);
    const [support, agents] = await Promise.all([api.state(session.tokens), agentSessions.of(session.tokens)]);
    ctx.body = { version: versionOf(support, [...notificationIds(notifications), ...agentIds(agents)]) };
  });

  router.post('/account/agents/:id/end', async (ctx) => {
    const { session } = await formOf(ctx);
    const ended = await agentSessions.end(session.tokens, ctx.params['id'] ?? '');
    session.flash = ended
      ? { kind: 'ok', text: 'The agent no longer acts for you: what it was given is stopped.' }
      : { kind: 'error', text: 'Ending the agent failed: it no longer acts for you, or never did.' };
    backToAccount(ctx);
  });

  // Every ID-JAG session of one agent: ending one leaves the others (each issue is a session of its own).
  router.post('/account/agent-clients/:clientId/end', async (ctx) => {
    const { session } = await formOf(ctx);
    const { ended, failed } = await agentSessions.endAll(session.tokens, ctx.params['clientId'] ?? '');
    session.flash =
      ended && !failed
        ? { kind: 'ok', text: 'The agent no longer acts for you: everything it was given is stopped.' }
        : {
            kind: 'error',
            text: failed
              ? `Ending the agent failed for ${failed} of its ${ended + failed} accesses: try again.`
              : 'Ending the agent failed: it no longer acts for you, or never did.',
          };
    backToAccount(ctx);
  });

  router.get('/account.js', (ctx) => {
    ctx.set('Cache-Control', 'no-cache');
    ctx.type = 'text/javascript';
    ctx.body = script;
  });

  router.post('/account/support-access/grants', async (ctx) => {
    const { session, form } = await formOf(ctx);
    const actor = form.get('actor') || undefined;
    if (actor !== undefined && !options.users.get(actor)?.roles.includes('support'))
      throw new HttpError(400, 'invalid_request', 'choose someone from support, or anyone');
    const note = form.get('note')?.trim() || undefined;
    const answer = await api.call(session.tokens, 'POST', '/grants', {
      duration: durationOf(form.get('duration')),
      resource: API_RESOURCE,
      scope: scopeOf(form.get('access')),
      ...(actor ? { actorId: actor } : {}),
      ...(note ? { note } : {}),
    });
    const grant = answer.body;
    session.flash =
      answer.status === 201
        ? {
            kind: 'ok',
            text: `You gave ${actor ? actorName(actor, options.users) : 'anyone in support'} access to your account (${accessOfGrant(grant as { scope?: string[] })}) until ${formatDate(String(grant?.['expiresAt']))}.`,
          }
        : failed('Giving access', answer);
    backToAccount(ctx);
  });

  router.post('/account/support-access/grants/:id/end', async (ctx) => {
    const { session } = await formOf(ctx);
    const id = idOf(ctx, GRANT_ID);
    const answer = await api.call(session.tokens, 'DELETE', `/grants/${id}`);
    session.flash =
      answer.status === 204
        ? { kind: 'ok', text: 'The access ended: whoever used it no longer acts on your account.' }
        : failed('Ending the access', answer);
    backToAccount(ctx);
  });

  router.post('/account/support-access/requests/:id/approve', async (ctx) => {
    const { session, form } = await formOf(ctx);
    const id = idOf(ctx, REQUEST_ID);
    const access = form.get('access');
    const answer = await api.call(session.tokens, 'POST', `/requests/${id}/approve`, {
      duration: durationOf(form.get('duration')),
      // Read only narrows what was asked; without a choice, what was asked is allowed.
      ...(access ? { scope: scopeOf(access) } : {}),
    });
    const grant = answer.body?.['grant'] as { actor?: string; scope?: string[]; expiresAt?: string } | undefined;
    session.flash =
      answer.status === 200 && grant
        ? {
            kind: 'ok',
            text: `You let ${grant.actor ? actorName(grant.actor, options.users) : 'support'} act on your account (${accessOfGrant(grant)}) until ${formatDate(String(grant.expiresAt))}.`,
          }
        : failed('Approving', answer);
    backToAccount(ctx);
  });

  router.post('/account/support-access/requests/:id/deny', async (ctx) => {
    const { session, form } = await formOf(ctx);
    const id = idOf(ctx, REQUEST_ID);
    const reason = form.get('reason')?.trim() || undefined;
    const answer = await api.call(session.tokens, 'POST', `/requests/${id}/deny`, reason ? { reason } : {});
    const request = answer.body?.['request'] as { actor?: string } | undefined;
    session.flash =
      answer.status === 200
        ? {
            kind: 'ok',
            text: `You denied ${request?.actor ? actorName(request.actor, options.users) : 'support'} access to your account.`,
          }
        : failed('Denying', answer);
    backToAccount(ctx);
  });

  router.get('/account/login', (ctx) => {
    const { state, codeChallenge } = pending.start();
    ctx.cookies.set(STATE_COOKIE, state, { httpOnly: true, sameSite: 'lax', path: '/account', overwrite: true });
    const target = new URL(options.endpoints.authorization);
    target.search = new URLSearchParams({
      client_id: CLIENTS.account,
      response_type: 'code',
      // offline_access: a refresh token, from which the backend obtains the customer's token for the support-access API.
      scope: `openid profile offline_access ${CUSTOMER_SCOPE}`,
      resource: options.customerResource,
      redirect_uri: redirectUri,
      state,
      code_challenge: codeChallenge,
      code_challenge_method: 'S256',
      // A shared computer: whoever is signed in at the identity service, the customer signs in here themselves.
      // Consent: oidc-provider issues a refresh token only when consent was asked for.
      prompt: 'login consent',
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
    const { claims, refreshToken } = await redeemCode(
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
    sessions.set(id, {
      sub: claims['sub'],
      name: typeof claims['name'] === 'string' ? claims['name'] : claims['sub'],
      csrf: randomBytes(32).toString('base64url'),
      tokens: { refreshToken: refreshToken ?? '' },
    });
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

function agentIds(agents: readonly AgentSession[]): string[] {
  return agents.map((agent) => agent.id);
}

function notificationIds(notifications: readonly Notification[] | undefined): string[] {
  return (notifications ?? []).map((notification) => notification.id);
}

/** The customer's inbox, once it holds something: what support did on their account, as it happened, newest first. */
function notificationSection(notifications: readonly Notification[]): string {
  return `<section class="card notifications" aria-labelledby="notifications-title">
<h2 id="notifications-title">Notifications</h2>
<ul class="items" id="notifications">${notifications
    .map((notification) => `<li>${escapeHtml(notification.text)}</li>`)
    .join('')}</ul>
</section>`;
}

/** Compares in constant time. */
function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function idOf(ctx: Koa.Context, pattern: RegExp): string {
  const id = ctx.params['id'] ?? '';
  if (!pattern.test(id)) throw new HttpError(404, 'not_found', 'there is no such request or access');
  return id;
}

/** Back to the page (303: the form's POST is not repeated by a reload), where the flash says what happened. */
function backToAccount(ctx: Koa.Context): void {
  ctx.redirect('/account#support-access');
  ctx.status = 303;
}

/** The identity service's refusal in words: its description never repeats what was sent. */
function failed(what: string, answer: Answer): Flash {
  if (answer.status === 401) return { kind: 'error', text: `${what} failed: your sign-in has ended; sign in again.` };
  const description = answer.body?.['error_description'];
  return {
    kind: 'error',
    text:
      answer.status < 500 && typeof description === 'string'
        ? `${what} failed: ${description}.`
        : `${what} failed: the identity service answered ${answer.status}; try again in a moment.`,
  };
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
.activity li.emergency { background: var(--bad-bg); border-left: 4px solid var(--bad); padding-left: 10px; }
.activity .mark { color: var(--bad); margin-right: 6px; }
.notice { border: 1px solid #abefc6; background: var(--ok-bg); color: var(--ok); border-radius: 6px; padding: 10px 14px; margin: 12px 0; }
.items { list-style: none; padding: 0; margin: 0; }
.items > li { padding: 12px 0; border-bottom: 1px solid var(--line); }
.items > li:last-child { border-bottom: 0; }
.items p { margin: 0 0 8px; }
.answers { display: flex; gap: 24px; flex-wrap: wrap; align-items: flex-end; }
.answers form { flex: 1; min-width: 260px; }
.items form button { margin-top: 8px; }
.row { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }
select { width: 100%; padding: 8px 10px; border: 1px solid #bcccdc; border-radius: 6px; font: inherit; background: #fff; }
fieldset.access { border: 0; padding: 0; margin: 12px 0 0; }
fieldset.access legend { font-weight: 600; padding: 0; margin-bottom: 4px; }
label.choice { display: inline-flex; align-items: center; gap: 6px; font-weight: 400; margin: 0 16px 0 0; }
label.choice input { width: auto; }
.card h3 { font-size: 15px; margin: 20px 0 8px; }
details.give { margin-top: 20px; }
.notifications { border-left: 4px solid var(--accent); }
.notifications .items > li { padding: 6px 0; }
details.give > summary { cursor: pointer; font-weight: 600; font-size: 15px; }
`;

/** `version`: what the page shows of support access; its script reloads the page when that changes. */
function accountPage(session: AccountSession | undefined, content: string, version?: string): string {
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
${
  version
    ? `<p class="notice" id="account-updates" role="status" data-version="${escapeHtml(version)}" hidden>Something changed: <a href="/account">reload the page</a> to see it.</p>`
    : ''
}
${content}
</main>${version ? '\n<script type="module" src="/account.js"></script>' : ''}`,
    `<style>${ACCOUNT_STYLE}</style>`,
  );
}
