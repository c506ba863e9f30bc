/**
 * The support console's script (runs in the browser, served as /console.js).
 * Sign-in: authorization code + PKCE as the public client; then the three
 * steps of the spec: request impersonation from the backend, exchange the
 * subject token with the actor token, call the resource API.
 */
import type { ConsoleConfig } from '../console-page.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const SESSION_KEY = 'support-console.session';
const LOGIN_KEY = 'support-console.login';

interface Session {
  accessToken: string;
  expiresAt: number;
  sub: string;
  name?: string;
  roles: string[];
}

interface ErrorBody {
  error?: unknown;
  error_description?: unknown;
}

class FlowError extends Error {}

function element<T extends HTMLElement = HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing from the page`);
  return found as T;
}

const config = JSON.parse(element('config').textContent ?? '{}') as ConsoleConfig;
let countdown: number | undefined;

function showError(message: string): void {
  const box = element('error');
  box.textContent = message;
  box.hidden = false;
}

function clearError(): void {
  const box = element('error');
  box.textContent = '';
  box.hidden = true;
}

function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString(size: number): string {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function decodeJwt(token: string): Record<string, unknown> {
  const part = token.split('.')[1];
  if (!part) throw new FlowError('the access token is not a JWT');
  const text = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = Uint8Array.from(text, (char) => char.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
}

/** fetch, with a network failure (or a CORS refusal) turned into a message that names the call. */
async function send(what: string, url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    throw new FlowError(`${what} failed: ${url} could not be reached (${(error as Error).message})`);
  }
}

async function failure(what: string, response: Response): Promise<FlowError> {
  let detail = '';
  try {
    const body = await response.json() as ErrorBody;
    detail = [body.error, body.error_description].filter((part) => typeof part === 'string' && part).join(': ');
  } catch {
    // not JSON: the status says it all
  }
  return new FlowError(`${what} failed: HTTP ${response.status}${detail ? ` — ${detail}` : ''}`);
}

function loadSession(): Session | undefined {
  const raw = sessionStorage.getItem(SESSION_KEY);
  if (!raw) return undefined;
  const session = JSON.parse(raw) as Session;
  if (session.expiresAt <= Date.now()) {
    sessionStorage.removeItem(SESSION_KEY);
    return undefined;
  }
  return session;
}

async function signIn(): Promise<void> {
  const state = randomString(16);
  const verifier = randomString(32);
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify({ state, verifier }));
  const target = new URL(config.authorizationEndpoint);
  target.search = new URLSearchParams({
    client_id: config.clientId,
    response_type: 'code',
    scope: 'openid profile',
    redirect_uri: config.redirectUri,
    state,
    code_challenge: await challengeOf(verifier),
    code_challenge_method: 'S256',
  }).toString();
  location.assign(target.href);
}

async function completeSignIn(params: URLSearchParams): Promise<void> {
  const pending = JSON.parse(sessionStorage.getItem(LOGIN_KEY) ?? 'null') as { state: string; verifier: string } | null;
  sessionStorage.removeItem(LOGIN_KEY);
  history.replaceState(null, '', '/');
  if (params.get('error')) {
    throw new FlowError(`Sign-in failed: ${params.get('error')}${params.get('error_description') ? ` — ${params.get('error_description')}` : ''}`);
  }
  const code = params.get('code');
  if (!pending || !code || params.get('state') !== pending.state) {
    throw new FlowError('Sign-in failed: the answer does not match a sign-in started here. Sign in again.');
  }

  const response = await send('Sign-in (token request)', config.tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: config.clientId,
      code,
      redirect_uri: config.redirectUri,
      code_verifier: pending.verifier,
    }),
  });
  if (!response.ok) throw await failure('Sign-in (token request)', response);
  const tokens = await response.json() as { access_token: string; expires_in: number };

  const info = await send('Reading your profile (userinfo)', config.userinfoEndpoint, {
    headers: { authorization: `Bearer ${tokens.access_token}` },
  });
  if (!info.ok) throw await failure('Reading your profile (userinfo)', info);
  const claims = await info.json() as { sub: string; name?: string; roles?: string[] };
  const session: Session = {
    accessToken: tokens.access_token,
    expiresAt: Date.now() + tokens.expires_in * 1000,
    sub: claims.sub,
    ...(claims.name ? { name: claims.name } : {}),
    roles: claims.roles ?? [],
  };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
}

function render(): void {
  const session = loadSession();
  const who = element('signed-in-user');
  who.hidden = !session;
  who.textContent = session
    ? `Signed in as ${session.sub}${session.name ? ` (${session.name})` : ''}${session.roles.length ? ` · ${session.roles.join(', ')}` : ''}`
    : '';
  element('sign-out').hidden = !session;
  element('sign-in-card').hidden = Boolean(session);
  element('impersonate-card').hidden = !session;
}

function resetResults(): void {
  if (countdown !== undefined) window.clearInterval(countdown);
  countdown = undefined;
  element('steps').replaceChildren();
  for (const id of ['progress-card', 'token-card', 'api-card']) element(id).hidden = true;
}

function step(text: string): { done(detail: string): void; fail(): void } {
  element('progress-card').hidden = false;
  const item = document.createElement('li');
  item.className = 'pending';
  const title = document.createElement('span');
  title.textContent = text;
  const detail = document.createElement('div');
  detail.className = 'muted';
  item.append(title, detail);
  element('steps').append(item);
  return {
    done(message) {
      item.className = 'done';
      detail.textContent = message;
    },
    fail() {
      item.className = 'failed';
    },
  };
}

function showClaims(claims: Record<string, unknown>): void {
  const text = (value: unknown) => (value === undefined ? '(absent)' : typeof value === 'string' ? value : JSON.stringify(value));
  element('claim-sub').textContent = text(claims['sub']);
  element('claim-act').textContent = text(claims['act']);
  element('claim-aud').textContent = text(claims['aud']);
  element('claim-scope').textContent = text(claims['scope']);
  element('claim-context').textContent = JSON.stringify(claims['impersonation_context'] ?? null, null, 2);
  element('claims-raw').textContent = JSON.stringify(claims, null, 2);
  const exp = typeof claims['exp'] === 'number' ? claims['exp'] : 0;
  const show = () => {
    const left = Math.round(exp - Date.now() / 1000);
    const target = element('claim-exp');
    const at = new Date(exp * 1000).toLocaleTimeString();
    if (left > 0) {
      target.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} remaining (expires at ${at}; no refresh token)`;
      target.classList.remove('expired');
    } else {
      target.textContent = `expired at ${at}: impersonate again to continue`;
      target.classList.add('expired');
      if (countdown !== undefined) window.clearInterval(countdown);
    }
  };
  show();
  countdown = window.setInterval(show, 1000);
  element('token-card').hidden = false;
}

async function impersonate(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  clearError();
  resetResults();
  const session = loadSession();
  if (!session) {
    render();
    showError('Your sign-in has expired. Sign in again.');
    return;
  }
  const userId = element<HTMLInputElement>('user').value.trim();
  const reason = element<HTMLInputElement>('reason').value.trim();
  const ticketId = element<HTMLInputElement>('ticket').value.trim();
  const button = element<HTMLButtonElement>('impersonate');
  button.disabled = true;
  let current: ReturnType<typeof step> | undefined;
  try {
    current = step(`1. Request impersonation of ${userId} (backend, POST /api/request-impersonation)`);
    const requested = await send('Requesting impersonation', '/api/request-impersonation', {
      method: 'POST',
      headers: { authorization: `Bearer ${session.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId, reason, ticketId }),
    });
    if (requested.status === 401) sessionStorage.removeItem(SESSION_KEY);
    if (!requested.ok) throw await failure('Requesting impersonation', requested);
    const { subjectToken, expiresIn } = await requested.json() as { subjectToken: string; expiresIn: number };
    current.done(`Subject token received (single use, expires in ${expiresIn} s).`);

    current = step(`2. Exchange it for an access token for ${config.resource} (token endpoint)`);
    const exchanged = await send('Token exchange', config.tokenEndpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        client_id: config.clientId,
        scope: config.scope,
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        resource: config.resource,
        actor_token: session.accessToken,
        actor_token_type: ACCESS_TOKEN_TYPE,
      }),
    });
    if (!exchanged.ok) throw await failure('Token exchange', exchanged);
    const issued = await exchanged.json() as {
      access_token: string; expires_in: number; scope?: string; refresh_token?: string; issued_token_type: string;
    };
    current.done(`${issued.issued_token_type}, expires in ${issued.expires_in} s, scope "${issued.scope ?? ''}", `
      + `${issued.refresh_token ? 'with' : 'no'} refresh token.`);
    showClaims(decodeJwt(issued.access_token));

    current = step('3. Call the demo resource API with the impersonation token (GET /api/me)');
    const answer = await send('Calling the resource API', '/api/me', {
      headers: { authorization: `Bearer ${issued.access_token}` },
    });
    if (!answer.ok) throw await failure('Calling the resource API', answer);
    const body = await answer.json() as { message?: string };
    current.done('The resource API accepted the token.');
    element('api-message').textContent = body.message ?? '';
    element('api-answer').textContent = JSON.stringify(body, null, 2);
    element('api-card').hidden = false;
  } catch (error) {
    current?.fail();
    showError(error instanceof FlowError ? error.message : `Unexpected error: ${(error as Error).message}`);
    render();
  } finally {
    button.disabled = false;
  }
}

async function start(): Promise<void> {
  element('sign-in').addEventListener('click', () => {
    signIn().catch((error: Error) => showError(`Sign-in failed: ${error.message}`));
  });
  element('sign-out').addEventListener('click', () => {
    // Forget the tokens here, then end the session at the identity service, which returns to this page.
    sessionStorage.removeItem(SESSION_KEY);
    const target = new URL(config.endSessionEndpoint);
    target.search = new URLSearchParams({
      client_id: config.clientId,
      post_logout_redirect_uri: config.postLogoutRedirectUri,
    }).toString();
    location.assign(target.href);
  });
  element<HTMLFormElement>('impersonate-form').addEventListener('submit', (event) => {
    void impersonate(event);
  });
  const params = new URLSearchParams(location.search);
  if (location.pathname === '/callback') {
    try {
      await completeSignIn(params);
    } catch (error) {
      showError(error instanceof FlowError ? error.message : `Sign-in failed: ${(error as Error).message}`);
    }
  }
  render();
  document.body.dataset['ready'] = 'true';
}

void start();
