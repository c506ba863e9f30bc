/**
 * The demo's cross-app access over HTTP: an agent signs dave in at the
 * identity service (authorization code with PKCE) for his ID token, exchanges
 * it there for an ID-JAG to the orders application's authorization server,
 * redeems it there (jwt-bearer) for a token of the orders API, and calls it.
 * Dave sees the agent on his account page and ends it.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { ORDERS_API_PATH } from '../../demo/orders-app.js';
import { scaled } from '../support/time.js';
import {
  accountSignIn,
  basic,
  CookieJar,
  csrfOf,
  managementToken,
  postAccountForm,
  request,
  REQUEST_TIMEOUT,
} from './helpers.js';

const WALKTHROUGH = fileURLToPath(new URL('../../../demo/walkthrough-agent.sh', import.meta.url));
const AGENT = { id: 'orders-agent', secret: 'orders-agent-secret' };
const ORDERS_ISSUER = 'https://auth.orders.example.com';
const ORDERS_API = 'https://api.orders.example.com';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
const ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';
const ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const REFRESH_TOKEN = 'urn:ietf:params:oauth:token-type:refresh_token';

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function post(url: string, params: Record<string, string>, client = AGENT): Promise<Reply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { authorization: basic(client.id, client.secret) },
    body: new URLSearchParams(params),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function redirectOf(response: Response, base: string): URL {
  const location = response.headers.get('location');
  if (response.status < 300 || response.status > 399 || !location) throw new Error(`no redirect: ${response.status}`);
  return new URL(location, base);
}

interface AgentSignIn {
  idToken: string;
  /** Only with `offline_access` in the scope. */
  refreshToken: string | undefined;
  callbackPage: string;
  /** The browser's cookies at the identity service: a second sign-in with it finds the first one's session. */
  jar: CookieJar;
}

/** What the agent does to hold a customer's sign-in: authorization code with PKCE, as any web client. */
async function agentSignIn(
  demo: Demo,
  login: string,
  { scope = 'openid', prompt, jar = new CookieJar() }: { scope?: string; prompt?: string; jar?: CookieJar } = {},
): Promise<AgentSignIn> {
  const verifier = randomBytes(32).toString('base64url');
  const redirectUri = `${demo.backend.url}/agent/callback`;
  const authorize = new URL(`${demo.identity.issuer}/auth`);
  authorize.search = new URLSearchParams({
    client_id: AGENT.id,
    response_type: 'code',
    scope,
    redirect_uri: redirectUri,
    state: 'agent-state',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    ...(prompt ? { prompt } : {}),
  }).toString();
  // Redirects are followed to the agent's redirect URI; the login form, when the browser is not signed in yet, is posted.
  let next = redirectOf(await request(jar, authorize.href), authorize.href);
  for (let hops = 0; next.origin + next.pathname !== redirectUri; hops += 1) {
    if (hops > 10) throw new Error('the sign-in never reached the redirect URI');
    const response = await request(jar, next.href);
    if (response.status === 200 && next.pathname.startsWith('/interaction/')) {
      await response.body?.cancel();
      const signedIn = await request(jar, `${next.href}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ login, password: `${login}-password` }),
      });
      next = redirectOf(signedIn, next.href);
    } else {
      next = redirectOf(response, next.href);
    }
  }
  const callback = next;
  const code = callback.searchParams.get('code');
  expect(code, callback.href).to.be.a('string');
  const page = await (await request(jar, callback.href)).text();
  const tokens = await post(`${demo.identity.issuer}/token`, {
    grant_type: 'authorization_code',
    code: code!,
    redirect_uri: redirectUri,
    code_verifier: verifier,
  });
  expect(tokens.status, JSON.stringify(tokens.body)).to.equal(200);
  return {
    idToken: tokens.body['id_token'] as string,
    refreshToken: tokens.body['refresh_token'] as string | undefined,
    callbackPage: page,
    jar,
  };
}

function askIdJag(demo: Demo, idToken: string, extra: Record<string, string> = {}): Promise<Reply> {
  return post(`${demo.identity.issuer}/token`, {
    grant_type: TOKEN_EXCHANGE,
    requested_token_type: ID_JAG,
    subject_token: idToken,
    subject_token_type: ID_TOKEN,
    audience: ORDERS_ISSUER,
    resource: ORDERS_API,
    scope: 'orders:read',
    ...extra,
  });
}

/** An ID-JAG from the agent's refresh token: without scope, since its scope may not exceed the refresh token's. */
function askIdJagFromRefreshToken(demo: Demo, refreshToken: string): Promise<Reply> {
  return post(`${demo.identity.issuer}/token`, {
    grant_type: TOKEN_EXCHANGE,
    requested_token_type: ID_JAG,
    subject_token: refreshToken,
    subject_token_type: REFRESH_TOKEN,
    audience: ORDERS_ISSUER,
    resource: ORDERS_API,
    scope: 'orders:read',
  });
}

async function callOrders(demo: Demo, token: string): Promise<Reply> {
  const response = await fetch(`${demo.orders.url}${ORDERS_API_PATH}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The orders API's answer to `token`, asked again until it refuses it or two seconds have passed since `stopped`. */
async function ordersAnswerAfterStop(demo: Demo, token: string, stopped: number): Promise<Reply> {
  let answer = await callOrders(demo, token);
  while (answer.status === 200 && Date.now() - stopped < scaled(2000)) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    answer = await callOrders(demo, token);
  }
  return answer;
}

describe('demo: an agent acts for dave at the orders application (ID-JAG)', function () {
  this.timeout(30_000);
  let demo: Demo;
  let dave: AgentSignIn;
  const lines: string[] = [];

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: (line) => lines.push(line) });
    dave = await agentSignIn(demo, 'dave');
  });
  after(() => demo?.close());

  it("the orders application's authorization server: its own issuer, the jwt-bearer grant and the ID-JAG profile", async () => {
    const metadata = (await (
      await fetch(`${demo.orders.url}/.well-known/openid-configuration`, {
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      })
    ).json()) as Record<string, unknown>;
    expect(metadata['issuer']).to.equal(ORDERS_ISSUER);
    expect(metadata['token_endpoint']).to.equal(`${demo.orders.url}/token`);
    expect(metadata['grant_types_supported']).to.include(JWT_BEARER);
    expect(metadata['authorization_grant_profiles_supported']).to.deep.equal([
      'urn:ietf:params:oauth:grant-profile:id-jag',
    ]);
    expect(dave.callbackPage).to.match(/<pre id="code">[^<]+<\/pre>/);
  });

  it('ID token → ID-JAG at the identity service → orders token at the orders application → the orders API answers', async () => {
    expect(decodeJwt(dave.idToken)).to.include({ sub: 'dave', aud: AGENT.id, iss: demo.identity.issuer });
    const issued = await askIdJag(demo, dave.idToken);
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    expect(issued.body).to.include({ issued_token_type: ID_JAG, token_type: 'N_A', scope: 'orders:read' });
    const idJag = issued.body['access_token'] as string;
    expect(decodeProtectedHeader(idJag).typ).to.equal('oauth-id-jag+jwt');
    const assertion = decodeJwt(idJag);
    expect(assertion).to.include({ iss: demo.identity.issuer, sub: 'dave', aud: ORDERS_ISSUER, client_id: AGENT.id });

    const redeemed = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: idJag });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    expect(redeemed.body).to.include({ token_type: 'Bearer', scope: 'orders:read' });
    const token = redeemed.body['access_token'] as string;
    const claims = decodeJwt(token);
    expect(claims).to.include({ iss: ORDERS_ISSUER, sub: 'dave', aud: ORDERS_API, client_id: AGENT.id });
    // The documented bound: the token never outlives the ID-JAG it came from.
    expect(claims.exp).to.be.at.most(assertion.exp!);

    const orders = await callOrders(demo, token);
    expect(orders.status, JSON.stringify(orders.body)).to.equal(200);
    expect(orders.body).to.include({ customer: 'dave', client: AGENT.id });
    expect((orders.body['orders'] as Array<{ id: string }>).map((order) => order.id)).to.deep.equal(['ORD-1120']);

    // Single use: the same ID-JAG is redeemed once.
    const again = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: idJag });
    expect(again.status).to.equal(400);
    expect(again.body['error']).to.equal('invalid_grant');
  });

  it('the least an agent sends works too: no resource, no scope in the exchange or the redemption', async () => {
    const issued = await post(`${demo.identity.issuer}/token`, {
      grant_type: TOKEN_EXCHANGE,
      requested_token_type: ID_JAG,
      subject_token: dave.idToken,
      subject_token_type: ID_TOKEN,
      audience: ORDERS_ISSUER,
    });
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    const redeemed = await post(`${demo.orders.url}/token`, {
      grant_type: JWT_BEARER,
      assertion: issued.body['access_token'] as string,
    });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    expect(decodeJwt(redeemed.body['access_token'] as string)).to.include({ aud: ORDERS_API, sub: 'dave' });
    const orders = await callOrders(demo, redeemed.body['access_token'] as string);
    expect(orders.status, JSON.stringify(orders.body)).to.equal(200);
    expect(orders.body).to.include({ customer: 'dave' });
  });

  it('the orders API refuses a token of the identity service, and no token at all', async () => {
    const identityToken = (
      await post(
        `${demo.identity.issuer}/token`,
        {
          grant_type: 'client_credentials',
          resource: demo.identity.managementResource,
          scope: 'impersonations:read',
        },
        { id: 'impersonation-backend', secret: 'impersonation-backend-secret' },
      )
    ).body['access_token'] as string;
    expect((await callOrders(demo, identityToken)).status).to.equal(401);
    const none = await fetch(`${demo.orders.url}${ORDERS_API_PATH}`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT) });
    expect(none.status).to.equal(401);
    expect(((await none.json()) as Record<string, unknown>)['error']).to.equal('invalid_token');
  });

  it("the identity service's policy: agents act for customers only, at the orders application only, reading only", async () => {
    const alice = await agentSignIn(demo, 'alice');
    const refused = await askIdJag(demo, alice.idToken);
    expect(refused.status).to.equal(400);
    expect(refused.body['error_description']).to.match(/alice is no customer/);
    const elsewhere = await askIdJag(demo, dave.idToken, { audience: 'https://chat.example.com' });
    expect(elsewhere.status).to.equal(400);
    expect(elsewhere.body['error']).to.equal('invalid_target');
    const writing = await askIdJag(demo, dave.idToken, { scope: 'orders:write' });
    expect(writing.status).to.equal(400);
    expect(writing.body['error_description']).to.match(/orders:read only/);
    const narrowed = await askIdJag(demo, dave.idToken, { scope: 'orders:read orders:write' });
    expect(narrowed.body['scope']).to.equal('orders:read');
  });

  it('dave sees the agent on his account page and ends it; bob can neither see nor end it', async () => {
    const issued = await askIdJag(demo, dave.idToken);
    expect(issued.status).to.equal(200);
    const { jar, html } = await accountSignIn(demo.backend.url, 'dave');
    expect(html).to.match(
      /An agent of client Orders assistant \(orders-agent\) may act for you at application Orders \(https:\/\/auth\.orders\.example\.com\) until /,
    );
    const sessionId = /id="agent-(imp_[A-Za-z0-9_-]{22})"/.exec(html)![1]!;

    const bob = await accountSignIn(demo.backend.url, 'bob');
    expect(bob.html).to.include('id="agents-empty"');
    const notBobs = await postAccountForm(demo.backend.url, bob.jar, `/account/agents/${sessionId}/end`, {
      csrf: csrfOf(bob.html),
    });
    expect(notBobs.status).to.equal(303);
    expect(await (await request(bob.jar, `${demo.backend.url}/account`)).text()).to.include('Ending the agent failed');

    const admin = await managementToken(demo, 'impersonations:read');
    const state = async () =>
      (
        (await (
          await fetch(`${demo.identity.baseUrl}/api/impersonations/${sessionId}`, {
            headers: { authorization: `Bearer ${admin}` },
            signal: AbortSignal.timeout(REQUEST_TIMEOUT),
          })
        ).json()) as Record<string, unknown>
      )['state'];
    expect(await state()).to.equal('active');

    const withoutCsrf = await postAccountForm(demo.backend.url, jar, `/account/agents/${sessionId}/end`, {});
    expect(withoutCsrf.status).to.equal(403);
    const ended = await postAccountForm(demo.backend.url, jar, `/account/agents/${sessionId}/end`, {
      csrf: csrfOf(html),
    });
    expect(ended.status).to.equal(303);
    const after = await (await request(jar, `${demo.backend.url}/account`)).text();
    expect(after).to.include('The agent no longer acts for you');
    expect(after).not.to.include(`id="agent-${sessionId}"`);
    expect(await state()).to.equal('revoked');
    // The stop reaches dave's notifications by webhook, as the agent's, not as support's.
    let notified = '';
    for (const started = Date.now(); !notified.includes('id="notifications"') && Date.now() - started < 5000;) {
      notified = await (await request(jar, `${demo.backend.url}/account`)).text();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const notifications = /<ul class="items" id="notifications">(.*?)<\/ul>/s.exec(notified)?.[1] ?? '';
    expect(notifications).to.match(/Orders assistant stopped acting for you at Orders at /);
    expect(notifications).not.to.include('from support');
  });

  it("dave's stop reaches the orders application: its token is refused within two seconds, an ID-JAG not yet redeemed is refused", async () => {
    const redeemedJag = (await askIdJag(demo, dave.idToken)).body['access_token'] as string;
    const pendingJag = (await askIdJag(demo, dave.idToken)).body['access_token'] as string;
    const redeemed = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: redeemedJag });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    const token = redeemed.body['access_token'] as string;
    expect((await callOrders(demo, token)).status).to.equal(200);

    const { jar, html } = await accountSignIn(demo.backend.url, 'dave');
    // The unredeemed one first: the stream brings its stop before the other's.
    for (const idJag of [pendingJag, redeemedJag]) {
      const sessionId = decodeJwt(idJag)['impersonation_session'] as string;
      expect(html).to.include(`id="agent-${sessionId}"`);
      const ended = await postAccountForm(demo.backend.url, jar, `/account/agents/${sessionId}/end`, {
        csrf: csrfOf(html),
      });
      expect(ended.status).to.equal(303);
    }
    const stopped = Date.now();
    const refused = await ordersAnswerAfterStop(demo, token, stopped);
    expect(refused.status, `after ${Date.now() - stopped} ms`).to.equal(401);
    expect(refused.body['error']).to.equal('invalid_token');
    expect(lines).to.satisfy((all: string[]) =>
      all.some((line) =>
        /^\[orders\] orders-agent no longer acts for dave here, session imp_\S+: issuer_session_stopped$/.test(line),
      ),
    );
    const late = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: pendingJag });
    expect(late.status).to.equal(400);
    expect(late.body['error']).to.equal('invalid_grant');
  });

  it('a sign-in with offline_access gives the agent a refresh token, which it exchanges for an ID-JAG the orders application redeems', async () => {
    // OpenID Connect Core 11: offline_access is granted only when consent is asked for (oidc-provider drops it otherwise).
    expect((await agentSignIn(demo, 'dave', { scope: 'openid offline_access' })).refreshToken).to.equal(undefined);
    const held = await agentSignIn(demo, 'dave', { scope: 'openid offline_access', prompt: 'consent' });
    expect(held.refreshToken, 'a refresh token').to.be.a('string');
    // The ID-JAG's scope is the orders application's, whatever the refresh token's own (openid offline_access).
    const issued = await askIdJag(demo, held.refreshToken!, { subject_token_type: REFRESH_TOKEN });
    expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
    expect(issued.body).to.include({ issued_token_type: ID_JAG, token_type: 'N_A' });
    const idJag = issued.body['access_token'] as string;
    expect(decodeJwt(idJag)).to.include({
      iss: demo.identity.issuer,
      sub: 'dave',
      aud: ORDERS_ISSUER,
      client_id: AGENT.id,
    });
    expect(decodeJwt(idJag)).to.include({ scope: 'orders:read' });

    const redeemed = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: idJag });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    const token = redeemed.body['access_token'] as string;
    expect(decodeJwt(token)).to.include({ iss: ORDERS_ISSUER, sub: 'dave', aud: ORDERS_API, client_id: AGENT.id });
    const orders = await callOrders(demo, token);
    expect(orders.status, JSON.stringify(orders.body)).to.equal(200);
    expect(orders.body).to.include({ customer: 'dave', client: AGENT.id });

    // The refresh token is neither rotated nor spent by the exchange: it renews the agent's sign-in as ever.
    const renewed = await post(`${demo.identity.issuer}/token`, {
      grant_type: 'refresh_token',
      refresh_token: held.refreshToken!,
    });
    expect(renewed.status, JSON.stringify(renewed.body)).to.equal(200);
    expect(decodeJwt(renewed.body['id_token'] as string)).to.include({ sub: 'dave', aud: AGENT.id });
  });

  it('an agent already signed in that asks again with offline_access (prompt=consent) is granted it too', async () => {
    const first = await agentSignIn(demo, 'dave');
    expect(first.refreshToken).to.equal(undefined);
    // The identity service's session is found: no login form this time, and the consent asked for is given.
    const again = await agentSignIn(demo, 'dave', {
      scope: 'openid offline_access',
      prompt: 'consent',
      jar: first.jar,
    });
    expect(again.refreshToken, 'a refresh token').to.be.a('string');
  });

  it("dave ends all of the agent's access from his account page: the tokens of both its ID-JAGs are refused within two seconds", async () => {
    const held = await agentSignIn(demo, 'dave', { scope: 'openid offline_access', prompt: 'consent' });
    const tokens: string[] = [];
    const sessions: string[] = [];
    for (const issued of [
      await askIdJag(demo, held.idToken),
      await askIdJagFromRefreshToken(demo, held.refreshToken!),
    ]) {
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      const idJag = issued.body['access_token'] as string;
      sessions.push(decodeJwt(idJag)['impersonation_session'] as string);
      const redeemed = await post(`${demo.orders.url}/token`, { grant_type: JWT_BEARER, assertion: idJag });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      tokens.push(redeemed.body['access_token'] as string);
    }
    for (const token of tokens) expect((await callOrders(demo, token)).status).to.equal(200);

    const { jar, html } = await accountSignIn(demo.backend.url, 'dave');
    for (const sessionId of sessions) expect(html).to.include(`id="agent-${sessionId}"`);
    // Each ID-JAG is a session of its own: ending one leaves the other's token working.
    const one = await postAccountForm(demo.backend.url, jar, `/account/agents/${sessions[0]}/end`, {
      csrf: csrfOf(html),
    });
    expect(one.status).to.equal(303);
    let page = await (await request(jar, `${demo.backend.url}/account`)).text();
    expect(page).not.to.include(`id="agent-${sessions[0]}"`);
    expect(page).to.include(`id="agent-${sessions[1]}"`);
    expect((await callOrders(demo, tokens[1]!)).status).to.equal(200);

    // Bob's "end all" ends only his own agents' sessions: none, so dave's agent still acts.
    const bob = await accountSignIn(demo.backend.url, 'bob');
    const notBobs = await postAccountForm(demo.backend.url, bob.jar, `/account/agent-clients/${AGENT.id}/end`, {
      csrf: csrfOf(bob.html),
    });
    expect(notBobs.status).to.equal(303);
    expect(await (await request(bob.jar, `${demo.backend.url}/account`)).text()).to.include('Ending the agent failed');
    expect((await callOrders(demo, tokens[1]!)).status).to.equal(200);

    expect(page).to.include('id="agent-client-orders-agent"');
    expect(page).to.include('End all access of Orders assistant (orders-agent)');
    const all = await postAccountForm(demo.backend.url, jar, `/account/agent-clients/${AGENT.id}/end`, {
      csrf: csrfOf(page),
    });
    expect(all.status).to.equal(303);
    const stopped = Date.now();
    page = await (await request(jar, `${demo.backend.url}/account`)).text();
    expect(page).to.include('The agent no longer acts for you: everything it was given is stopped.');
    expect(page).to.include('id="agents-empty"');

    for (const token of tokens) {
      const refused = await ordersAnswerAfterStop(demo, token, stopped);
      expect(refused.status, `after ${Date.now() - stopped} ms`).to.equal(401);
      expect(refused.body['error']).to.equal('invalid_token');
    }

    // The agent's sign-in is not ended: its refresh token gets a new ID-JAG, a new session the page lists again.
    const anew = await askIdJagFromRefreshToken(demo, held.refreshToken!);
    expect(anew.status, JSON.stringify(anew.body)).to.equal(200);
    const anewSession = decodeJwt(anew.body['access_token'] as string)['impersonation_session'] as string;
    expect(await (await request(jar, `${demo.backend.url}/account`)).text()).to.include(`id="agent-${anewSession}"`);
  });

  it('the curl walk-through (demo/walkthrough-agent.sh) plays it all, from the same variables as npm run demo', async () => {
    const port = (url: string) => new URL(url).port;
    const { stdout } = await promisify(execFile)('bash', [WALKTHROUGH], {
      env: {
        ...process.env,
        PORT: port(demo.identity.baseUrl),
        BACKEND_PORT: port(demo.backend.url),
        ORDERS_PORT: port(demo.orders.url),
      },
      timeout: 20_000,
    });
    expect(stdout).to.match(/"issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"/);
    expect(stdout).to.match(/"aud":"https:\/\/auth\.orders\.example\.com"/);
    const redeemed = JSON.parse(
      stdout.split('\n')[stdout.split('\n').findIndex((line) => line.startsWith('# 3.')) + 1]!,
    );
    expect(redeemed).to.include({ token_type: 'Bearer', scope: 'orders:read' });
    expect(stdout).to.match(/"customer":"dave","client":"orders-agent","orders":\[\{"id":"ORD-1120"/);
    expect(stdout).to.match(
      /An agent of client Orders assistant \(orders-agent\) may act for you at application Orders/,
    );
    expect(stdout).to.match(/POST \/account\/agents\/imp_[A-Za-z0-9_-]{22}\/end: HTTP 303/);
    expect(stdout).to.match(/"type":"id-jag".*"revokedBy":"customer"/);
    // The refresh token's ID-JAG, redeemed, and the orders API with its token.
    expect(stdout.match(/"issued_token_type":"urn:ietf:params:oauth:token-type:id-jag"/g)).to.have.length(2);
    expect(stdout.match(/"customer":"dave","client":"orders-agent","orders":\[\{"id":"ORD-1120"/g)).to.have.length(2);
    expect(stdout).to.include("Each ID-JAG is a session of its own: the second one's token still reads, HTTP 200");
    expect(stdout).to.match(/POST \/account\/agent-clients\/orders-agent\/end: HTTP 303/);
    expect(stdout.match(/HTTP 401 after \d+ ms: \{"error":"invalid_token"/g)).to.have.length(2);
  });
});
