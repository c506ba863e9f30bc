import { createHash, randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import {
  accountSignIn,
  basic,
  callResourceApi,
  CookieJar,
  csrfOf,
  exchange,
  postAccountForm,
  quiet,
  request,
  REQUEST_TIMEOUT,
  requestImpersonation,
  signIn,
} from './helpers.js';
import { scaled } from '../support/time.js';

const BOB = { userId: 'bob', reason: 'Cannot see the invoices', ticketId: 'T-1234' };
const REQUEST_ID = /^apr_[A-Za-z0-9_-]{22}$/;

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

/** GET /api/impersonation-approval of the backend, as the console asks it. */
async function approvalStatus(demo: Demo, token: string | undefined, requestId: string): Promise<Reply> {
  const response = await fetch(`${demo.backend.url}/api/impersonation-approval?${new URLSearchParams({ requestId })}`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The id of the request alice's ask made (202). */
async function askBob(demo: Demo, alice: string, fields: Record<string, unknown> = {}): Promise<string> {
  const asked = await requestImpersonation(demo, alice, { ...BOB, ...fields });
  expect(asked.status, JSON.stringify(asked.body)).to.equal(202);
  const id = (asked.body['approvalRequest'] as { id: string }).id;
  expect(id).to.match(REQUEST_ID);
  return id;
}

/** Bob, signed in at his account page: its cookies and the CSRF token of its forms. */
async function bobAtHisPage(demo: Demo): Promise<{ jar: CookieJar; csrf: string; page(): Promise<string> }> {
  const { jar, html } = await accountSignIn(demo.backend.url, 'bob');
  return {
    jar,
    csrf: csrfOf(html),
    page: async () => (await request(jar, `${demo.backend.url}/account`)).text(),
  };
}

describe('demo: a customer who must approve (bob), over HTTP', function () {
  this.timeout(30_000);
  let demo: Demo;
  let alice: string;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
  });
  after(() => demo?.close());

  /** The request the first test makes, which the next answers. */
  let pendingId: string;

  /** What alice asks first: to change bob's data, for a reason that must reach his page escaped. */
  const FIRST = { ...BOB, access: 'edit', reason: '<img src=x onerror=alert(1)> invoices' };

  it('asking for bob answers 202 with the request waiting for him and what it asked, and no token; asking again, the same request', async () => {
    const asked = await requestImpersonation(demo, alice, FIRST);
    expect(asked.status).to.equal(202);
    expect(asked.headers.get('cache-control')).to.equal('no-store');
    const pending = asked.body['approvalRequest'] as Record<string, unknown>;
    expect(pending).to.have.keys('id', 'expiresAt', 'customer', 'asked');
    expect(pending['customer']).to.deep.equal({ id: 'bob', name: 'Bob Brown' });
    expect(pending['asked']).to.deep.equal(FIRST);
    expect(JSON.stringify(asked.body)).to.not.contain('subjectToken');
    pendingId = pending['id'] as string;
    expect(await askBob(demo, alice, FIRST)).to.equal(pendingId);
    // Another ticket, while that request waits: the answer is that request, and what it asked (T-1234).
    const again = await requestImpersonation(demo, alice, { ...BOB, ticketId: 'T-2001', reason: 'Invoice resend' });
    expect(again.status).to.equal(202);
    expect(again.body['approvalRequest']).to.deep.include({ id: pendingId, asked: FIRST });
    expect(await approvalStatus(demo, alice, pendingId)).to.deep.include({
      status: 200,
      body: { status: 'pending', customer: { id: 'bob', name: 'Bob Brown' }, expiresAt: pending['expiresAt'] },
    });
  });

  it('asking for dave, who needs no approval, answers the subject token at once', async () => {
    const asked = await requestImpersonation(demo, alice, { ...BOB, userId: 'dave' });
    expect(asked.status).to.equal(200);
    expect(asked.body).to.have.keys('subjectToken', 'expiresIn');
  });

  it("shows bob who asks and why, escaped; his approval lets alice's next ask through, read only as he chose", async () => {
    const bob = await bobAtHisPage(demo);
    const html = await bob.page();
    expect(html).to.contain(
      'Alice Adams (support) asks to see and change your account, ticket T-1234: &lt;img src=x onerror=alert(1)&gt; invoices.',
    );
    expect(html).to.not.contain('<img src=x');

    const approved = await postAccountForm(
      demo.backend.url,
      bob.jar,
      `/account/support-access/requests/${pendingId}/approve`,
      { csrf: bob.csrf, duration: '3600', access: 'read' },
    );
    expect(approved.status).to.equal(303);
    expect(approved.headers.get('location')).to.equal('/account#support-access');
    const after = await bob.page();
    expect(after).to.match(/You let Alice Adams \(support\) act on your account \(read only\) until /);
    expect(after).to.match(/Alice Adams \(support\) may see your account until [^<]+ \(you approved their request\)\./);
    expect(after).to.contain('id="requests-empty"');

    const answer = await approvalStatus(demo, alice, pendingId);
    expect(answer.status).to.equal(200);
    expect(answer.body).to.include({ status: 'approved', expiresIn: 60 });
    // Alice asked to change; bob allowed reading only: the token reads only.
    const exchanged = await exchange(
      demo,
      answer.body['subjectToken'] as string,
      alice,
      undefined,
      {},
      'profile:read profile:write',
    );
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(decodeJwt(exchanged.body['access_token'] as string)).to.include({ sub: 'bob', scope: 'profile:read' });
    expect((await callResourceApi(demo, exchanged.body['access_token'] as string)).status).to.equal(200);

    // While the access he approved lasts, what he approved needs no new approval...
    const again = await approvalStatus(demo, alice, pendingId);
    expect(again.body).to.include({ status: 'approved' });
    expect(again.body['subjectToken']).to.be.a('string');
    // ...and nothing else passes under it: another ask (here, to read for another reason) is his to answer.
    expect((await requestImpersonation(demo, alice, BOB)).status).to.equal(202);
  });

  it("ending the access ends alice's impersonation: its token is refused, and the console is told bob ended it", async () => {
    const bob = await bobAtHisPage(demo);
    const grantId = /id="grant-(agr_[A-Za-z0-9_-]{22})"/.exec(await bob.page())?.[1];
    expect(grantId).to.be.a('string');
    const subject = (await approvalStatus(demo, alice, pendingId)).body['subjectToken'] as string;
    const token = (await exchange(demo, subject, alice)).body['access_token'] as string;
    expect((await callResourceApi(demo, token)).status).to.equal(200);

    const ended = await postAccountForm(demo.backend.url, bob.jar, `/account/support-access/grants/${grantId}/end`, {
      csrf: bob.csrf,
    });
    expect(ended.status).to.equal(303);
    const endedAt = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - endedAt < scaled(1500)) {
      status = (await callResourceApi(demo, token)).status;
      if (status === 200) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status, 'refused within 1.5 s').to.equal(401);
    const page = await bob.page();
    expect(page).to.contain('The access ended: whoever used it no longer acts on your account.');
    expect(page).to.contain('id="grants-empty"');

    const sessionId = decodeJwt(token)['impersonation_session'] as string;
    const said = await fetch(`${demo.backend.url}/api/impersonation-status?${new URLSearchParams({ sessionId })}`, {
      headers: { authorization: `Bearer ${alice}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(await said.json()).to.include({ state: 'ended', endReason: 'access_grant_ended', customer: 'Bob Brown' });
    // Without access, alice waits for bob again.
    expect((await requestImpersonation(demo, alice, BOB)).status).to.equal(202);
  });

  it('his denial, with his reason, is what the console reads', async () => {
    const id = await askBob(demo, alice);
    const bob = await bobAtHisPage(demo);
    const denied = await postAccountForm(demo.backend.url, bob.jar, `/account/support-access/requests/${id}/deny`, {
      csrf: bob.csrf,
      reason: 'Not without a phone call first',
    });
    expect(denied.status).to.equal(303);
    expect(await bob.page()).to.contain('You denied Alice Adams (support) access to your account.');
    expect(await approvalStatus(demo, alice, id)).to.deep.include({
      status: 200,
      body: { status: 'denied', customer: { id: 'bob', name: 'Bob Brown' }, reason: 'Not without a phone call first' },
    });
  });

  it("refuses a form of his page without the page's CSRF token, or from a signed-out browser, and changes nothing", async () => {
    const id = await askBob(demo, alice, { ticketId: 'T-CSRF' });
    const bob = await bobAtHisPage(demo);
    const action = `/account/support-access/requests/${id}/approve`;
    for (const csrf of [
      undefined,
      '',
      'x'.repeat(43),
      csrfOf(await (await accountSignIn(demo.backend.url, 'bob')).html),
    ]) {
      const forged = await postAccountForm(demo.backend.url, bob.jar, action, {
        ...(csrf === undefined ? {} : { csrf }),
        duration: '3600',
      });
      expect(forged.status, `csrf ${String(csrf)}`).to.equal(403);
      expect(await forged.text()).to.contain('this form did not come from your account page');
    }
    const signedOut = await postAccountForm(demo.backend.url, new CookieJar(), action, {
      csrf: bob.csrf,
      duration: '3600',
    });
    expect(signedOut.status).to.equal(401);
    expect((await approvalStatus(demo, alice, id)).body['status']).to.equal('pending');
    // A duration the page does not offer is refused by the page before the identity service sees it.
    const odd = await postAccountForm(demo.backend.url, bob.jar, action, { csrf: bob.csrf, duration: '31' });
    expect(odd.status).to.equal(400);
    expect((await approvalStatus(demo, alice, id)).body['status']).to.equal('pending');
  });

  it('shows a request only to the engineer who made it, from the application they made it with', async () => {
    const id = await askBob(demo, alice, { ticketId: 'T-OWN' });
    const web = await signIn(demo, { login: 'alice', password: 'alice-password', client: 'support-web' });
    const bob = await signIn(demo, { login: 'bob', password: 'bob-password' });
    expect((await approvalStatus(demo, web, id)).status).to.equal(404);
    expect((await approvalStatus(demo, bob, id)).status).to.equal(403);
    expect((await approvalStatus(demo, undefined, id)).status).to.equal(401);
    expect((await approvalStatus(demo, alice, 'apr_AAAAAAAAAAAAAAAAAAAAAA')).status).to.equal(404);
    const malformed = await approvalStatus(demo, alice, '../impersonations');
    expect(malformed.status).to.equal(400);
    expect(malformed.body['error']).to.equal('invalid_request');
  });

  it("gives the support-access API's token to the customers' account pages only, never to the console's sign-in", async () => {
    // The console is first-party, and its sign-ins get what it asks for: except the customer's own API.
    const jar = new CookieJar();
    const authorize = new URL(`${demo.identity.issuer}/auth`);
    authorize.search = new URLSearchParams({
      client_id: 'support-console',
      response_type: 'code',
      scope: 'openid support-access',
      resource: demo.identity.customerResource,
      redirect_uri: `${demo.backend.url}/callback`,
      state: 'state',
      code_challenge: createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url'),
      code_challenge_method: 'S256',
    }).toString();
    let response = await request(jar, authorize.href);
    let at = new URL(response.headers.get('location')!, authorize).href;
    await (await request(jar, at)).body?.cancel();
    response = await request(jar, `${at}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ login: 'bob', password: 'bob-password' }),
    });
    for (let hop = 0; hop < 10 && !at.startsWith(demo.backend.url); hop += 1) {
      at = new URL(response.headers.get('location')!, at).href;
      if (!at.startsWith(demo.backend.url)) response = await request(jar, at);
    }
    const callback = new URL(at);
    expect(callback.pathname).to.equal('/callback');
    expect(callback.searchParams.get('code')).to.equal(null);
    expect(callback.searchParams.get('error')).to.equal('access_denied');
    expect(callback.searchParams.get('error_description')).to.equal(
      "the customer's support-access API is for the customers' account pages only",
    );
  });
});

describe('demo: a request bob leaves unanswered', function () {
  this.timeout(20_000);
  let demo: Demo;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, approvalRequestTTL: 1 });
  });
  after(() => demo?.close());

  it('expires, and the console reads that it did', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const id = await askBob(demo, alice);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await approvalStatus(demo, alice, id)).to.deep.include({
      status: 200,
      body: { status: 'expired', customer: { id: 'bob', name: 'Bob Brown' } },
    });
    const { items } = await (demo.auditLog as MemoryAuditLog).query({ subject: 'bob' });
    expect(items.map((item) => item.event)).to.include(EVENTS.approvalExpired);
  });
});

describe('demo: emergency access (break-glass), outside the console', function () {
  this.timeout(20_000);
  let demo: Demo;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
  });
  after(() => demo?.close());

  /** A Management API token of the given machine client. */
  async function m2m(client: string, secret: string): Promise<string> {
    const response = await fetch(`${demo.identity.issuer}/token`, {
      method: 'POST',
      headers: { authorization: basic(client, secret) },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: demo.identity.managementResource,
        scope: 'subject-tokens:create',
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    return ((await response.json()) as { access_token: string }).access_token;
  }

  async function breakGlass(token: string): Promise<Reply> {
    const response = await fetch(demo.identity.managementUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        userId: 'bob',
        actorId: 'alice',
        clientId: 'support-console',
        context: { ticketId: 'INC-77', reason: 'Payments down for every customer' },
        breakGlass: { reason: 'Incident INC-77: payments failing' },
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it("is refused to the console's backend, and granted to the on-call client, which bob's activity marks as an emergency", async () => {
    const refused = await breakGlass(await m2m('impersonation-backend', 'impersonation-backend-secret'));
    expect(refused.status).to.equal(403);
    expect(refused.body['error']).to.equal('access_denied');

    const created = await breakGlass(await m2m('emergency-access', 'emergency-access-secret'));
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const exchanged = await exchange(demo, created.body['subjectToken'] as string, alice);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);

    const { html } = await accountSignIn(demo.backend.url, 'bob');
    const emergencies = [...html.matchAll(/<li class="emergency">([\s\S]*?)<\/li>/g)].map((match) => match[1]);
    expect(emergencies).to.have.length(1);
    expect(emergencies[0]).to.match(
      /^<strong class="mark">Emergency access<\/strong> Alice Adams \(support\) accessed your account on [^<]+, ticket INC-77: Payments down for every customer, without your approval: Incident INC-77: payments failing$/,
    );
  });
});
