/**
 * The "Support access" section of the customer's account page: the requests
 * of support waiting for the customer's answer (who asks, why, for what),
 * the access the customer gave (until when, to whom, read-only or with
 * changes), and a form to give access ahead of time. Each action is a form
 * of the page, checked against the session's CSRF token, and a call of the
 * identity service's support-access API with the customer's own access token
 * (from their sign-in here, renewed with its refresh token); the identity
 * service checks every field again.
 */
import { createHash } from 'node:crypto';
import type { AccessGrantView, ApprovalRequestView } from '../lib/index.js';
import { actorName, formatDate, ticketOf } from './activity.js';
import { basic, escapeHtml, HttpError, jsonOf } from './http.js';
import { CLIENTS, type DemoSecrets, type DemoUser } from './seed.js';

export interface SupportAccessOptions {
  endpoints: { token: string; supportAccess: string };
  /** The resource indicator the customer's token is asked for. */
  customerResource: string;
  secrets: DemoSecrets;
  /** Calls the identity service (bounded, a failure is a 502). */
  call(target: string, init: RequestInit): Promise<Response>;
}

/** The customer's tokens for the support-access API, kept in their session here and never sent to the browser. */
export interface CustomerTokens {
  /** The sign-in's refresh token; empty once the identity service refused it. */
  refreshToken: string;
  access?: { value: string; expiresAt: number };
  /** The renewal in flight, shared by concurrent requests of the session. */
  renewing?: Promise<string | undefined>;
}

/** What the section shows: the customer's requests and grants, or why it cannot. */
export type SupportAccessState =
  | { kind: 'ready'; requests: ApprovalRequestView[]; grants: AccessGrantView[] }
  /** No token for the API any longer (the refresh token expired or was revoked): sign in again. */
  | { kind: 'signed-out' }
  | { kind: 'unavailable'; message: string };

/** A message shown once, after an action. */
export interface Flash {
  kind: 'ok' | 'error';
  text: string;
}

export interface Answer {
  status: number;
  body: Record<string, unknown> | undefined;
}

/** Renewed this long before it expires, so that a call never carries a token about to lapse. */
const RENEW_BEFORE_MS = 30_000;
const READ = ['profile:read'];
const READ_AND_CHANGE = ['profile:read', 'profile:write'];
export const GRANT_ID = /^agr_[A-Za-z0-9_-]{22}$/;
export const REQUEST_ID = /^apr_[A-Za-z0-9_-]{22}$/;

/** The durations a customer picks from, seconds, with their words. */
export const DURATIONS: ReadonlyArray<{ seconds: number; label: string }> = [
  { seconds: 900, label: '15 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 8 * 3600, label: '8 hours' },
  { seconds: 24 * 3600, label: '1 day' },
  { seconds: 7 * 24 * 3600, label: '7 days' },
];

export class SupportAccessApi {
  constructor(private readonly options: SupportAccessOptions) {}

  /** The requests waiting for the customer and the access they gave, for the page. */
  async state(tokens: CustomerTokens | undefined): Promise<SupportAccessState> {
    const [requests, grants] = await Promise.all([
      this.call(tokens, 'GET', '/requests'),
      this.call(tokens, 'GET', '/grants'),
    ]);
    if (requests.status === 401 || grants.status === 401) return { kind: 'signed-out' };
    if (requests.status !== 200 || grants.status !== 200) {
      return {
        kind: 'unavailable',
        message: `the identity service could not say who has access (${Math.max(requests.status, grants.status)}); try again in a moment`,
      };
    }
    return {
      kind: 'ready',
      requests: itemsOf<ApprovalRequestView>(requests.body),
      grants: itemsOf<AccessGrantView>(grants.body),
    };
  }

  /**
   * A call of the customer's API with the customer's token, renewed once
   * when refused (it may have been revoked early). 401 without a call when
   * there is no token to send.
   */
  async call(
    tokens: CustomerTokens | undefined,
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<Answer> {
    for (let attempt = 0; ; attempt += 1) {
      const token = tokens ? await this.#tokenFor(tokens) : undefined;
      if (!token) return { status: 401, body: undefined };
      const response = await this.options.call(`${this.options.endpoints.supportAccess}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (response.status === 401 && attempt === 0 && tokens) {
        await response.body?.cancel();
        delete tokens.access;
        continue;
      }
      return { status: response.status, body: response.status === 204 ? undefined : await jsonOf(response) };
    }
  }

  #tokenFor(tokens: CustomerTokens): Promise<string | undefined> {
    if (tokens.access && tokens.access.expiresAt - RENEW_BEFORE_MS > Date.now()) {
      return Promise.resolve(tokens.access.value);
    }
    tokens.renewing ??= this.#renew(tokens).finally(() => {
      delete tokens.renewing;
    });
    return tokens.renewing;
  }

  /** A fresh token for the support-access API from the refresh token; undefined once that is refused. */
  async #renew(tokens: CustomerTokens): Promise<string | undefined> {
    if (!tokens.refreshToken) return undefined;
    const response = await this.options.call(this.options.endpoints.token, {
      method: 'POST',
      headers: {
        authorization: basic(CLIENTS.account, this.options.secrets.accountClientSecret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: tokens.refreshToken,
        resource: this.options.customerResource,
      }),
    });
    const answer = await jsonOf(response);
    if (response.ok && typeof answer?.['access_token'] === 'string' && typeof answer['expires_in'] === 'number') {
      tokens.access = { value: answer['access_token'], expiresAt: Date.now() + answer['expires_in'] * 1000 };
      if (typeof answer['refresh_token'] === 'string') tokens.refreshToken = answer['refresh_token'];
      return tokens.access.value;
    }
    if (response.status === 400 || response.status === 401) {
      // Expired or revoked: the customer signs in again.
      tokens.refreshToken = '';
      delete tokens.access;
      return undefined;
    }
    throw new HttpError(502, 'bad_gateway', `the identity service answered ${response.status} to a token renewal`);
  }
}

function itemsOf<T>(body: Record<string, unknown> | undefined): T[] {
  return Array.isArray(body?.['items']) ? (body['items'] as T[]) : [];
}

/** What changes the section (and `more` of the page: its notifications): the page reloads itself when this changes. */
export function versionOf(state: SupportAccessState, more: readonly string[] = []): string {
  const parts = [
    ...(state.kind === 'ready'
      ? [...state.requests.map((request) => request.id), '|', ...state.grants.map((grant) => grant.id)]
      : [state.kind]),
    '|',
    ...more,
  ];
  return createHash('sha256').update(parts.join(' ')).digest('base64url').slice(0, 16);
}

/** The scopes of an access as the customer picks it: to read, or to read and change. */
export function scopeOf(access: string | null): string[] {
  if (access === 'read') return READ;
  if (access === 'edit') return READ_AND_CHANGE;
  throw new HttpError(400, 'invalid_request', 'access must be read or edit');
}

export function durationOf(value: string | null): number {
  const seconds = Number(value);
  if (!DURATIONS.some((duration) => duration.seconds === seconds))
    throw new HttpError(400, 'invalid_request', 'choose one of the durations offered');
  return seconds;
}

/** "see" or "see and change": what a ceiling of scopes lets support do (no ceiling: anything). */
function accessWords(scope: readonly string[] | undefined): string {
  return !scope || scope.includes('profile:write') ? 'see and change' : 'see';
}

export function accessOfGrant(grant: { scope?: string[] }): string {
  return accessWords(grant.scope) === 'see' ? 'read only' : 'with changes';
}

function durationSelect(id: string, selected: number): string {
  return `<select id="${id}" name="duration">${DURATIONS.map(
    (duration) =>
      `<option value="${duration.seconds}"${duration.seconds === selected ? ' selected' : ''}>${escapeHtml(duration.label)}</option>`,
  ).join('')}</select>`;
}

function accessChoice(name: string, idPrefix: string, checked: 'read' | 'edit'): string {
  const option = (value: 'read' | 'edit', label: string) =>
    `<label class="choice" for="${idPrefix}-${value}"><input type="radio" id="${idPrefix}-${value}" name="${name}" value="${value}"${value === checked ? ' checked' : ''}> ${label}</label>`;
  return `<fieldset class="access"><legend>Access</legend>${option('read', 'Read only')}${option('edit', 'Read and change')}</fieldset>`;
}

function csrfField(csrf: string): string {
  return `<input type="hidden" name="csrf" value="${escapeHtml(csrf)}">`;
}

function requestItem(request: ApprovalRequestView, csrf: string, users: ReadonlyMap<string, DemoUser>): string {
  const id = escapeHtml(request.id);
  const asksChange = accessWords(request.scope) !== 'see';
  const text =
    `${actorName(request.actor, users)} asks to ${accessWords(request.scope)} your account${ticketOf(request.context)}. ` +
    `Asked on ${formatDate(request.createdAt)}; without your answer the request expires on ${formatDate(request.expiresAt)}.`;
  return `<li class="request" id="request-${id}">
<p>${escapeHtml(text)}</p>
<div class="answers">
<form method="post" action="/account/support-access/requests/${id}/approve" class="approve" aria-label="Approve the request of ${escapeHtml(actorName(request.actor, users))}">
${csrfField(csrf)}
<label for="approve-duration-${id}">Allow for</label>
${durationSelect(`approve-duration-${id}`, 3600)}
${asksChange ? accessChoice('access', `approve-access-${id}`, 'edit') : ''}
<button type="submit">Approve</button>
</form>
<form method="post" action="/account/support-access/requests/${id}/deny" class="deny" aria-label="Deny the request of ${escapeHtml(actorName(request.actor, users))}">
${csrfField(csrf)}
<label for="deny-reason-${id}">Reason (optional, support sees it)</label>
<input id="deny-reason-${id}" name="reason" maxlength="500" autocomplete="off">
<button class="secondary" type="submit">Deny</button>
</form>
</div>
</li>`;
}

function grantItem(grant: AccessGrantView, csrf: string, users: ReadonlyMap<string, DemoUser>): string {
  const id = escapeHtml(grant.id);
  const who = grant.actor ? actorName(grant.actor, users) : 'Anyone in support';
  const text =
    `${who} may ${accessWords(grant.scope)} your account until ${formatDate(grant.expiresAt)}` +
    `${grant.origin === 'approval' ? ' (you approved their request)' : ''}${grant.note ? `. Your note: ${grant.note}` : ''}.`;
  return `<li class="grant" id="grant-${id}">
<p>${escapeHtml(text)}</p>
<form method="post" action="/account/support-access/grants/${id}/end" aria-label="End this access">
${csrfField(csrf)}
<button class="secondary" type="submit">End access</button>
</form>
</li>`;
}

/** The section's HTML: pending requests first (they wait for an answer), then the access given, then the form to give one. */
export function supportAccessSection(
  state: SupportAccessState,
  csrf: string,
  users: ReadonlyMap<string, DemoUser>,
  flash: Flash | undefined,
  customer: string,
): string {
  const message = flash
    ? flash.kind === 'ok'
      ? `<div class="notice" id="support-notice" role="status">${escapeHtml(flash.text)}</div>`
      : `<div class="error" id="support-error" role="alert">${escapeHtml(flash.text)}</div>`
    : '';
  const heading = `<h2 id="support-title">Support access</h2>
<p class="muted">Our support team acts on your account only with your say: access you give ahead of time, or your answer to their request.</p>
${message}`;
  if (state.kind === 'signed-out') {
    return `<section class="card" id="support-access" aria-labelledby="support-title">${heading}
<p id="support-sign-in-again">Your sign-in for support access has ended. <a href="/account/login">Sign in again</a> to answer requests and manage access.</p></section>`;
  }
  if (state.kind === 'unavailable') {
    return `<section class="card" id="support-access" aria-labelledby="support-title">${heading}
<div class="error" role="alert" id="support-unavailable">${escapeHtml(state.message)}</div></section>`;
  }
  // Only the support staff of the customer's own organisation may act for them: the others are not offered.
  const organisation = users.get(customer)?.organisation;
  const supportStaff = [...users.values()].filter(
    (user) => user.roles.includes('support') && user.organisation === organisation,
  );
  return `<section class="card" id="support-access" aria-labelledby="support-title">${heading}
<h3 id="requests-title">Waiting for your answer</h3>
${
  state.requests.length
    ? `<ul class="items" id="requests" aria-labelledby="requests-title">${state.requests.map((request) => requestItem(request, csrf, users)).join('')}</ul>`
    : '<p id="requests-empty">No one from support is waiting for your answer.</p>'
}
<h3 id="grants-title">Access you gave</h3>
${
  state.grants.length
    ? `<ul class="items" id="grants" aria-labelledby="grants-title">${state.grants.map((grant) => grantItem(grant, csrf, users)).join('')}</ul>`
    : '<p id="grants-empty">Support has no access to your account.</p>'
}
<details class="give" id="give">
<summary id="give-title">Give support access ahead of time</summary>
<form method="post" action="/account/support-access/grants" id="give-form" aria-labelledby="give-title">
${csrfField(csrf)}
<div class="row">
<div><label for="give-duration">For</label>${durationSelect('give-duration', 24 * 3600)}</div>
<div><label for="give-actor">To</label><select id="give-actor" name="actor"><option value="">Anyone in support</option>${supportStaff
    .map((user) => `<option value="${escapeHtml(user.id)}">${escapeHtml(user.name)}</option>`)
    .join('')}</select></div>
</div>
${accessChoice('access', 'give-access', 'read')}
<label for="give-note">Note for support (optional)</label>
<input id="give-note" name="note" maxlength="500" autocomplete="off" placeholder="About the invoice of November">
<button type="submit">Give access</button>
</form>
</details>
</section>`;
}
