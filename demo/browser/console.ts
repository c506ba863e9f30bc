/**
 * The support console's script (runs in the browser, served as /console.js).
 * Sign-in: authorization code + PKCE as the public client. Acting as a
 * customer: the backend asks the Management API for a subject token, the
 * console exchanges it with the engineer's token, then shows the customer's
 * data from the resource API as the customer's app would. While acting, a
 * banner says as whom, until when, and stops it. A customer who must approve
 * is asked first: the console says it waits for them, asks the backend from
 * time to time, and goes on by itself once they approve (or says they
 * denied). The protocol's steps and claims stay available under "Details".
 */
import type { ConsoleElementId, ConsoleElements } from '../console-elements.js';
import type { ConsoleConfig } from '../console-page.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const SESSION_KEY = 'support-console.session';
const LOGIN_KEY = 'support-console.login';
const ACTING_KEY = 'support-console.acting';
const RESUME_KEY = 'support-console.resume';
const WAITING_KEY = 'support-console.waiting';
const DETAILS_KEY = 'support-console.details';
const WRITE_SCOPE = 'profile:write';
/** Asking whether the customer answered: first after a second, then less often, at most every three seconds. */
const FIRST_POLL_MS = 1000;
const MAX_POLL_MS = 3000;
/** Failed asks in a row (the backend unreachable) after which the console stops waiting and says so. */
const MAX_POLL_FAILURES = 5;

interface Session {
  accessToken: string;
  expiresAt: number;
  sub: string;
  name?: string;
  roles: string[];
}

interface ImpersonationRequest {
  userId: string;
  reason: string;
  ticketId: string;
}

/** The impersonation in progress: kept in sessionStorage, so that it survives a reload. */
interface Acting extends ImpersonationRequest {
  accessToken: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
  sessionId: string;
  scope: string[];
  /** The customer's display name, once their profile was read. */
  name?: string;
}

interface Address {
  line1: string;
  city: string;
  postcode: string;
  country: string;
}

interface Customer {
  id: string;
  name: string;
}

/** A request waiting for the customer's answer: kept in sessionStorage, so that the wait survives a reload. */
interface Waiting {
  requestId: string;
  request: ImpersonationRequest;
  edit: boolean;
  customer: Customer;
  /** RFC 3339: when the request expires unanswered. */
  expiresAt: string;
}

interface SubjectToken {
  subjectToken: string;
  expiresIn: number;
}

/** A subject token, and the request it was issued for: the one the customer approved, which may be an earlier ask. */
interface Issued extends SubjectToken {
  request: ImpersonationRequest;
  edit: boolean;
}

/** What the backend says a request waiting for the customer asked. */
interface Asked extends ImpersonationRequest {
  access: 'read' | 'edit';
}

interface CustomerRecord {
  profile: { name: string; email: string; plan: string; memberSince: string; shippingAddress: Address };
  orders: Array<{ id: string; placedOn: string; items: string; total: string; status: string }>;
  invoices: Array<{ id: string; issuedOn: string; amount: string; status: string }>;
}

/** A failure told in words; `code` is the technical line (HTTP status, OAuth error) shown smaller below. */
class FlowError extends Error {
  constructor(
    message: string,
    readonly code = '',
    readonly oauthError?: string,
  ) {
    super(message);
  }
}

/** The engineer stopped waiting for the customer's answer. */
class StoppedWaiting extends Error {}

/** What the script keeps from one event to the next; made by `init()`. */
interface ConsoleState {
  readonly config: ConsoleConfig;
  /** The banner's countdown, while one runs. */
  tick: number | undefined;
  /** Ends the wait for a customer's answer, while one runs. */
  waiting: AbortController | undefined;
  /** Ends listening for the stop of the impersonation shown, while one listens. */
  listening: { sessionId: string; controller: AbortController } | undefined;
}

/** The protocol panel's content, kept in sessionStorage so that it survives a reload. */
interface Details {
  steps: Array<{ title: string; detail: string; className: string }>;
  claims?: Record<string, unknown>;
  api?: { message?: string };
}

/** The page's element with this id; the page writes its ids from the same map (console-elements.ts). */
function element<K extends ConsoleElementId>(id: K): ConsoleElements[K] {
  const found = document.getElementById(id);
  if (!found) throw new Error(`#${id} is missing from the page`);
  return found as ConsoleElements[K];
}

function showError(error: FlowError, action?: { label: string; run(): void }): void {
  element('error-message').textContent = error.message;
  element('error-code').textContent = error.code;
  element('error-code').hidden = !error.code;
  const button = element('error-action');
  button.hidden = !action;
  button.onclick = action ? () => action.run() : null;
  if (action) button.textContent = action.label;
  element('error').hidden = false;
}

function clearMessages(): void {
  element('error').hidden = true;
  element('notice').hidden = true;
}

function showNotice(text: string): void {
  const notice = element('notice');
  notice.textContent = text;
  notice.hidden = false;
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
  if (!part)
    throw new FlowError(
      'the identity service answered with a token this console cannot read',
      'the access token is not a JWT',
    );
  const text = atob(part.replace(/-/g, '+').replace(/_/g, '/'));
  const bytes = Uint8Array.from(text, (char) => char.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
}

/** fetch, with a network failure (or a CORS refusal) turned into words that name the call. */
async function send(what: string, url: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    throw new FlowError(
      `${what}: the service could not be reached; try again in a moment`,
      `${url}: ${(error as Error).message}`,
    );
  }
}

/** The refusal in words, its HTTP status and OAuth error on the line below. */
async function failure(
  what: string,
  response: Response,
  words: (error: string, description: string) => string | undefined = () => undefined,
): Promise<FlowError> {
  let error = '';
  let description = '';
  try {
    const body = (await response.json()) as { error?: unknown; error_description?: unknown };
    if (typeof body.error === 'string') error = body.error;
    if (typeof body.error_description === 'string') description = body.error_description;
  } catch {
    // not JSON: the status says it all
  }
  const code = `${what}: HTTP ${response.status}${error ? ` · ${error}` : ''}${description ? ` — ${description}` : ''}`;
  const message =
    words(error, description) ??
    (response.status === 401
      ? 'your sign-in has expired: sign in again'
      : response.status >= 500
        ? `${what.toLowerCase()} failed: the service is not answering as it should; try again in a moment`
        : description || `${what.toLowerCase()} failed`);
  return new FlowError(message, code, error);
}

function load<T>(key: string): T | undefined {
  const raw = sessionStorage.getItem(key);
  return raw ? (JSON.parse(raw) as T) : undefined;
}

function loadSession(): Session | undefined {
  const session = load<Session>(SESSION_KEY);
  if (session && session.expiresAt <= Date.now()) {
    sessionStorage.removeItem(SESSION_KEY);
    return undefined;
  }
  return session;
}

function loadActing(): Acting | undefined {
  return load<Acting>(ACTING_KEY);
}

function loadWaiting(): Waiting | undefined {
  return load<Waiting>(WAITING_KEY);
}

function firstName(customer: Customer): string {
  return customer.name.split(' ')[0] ?? customer.name;
}

function customerName(acting: Acting): string {
  return acting.name ? `${acting.name} (${acting.userId})` : acting.userId;
}

/** `fresh`: the identity service asks for the password again, whatever session it has (step-up). */
async function signIn(state: ConsoleState, fresh = false): Promise<void> {
  const oauthState = randomString(16);
  const verifier = randomString(32);
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify({ state: oauthState, verifier }));
  const target = new URL(state.config.authorizationEndpoint);
  target.search = new URLSearchParams({
    client_id: state.config.clientId,
    response_type: 'code',
    scope: 'openid profile',
    redirect_uri: state.config.redirectUri,
    state: oauthState,
    code_challenge: await challengeOf(verifier),
    code_challenge_method: 'S256',
    ...(fresh ? { prompt: 'login', max_age: '0' } : {}),
  }).toString();
  location.assign(target.href);
}

async function completeSignIn(state: ConsoleState, params: URLSearchParams): Promise<void> {
  const pending = load<{ state: string; verifier: string }>(LOGIN_KEY);
  sessionStorage.removeItem(LOGIN_KEY);
  history.replaceState(null, '', '/');
  if (params.get('error')) {
    throw new FlowError(
      'the sign-in did not complete: sign in again',
      `sign-in: ${params.get('error')}${params.get('error_description') ? ` — ${params.get('error_description')}` : ''}`,
    );
  }
  const code = params.get('code');
  if (!pending || !code || params.get('state') !== pending.state) {
    throw new FlowError('this sign-in was not started here: sign in again', 'sign-in: state mismatch');
  }
  const response = await send('Sign-in', state.config.tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: state.config.clientId,
      code,
      redirect_uri: state.config.redirectUri,
      code_verifier: pending.verifier,
    }),
  });
  if (!response.ok) throw await failure('Sign-in', response);
  const tokens = (await response.json()) as { access_token: string; expires_in: number };
  const info = await send('Reading your profile', state.config.userinfoEndpoint, {
    headers: { authorization: `Bearer ${tokens.access_token}` },
  });
  if (!info.ok) throw await failure('Reading your profile', info);
  const claims = (await info.json()) as { sub: string; name?: string; roles?: string[] };
  const previous = loadSession();
  // Another person signing in on this browser does not inherit an impersonation, nor a wait for one.
  if (previous && previous.sub !== claims.sub) {
    sessionStorage.removeItem(ACTING_KEY);
    sessionStorage.removeItem(WAITING_KEY);
    sessionStorage.removeItem(DETAILS_KEY);
  }
  const session: Session = {
    accessToken: tokens.access_token,
    expiresAt: Date.now() + tokens.expires_in * 1000,
    sub: claims.sub,
    ...(claims.name ? { name: claims.name } : {}),
    roles: claims.roles ?? [],
  };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(session));
}

function render(state: ConsoleState): void {
  const session = loadSession();
  const acting = session ? loadActing() : undefined;
  const support = Boolean(session?.roles.includes('support'));
  const who = element('signed-in-user');
  who.hidden = !session;
  who.textContent = !session
    ? ''
    : acting
      ? `${session.sub}, acting as ${customerName(acting)}`
      : `Signed in as ${session.sub}${session.name ? ` (${session.name})` : ''}${session.roles.length ? ` · ${session.roles.join(', ')}` : ''}`;
  element('sign-out').hidden = !session;
  element('sign-in-card').hidden = Boolean(session);
  element('not-support-card').hidden = !session || support;
  const waiting = session ? loadWaiting() : undefined;
  element('impersonate-card').hidden = !support || Boolean(acting) || Boolean(waiting);
  element('waiting-card').hidden = !waiting;
  if (waiting) {
    element('waiting-message').textContent = `Waiting for ${firstName(waiting.customer)}'s approval…`;
    element('waiting-detail').textContent =
      `You asked to ${waiting.edit ? 'change' : 'see'} the account of ${waiting.customer.name} (${waiting.customer.id}), ` +
      `ticket ${waiting.request.ticketId}. ${firstName(waiting.customer)} answers on their account page; this console ` +
      `goes on by itself once they approve. The request expires at ${new Date(waiting.expiresAt).toLocaleTimeString()}.`;
  }
  element('acting-banner').hidden = !acting;
  element('customer-card').hidden = !acting;
  if (acting) {
    element('banner-customer').textContent = customerName(acting);
    element('banner-ticket').textContent = `${acting.ticketId}: ${acting.reason}`;
    const edit = acting.scope.includes(WRITE_SCOPE);
    element('customer-access').textContent = edit
      ? "You may change this customer's shipping address; every change is recorded with your name."
      : 'Read only: changes need a fresh sign-in.';
  }
  renderTime(state);
}

/** The banner's time left; at expiry the impersonation ends, with a message. */
function renderTime(state: ConsoleState): void {
  if (state.tick !== undefined) window.clearInterval(state.tick);
  state.tick = undefined;
  const acting = loadActing();
  if (!acting || !loadSession()) return;
  const show = () => {
    const left = Math.round((acting.expiresAt - Date.now()) / 1000);
    if (left <= 0) {
      end(state);
      showError(
        new FlowError(
          `your impersonation of ${customerName(acting)} ended: its time ran out. Impersonate again to continue.`,
          'the access token expired (no refresh token is issued for impersonation)',
        ),
      );
      return;
    }
    element('banner-time').textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')} left`;
  };
  show();
  state.tick = window.setInterval(show, 1000);
}

/** Forgets the impersonation here (its token and the customer's data included). */
function end(state: ConsoleState): void {
  state.listening?.controller.abort();
  sessionStorage.removeItem(ACTING_KEY);
  element('address-form').hidden = true;
  fillTable('orders', []);
  fillTable('invoices', []);
  for (const id of [
    'customer-title',
    'profile-name',
    'profile-email',
    'profile-plan',
    'profile-since',
    'profile-address',
  ] as const)
    element(id).textContent = '';
  render(state);
}

function resetDetails(): void {
  sessionStorage.removeItem(DETAILS_KEY);
  element('steps').replaceChildren();
  for (const id of ['progress-card', 'token-card', 'api-card'] as const) element(id).hidden = true;
  element('details-empty').hidden = false;
}

function step(text: string): { done(detail: string): void; fail(): void } {
  element('progress-card').hidden = false;
  element('details-empty').hidden = true;
  const item = document.createElement('li');
  item.className = 'pending';
  const title = document.createElement('span');
  title.textContent = text;
  const detail = document.createElement('div');
  detail.className = 'muted';
  item.append(title, detail);
  element('steps').append(item);
  keepDetails({});
  return {
    done(message) {
      item.className = 'done';
      detail.textContent = message;
      keepDetails({});
    },
    fail() {
      item.className = 'failed';
      keepDetails({});
    },
  };
}

function keepDetails(shown: Omit<Details, 'steps'>): void {
  const steps = [...element('steps').children].map((item) => ({
    title: item.firstElementChild?.textContent ?? '',
    detail: item.lastElementChild?.textContent ?? '',
    className: item.className,
  }));
  sessionStorage.setItem(DETAILS_KEY, JSON.stringify({ ...load<Details>(DETAILS_KEY), ...shown, steps }));
}

function restoreDetails(): void {
  const details = load<Details>(DETAILS_KEY);
  for (const kept of details?.steps ?? []) {
    const shown = step(kept.title);
    if (kept.className === 'done') shown.done(kept.detail);
    else if (kept.className === 'failed') shown.fail();
  }
  if (details?.claims) showClaims(details.claims);
  if (details?.api) showApi(details.api);
}

function showApi(body: { message?: string }): void {
  element('api-message').textContent = body.message ?? '';
  element('api-answer').textContent = JSON.stringify(body, null, 2);
  element('api-card').hidden = false;
  keepDetails({ api: body });
}

function showClaims(claims: Record<string, unknown>): void {
  const text = (value: unknown) =>
    value === undefined ? '(absent)' : typeof value === 'string' ? value : JSON.stringify(value);
  element('claim-sub').textContent = text(claims['sub']);
  element('claim-act').textContent = text(claims['act']);
  element('claim-aud').textContent = text(claims['aud']);
  element('claim-scope').textContent = text(claims['scope']);
  element('claim-context').textContent = JSON.stringify(claims['impersonation_context'] ?? null, null, 2);
  element('claims-raw').textContent = JSON.stringify(claims, null, 2);
  const exp = typeof claims['exp'] === 'number' ? claims['exp'] : 0;
  element('claim-exp').textContent =
    `${new Date(exp * 1000).toLocaleTimeString()} (${Math.round(exp - Date.now() / 1000)} s from issuance; no refresh token)`;
  element('token-card').hidden = false;
  keepDetails({ claims });
}

/** A pause that ends early, rejecting, when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new StoppedWaiting());
      return;
    }
    const timer = window.setTimeout(() => {
      signal.removeEventListener('abort', stopped);
      resolve();
    }, ms);
    const stopped = () => {
      window.clearTimeout(timer);
      reject(new StoppedWaiting());
    };
    signal.addEventListener('abort', stopped, { once: true });
  });
}

/**
 * Step 1: the backend asks the Management API for a subject token. When the
 * customer must approve, it answers 202 with the request waiting for them,
 * and the console waits for their answer.
 */
async function requestSubjectToken(
  state: ConsoleState,
  session: Session,
  request: ImpersonationRequest,
  edit: boolean,
): Promise<Issued> {
  const requested = await send('Requesting impersonation', '/api/request-impersonation', {
    method: 'POST',
    headers: { authorization: `Bearer ${session.accessToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...request, access: edit ? 'edit' : 'read' }),
  });
  if (requested.status === 401) sessionStorage.removeItem(SESSION_KEY);
  if (!requested.ok) {
    throw await failure('Requesting impersonation', requested, (error, description) =>
      error === 'user_not_found'
        ? `there is no customer ${request.userId}`
        : error === 'access_denied'
          ? description
          : undefined,
    );
  }
  if (requested.status === 202) {
    const { approvalRequest } = (await requested.json()) as {
      approvalRequest: { id: string; expiresAt: string; customer: Customer; asked: Asked };
    };
    // The request that waits is the one the customer, the trail and the console speak of: an
    // earlier ask of the engineer's still waiting is answered instead of this one.
    const { access, ...asked } = approvalRequest.asked;
    const waiting: Waiting = {
      requestId: approvalRequest.id,
      request: asked,
      edit: access === 'edit',
      customer: approvalRequest.customer,
      expiresAt: approvalRequest.expiresAt,
    };
    sessionStorage.setItem(WAITING_KEY, JSON.stringify(waiting));
    if (asked.ticketId !== request.ticketId) {
      showNotice(
        `${firstName(waiting.customer)} has not answered your earlier request yet (ticket ${asked.ticketId}): ` +
          `this console waits for that one. Ask again for ticket ${request.ticketId} once they answer.`,
      );
    }
    return awaitApproval(state, session, waiting);
  }
  return { ...((await requested.json()) as SubjectToken), request, edit };
}

/**
 * Asks the backend whether the customer answered, less and less often, until
 * they approve (the subject token their approval allows), deny or let the
 * request expire (a FlowError saying so), or the engineer stops waiting.
 */
async function awaitApproval(state: ConsoleState, session: Session, waiting: Waiting): Promise<Issued> {
  state.waiting?.abort();
  const controller = new AbortController();
  state.waiting = controller;
  render(state);
  const current = step(`1b. Wait for ${waiting.customer.id}'s approval (request ${waiting.requestId})`);
  let delay = FIRST_POLL_MS;
  let failures = 0;
  let wait = waiting;
  try {
    for (;;) {
      await pause(delay, controller.signal);
      delay = Math.min(delay * 1.5, MAX_POLL_MS);
      let answer: Response;
      try {
        answer = await send(
          'Waiting for approval',
          `/api/impersonation-approval?${new URLSearchParams({ requestId: wait.requestId })}`,
          { headers: { authorization: `Bearer ${session.accessToken}` } },
        );
      } catch (error) {
        failures += 1;
        if (failures >= MAX_POLL_FAILURES) throw error;
        continue;
      }
      if (controller.signal.aborted) throw new StoppedWaiting();
      if (answer.status >= 500 && failures + 1 < MAX_POLL_FAILURES) {
        failures += 1;
        continue;
      }
      if (!answer.ok) {
        if (answer.status === 401) sessionStorage.removeItem(SESSION_KEY);
        throw await failure('Waiting for approval', answer);
      }
      failures = 0;
      if (answer.status === 202) {
        // The access approved ended before it was used: a new request waits for the customer.
        const { approvalRequest } = (await answer.json()) as { approvalRequest: { id: string; expiresAt: string } };
        wait = { ...wait, requestId: approvalRequest.id, expiresAt: approvalRequest.expiresAt };
        sessionStorage.setItem(WAITING_KEY, JSON.stringify(wait));
        render(state);
        continue;
      }
      const body = (await answer.json()) as { status: string; reason?: string } & Partial<SubjectToken>;
      const who = `${wait.customer.name} (${wait.customer.id})`;
      if (body.status === 'approved' && typeof body.subjectToken === 'string') {
        current.done(`${firstName(wait.customer)} approved.`);
        return {
          subjectToken: body.subjectToken,
          expiresIn: body.expiresIn ?? 0,
          request: wait.request,
          edit: wait.edit,
        };
      }
      if (body.status === 'denied') {
        throw new FlowError(
          `${who} denied your request${body.reason ? `: ${body.reason}` : ''}`,
          `approval request ${wait.requestId}: denied`,
        );
      }
      if (body.status === 'expired') {
        throw new FlowError(
          `${who} did not answer in time: ask again`,
          `approval request ${wait.requestId}: expired unanswered`,
        );
      }
    }
  } catch (error) {
    current.fail();
    throw error;
  } finally {
    if (state.waiting === controller) state.waiting = undefined;
    if (!controller.signal.aborted) sessionStorage.removeItem(WAITING_KEY);
  }
}

/**
 * The three steps of the spec: the backend asks for a subject token (and,
 * when the customer must approve, waits for their answer), the console
 * exchanges it with the engineer's token, the resource API accepts the
 * result. `edit` asks for an impersonation that may change data.
 */
async function startImpersonation(
  state: ConsoleState,
  session: Session,
  request: ImpersonationRequest,
  edit: boolean,
  waiting?: Waiting,
): Promise<Acting> {
  resetDetails();
  let current: ReturnType<typeof step> | undefined;
  try {
    current = step(`1. Request impersonation of ${request.userId} (backend, POST /api/request-impersonation)`);
    const first = current;
    const issued = waiting
      ? await awaitApproval(state, session, waiting)
      : await requestSubjectToken(state, session, request, edit);
    first.done(`Subject token received (single use, expires in ${issued.expiresIn} s).`);

    current = step(`2. Exchange it for an access token for ${state.config.resource} (token endpoint)`);
    const exchanged = await send('Token exchange', state.config.tokenEndpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        client_id: state.config.clientId,
        scope: issued.edit ? state.config.editScope : state.config.scope,
        subject_token: issued.subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        resource: state.config.resource,
        actor_token: session.accessToken,
        actor_token_type: ACCESS_TOKEN_TYPE,
      }),
    });
    if (!exchanged.ok) {
      throw await failure('Token exchange', exchanged, (error) =>
        error === 'insufficient_user_authentication'
          ? issued.edit
            ? 'your sign-in is too old for changes: sign in again'
            : 'your sign-in is too old to act as a customer: sign in again'
          : undefined,
      );
    }
    const tokens = (await exchanged.json()) as {
      access_token: string;
      expires_in: number;
      scope?: string;
      refresh_token?: string;
      issued_token_type: string;
    };
    current.done(
      `${tokens.issued_token_type}, expires in ${tokens.expires_in} s, scope "${tokens.scope ?? ''}", ` +
        `${tokens.refresh_token ? 'with' : 'no'} refresh token.`,
    );
    const claims = decodeJwt(tokens.access_token);
    showClaims(claims);

    current = step('3. Call the demo resource API with the impersonation token (GET /api/me)');
    const answer = await send('Calling the resource API', '/api/me', {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    if (!answer.ok) throw await failure('Calling the resource API', answer);
    const body = (await answer.json()) as { message?: string };
    current.done('The resource API accepted the token.');
    showApi(body);
    // Named by the request the token was issued for, as the customer, the trail and the notifications name it.
    return {
      ...issued.request,
      accessToken: tokens.access_token,
      expiresAt: Date.now() + tokens.expires_in * 1000,
      sessionId: String(claims['impersonation_session'] ?? ''),
      scope: (tokens.scope ?? '').split(' ').filter(Boolean),
    };
  } catch (error) {
    current?.fail();
    throw error;
  }
}

/** The customer's data as their app shows it; a refused token ends the impersonation, saying why. */
async function showCustomer(state: ConsoleState, acting: Acting): Promise<void> {
  const answer = await send("Reading the customer's account", '/api/customer', {
    headers: { authorization: `Bearer ${acting.accessToken}` },
  });
  if (answer.status === 401) {
    await lost(state, acting);
    return;
  }
  if (!answer.ok) throw await failure("Reading the customer's account", answer);
  const record = (await answer.json()) as CustomerRecord;
  const current = loadActing();
  if (current?.sessionId === acting.sessionId && current.name !== record.profile.name) {
    sessionStorage.setItem(ACTING_KEY, JSON.stringify({ ...current, name: record.profile.name }));
  }
  const { profile } = record;
  element('customer-title').textContent = `${profile.name}'s account, as ${profile.name.split(' ')[0]} sees it`;
  element('profile-name').textContent = profile.name;
  element('profile-email').textContent = profile.email;
  element('profile-plan').textContent = profile.plan;
  element('profile-since').textContent = profile.memberSince;
  showAddress(profile.shippingAddress);
  fillTable(
    'orders',
    record.orders.map((order) => [order.id, order.placedOn, order.items, order.total, order.status]),
  );
  fillTable(
    'invoices',
    record.invoices.map((invoice) => [invoice.id, invoice.issuedOn, invoice.amount, invoice.status]),
  );
  render(state);
  void listenForStop(state, acting);
}

/** The backend's server-sent event that the impersonation stopped, wherever it was stopped: it ends here too. */
async function listenForStop(state: ConsoleState, acting: Acting): Promise<void> {
  const session = loadSession();
  if (!session || !acting.sessionId || state.listening?.sessionId === acting.sessionId) return;
  state.listening?.controller.abort();
  const listening = { sessionId: acting.sessionId, controller: new AbortController() };
  state.listening = listening;
  try {
    const answer = await fetch(`/api/impersonation-events?${new URLSearchParams({ sessionId: acting.sessionId })}`, {
      headers: { authorization: `Bearer ${session.accessToken}` },
      signal: listening.controller.signal,
    });
    const events = answer.ok ? await answer.text() : '';
    if (events.includes('event: stopped') && loadActing()?.sessionId === acting.sessionId)
      await lost(state, acting, 'GET /api/impersonation-events: stopped');
  } catch {
    // Stopped listening, or the backend went away: the next call of the resource API tells.
  } finally {
    if (state.listening === listening) state.listening = undefined;
  }
}

function showAddress(address: Address): void {
  element('profile-address').textContent = `${address.line1}, ${address.postcode} ${address.city}, ${address.country}`;
  element('address-line1').value = address.line1;
  element('address-city').value = address.city;
  element('address-postcode').value = address.postcode;
  element('address-country').value = address.country;
}

function fillTable(id: 'orders' | 'invoices', rows: string[][]): void {
  const body = element(id).querySelector('tbody')!;
  body.replaceChildren(
    ...rows.map((cells) => {
      const row = document.createElement('tr');
      row.append(...cells.map((text) => Object.assign(document.createElement('td'), { textContent: text })));
      return row;
    }),
  );
}

/** The impersonation was stopped elsewhere, or ran out; `cause` is how this console learnt it. */
async function lost(
  state: ConsoleState,
  acting: Acting,
  cause = 'resource API: HTTP 401 · invalid_token',
): Promise<void> {
  const session = loadSession();
  end(state);
  let status: { state?: string; stoppedBy?: string; reason?: string; endReason?: string; customer?: string } = {};
  if (session && acting.sessionId) {
    const answer = await send(
      'Reading the impersonation',
      `/api/impersonation-status?${new URLSearchParams({ sessionId: acting.sessionId })}`,
      {
        headers: { authorization: `Bearer ${session.accessToken}` },
      },
    );
    if (answer.ok) status = (await answer.json()) as typeof status;
  }
  showError(
    status.state === 'revoked'
      ? new FlowError(
          `this impersonation was stopped by ${status.stoppedBy ?? 'someone else'}${status.reason ? ` (${status.reason})` : ''}`,
          `${cause} — this impersonation was stopped`,
        )
      : status.state === 'ended' && status.endReason === 'access_grant_ended'
        ? new FlowError(
            `${status.customer ?? customerName(acting)} ended the access they gave: this impersonation stopped`,
            `${cause} — the customer ended their access grant`,
          )
        : new FlowError(
            `your impersonation of ${customerName(acting)} ended: its time ran out. Impersonate again to continue.`,
            cause,
          ),
  );
}

async function stop(state: ConsoleState): Promise<void> {
  const session = loadSession();
  const acting = loadActing();
  if (!session || !acting) return;
  clearMessages();
  // This stop is told here, not heard from the backend.
  state.listening?.controller.abort();
  const button = element('stop');
  button.disabled = true;
  try {
    const answer = await send('Stopping the impersonation', '/api/stop-impersonation', {
      method: 'POST',
      headers: { authorization: `Bearer ${session.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId: acting.sessionId }),
    });
    if (!answer.ok) throw await failure('Stopping the impersonation', answer);
    end(state);
    showNotice(`You stopped acting as ${customerName(acting)}. The token you held no longer opens their account.`);
  } finally {
    button.disabled = false;
  }
}

async function impersonate(state: ConsoleState, event: SubmitEvent): Promise<void> {
  event.preventDefault();
  clearMessages();
  const session = loadSession();
  if (!session) {
    render(state);
    showError(new FlowError('your sign-in has expired: sign in again'));
    return;
  }
  const request = {
    userId: element('user').value.trim(),
    reason: element('reason').value.trim(),
    ticketId: element('ticket').value.trim(),
  };
  const button = element('impersonate');
  button.disabled = true;
  try {
    await act(state, session, request, false);
  } finally {
    button.disabled = false;
  }
}

/** Starts an impersonation and shows the customer; a stale sign-in offers a fresh one, after which it resumes. */
async function act(
  state: ConsoleState,
  session: Session,
  request: ImpersonationRequest,
  edit: boolean,
  waiting?: Waiting,
): Promise<void> {
  try {
    const previous = loadActing();
    const acting = await startImpersonation(state, session, request, edit, waiting);
    // What was said while it started (an earlier request waits) no longer holds.
    clearMessages();
    sessionStorage.setItem(ACTING_KEY, JSON.stringify(acting));
    if (previous && previous.sessionId !== acting.sessionId) {
      // The read-only impersonation it replaces is stopped, not left to run out.
      await send('Stopping the previous impersonation', '/api/stop-impersonation', {
        method: 'POST',
        headers: { authorization: `Bearer ${session.accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ sessionId: previous.sessionId }),
      }).catch(() => {});
    }
    await showCustomer(state, acting);
    if (edit && acting.scope.includes(WRITE_SCOPE)) openAddressForm();
    else if (edit) showNotice(`${customerName(acting)} allowed reading only: nothing of theirs can be changed now.`);
  } catch (error) {
    if (error instanceof StoppedWaiting) {
      render(state);
      return;
    }
    const flow =
      error instanceof FlowError ? error : new FlowError(`something went wrong: ${(error as Error).message}`);
    if (flow.oauthError === 'insufficient_user_authentication') {
      sessionStorage.setItem(RESUME_KEY, JSON.stringify({ request, edit }));
      showError(flow, {
        label: 'Sign in again',
        run: () => {
          void signIn(state, true);
        },
      });
    } else {
      showError(flow);
    }
    render(state);
  }
}

function openAddressForm(): void {
  element('address-form').hidden = false;
  element('edit-address').hidden = true;
  element('address-line1').focus();
}

async function editAddress(state: ConsoleState): Promise<void> {
  clearMessages();
  const session = loadSession();
  const acting = loadActing();
  if (!session || !acting) return;
  if (acting.scope.includes(WRITE_SCOPE)) {
    openAddressForm();
    return;
  }
  await act(state, session, { userId: acting.userId, reason: acting.reason, ticketId: acting.ticketId }, true);
}

async function saveAddress(state: ConsoleState, event: SubmitEvent): Promise<void> {
  event.preventDefault();
  clearMessages();
  const acting = loadActing();
  if (!acting) return;
  const address: Address = {
    line1: element('address-line1').value,
    city: element('address-city').value,
    postcode: element('address-postcode').value,
    country: element('address-country').value,
  };
  try {
    const answer = await send('Saving the address', '/api/customer/shipping-address', {
      method: 'PUT',
      headers: { authorization: `Bearer ${acting.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(address),
    });
    if (answer.status === 401) {
      await lost(state, acting);
      return;
    }
    if (!answer.ok) throw await failure('Saving the address', answer);
    const profile = (await answer.json()) as CustomerRecord['profile'];
    showAddress(profile.shippingAddress);
    element('address-form').hidden = true;
    element('edit-address').hidden = false;
    showNotice(
      `Shipping address of ${customerName(acting)} saved. The change is recorded in their account's activity with your name.`,
    );
  } catch (error) {
    showError(error instanceof FlowError ? error : new FlowError(`something went wrong: ${(error as Error).message}`));
  }
}

async function init(): Promise<void> {
  const state: ConsoleState = {
    config: JSON.parse(element('config').textContent ?? '{}') as ConsoleConfig,
    tick: undefined,
    waiting: undefined,
    listening: undefined,
  };
  element('sign-in').addEventListener('click', () => {
    signIn(state).catch((error: Error) => showError(new FlowError('the sign-in could not start', error.message)));
  });
  element('sign-out').addEventListener('click', () => {
    // Forget the tokens here, then end the session at the identity service, which returns to this page.
    state.waiting?.abort();
    for (const key of [SESSION_KEY, ACTING_KEY, RESUME_KEY, WAITING_KEY, DETAILS_KEY]) sessionStorage.removeItem(key);
    const target = new URL(state.config.endSessionEndpoint);
    target.search = new URLSearchParams({
      client_id: state.config.clientId,
      post_logout_redirect_uri: state.config.postLogoutRedirectUri,
    }).toString();
    location.assign(target.href);
  });
  element('impersonate-form').addEventListener('submit', (event) => {
    void impersonate(state, event);
  });
  element('stop').addEventListener('click', () => {
    stop(state).catch((error: unknown) =>
      showError(
        error instanceof FlowError ? error : new FlowError('the impersonation could not be stopped', String(error)),
      ),
    );
  });
  element('stop-waiting').addEventListener('click', () => {
    const waiting = loadWaiting();
    sessionStorage.removeItem(WAITING_KEY);
    state.waiting?.abort();
    clearMessages();
    if (waiting) {
      showNotice(
        `You stopped waiting for ${waiting.customer.name} (${waiting.customer.id}). They can still answer; ask again to use their answer.`,
      );
    }
    render(state);
  });
  element('edit-address').addEventListener('click', () => {
    void editAddress(state);
  });
  element('cancel-address').addEventListener('click', () => {
    element('address-form').hidden = true;
    element('edit-address').hidden = false;
  });
  element('address-form').addEventListener('submit', (event) => {
    void saveAddress(state, event);
  });

  const params = new URLSearchParams(location.search);
  if (location.pathname === '/callback') {
    try {
      await completeSignIn(state, params);
    } catch (error) {
      showError(
        error instanceof FlowError
          ? error
          : new FlowError('the sign-in failed: sign in again', (error as Error).message),
      );
    }
  }
  render(state);
  restoreDetails();
  const session = loadSession();
  const resume = load<{ request: ImpersonationRequest; edit: boolean }>(RESUME_KEY);
  sessionStorage.removeItem(RESUME_KEY);
  const acting = loadActing();
  const waiting = loadWaiting();
  if (session && resume) {
    // Back from a fresh sign-in: what needed it is tried again.
    await act(state, session, resume.request, resume.edit);
  } else if (session && waiting) {
    // Still waiting for the customer: the page says so and goes on once they answer.
    if (acting) await showCustomer(state, acting).catch(() => {});
    document.body.dataset['ready'] = 'true';
    await act(state, session, waiting.request, waiting.edit, waiting);
    return;
  } else if (session && acting) {
    await showCustomer(state, acting).catch((error: unknown) =>
      showError(error instanceof FlowError ? error : new FlowError(String(error))),
    );
  }
  document.body.dataset['ready'] = 'true';
}

void init();
