import path from 'node:path';
import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { ARTIFACTS, expectAccessible, launch, screenshot, type Browser } from './browser.js';
import { basic, exchange, quiet, refusedWithin, REQUEST_TIMEOUT, signIn } from './helpers.js';
import { Person } from './person.js';
import { scaled } from '../support/time.js';

/** How long a person waits for what the other did to reach their page: the pages ask every few seconds. */
const WITHIN = 10_000;

describe('demo: customer approval, alice and bob each in a browser of their own', function () {
  this.timeout(120_000);
  let demo: Demo;
  const browsers: Browser[] = [];
  let alice: Person;
  let bob: Person;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    browsers.push(await launch(), await launch());
    alice = new Person(browsers[0]!.page, demo);
    bob = new Person(browsers[1]!.page, demo);
  });

  after(async () => {
    await Promise.all(browsers.map((browser) => browser.close()));
    await demo?.close();
  });

  afterEach(async function () {
    if (this.currentTest?.state !== 'failed') return;
    for (const [who, person] of [
      ['alice', alice],
      ['bob', bob],
    ] as const) {
      await person?.page.screenshot({ path: path.join(ARTIFACTS, `demo-approval-${who}-failure.png`), fullPage: true });
    }
  });

  const waitingForBob = () => alice.page.getByRole('status').filter({ hasText: "Waiting for Bob's approval…" });
  const actingAsBob = () => alice.page.getByRole('status').filter({ hasText: 'Acting as Bob Brown (bob)' });

  it('bob signs in at his account page: no request waits for him, and he gave no access', async () => {
    await bob.openAccount('bob');
    expect(await bob.text('#support-title')).to.equal('Support access');
    expect(await bob.text('#requests-empty')).to.equal('No one from support is waiting for your answer.');
    expect(await bob.text('#grants-empty')).to.equal('Support has no access to your account.');
    await expectAccessible(bob.page, "bob's account page, nothing waiting");
  });

  it("alice asks to act as bob: her console waits for Bob's approval, and bob's page shows who asks and why by itself", async () => {
    await alice.signIn('alice', 'alice-password');
    await alice.impersonate('bob');
    await waitingForBob().waitFor();
    expect(await alice.text('#waiting-detail')).to.match(
      /^You asked to see the account of Bob Brown \(bob\), ticket T-1234\. Bob answers on their account page; this console goes on by itself once they approve\. The request expires at /,
    );
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect(await alice.page.locator('#impersonate-card').isHidden()).to.equal(true);
    await expectAccessible(alice.page, "the console waiting for bob's approval");
    await screenshot(alice.page, 'console-waiting-for-approval.png');
    // The wait survives a reload.
    await alice.page.reload();
    await alice.ready();
    await waitingForBob().waitFor();

    // Bob's page notices the request within a few seconds, without him reloading it.
    const request = bob.page.locator('#requests li.request');
    await request.waitFor({ timeout: WITHIN });
    expect(await request.locator('p').innerText()).to.match(
      /^Alice Adams \(support\) asks to see your account, ticket T-1234: Cannot see the invoices\. Asked on .+; without your answer the request expires on .+\.$/,
    );
    await expectAccessible(bob.page, "bob's account page with alice's request");
    await screenshot(bob.page, 'account-support-access.png');
  });

  it("bob approves it for an hour; alice's console goes on by itself and shows his data", async () => {
    const approve = bob.page.getByRole('form', { name: 'Approve the request of Alice Adams (support)' });
    await approve.getByLabel('Allow for').selectOption({ label: '1 hour' });
    await approve.getByRole('button', { name: 'Approve' }).click();
    const approvedAt = Date.now();
    await bob.page.locator('#support-notice').waitFor();
    expect(await bob.text('#support-notice')).to.match(
      /^You let Alice Adams \(support\) act on your account \(read only\) until .+\.$/,
    );
    expect(await bob.text('#grants')).to.match(
      /Alice Adams \(support\) may see your account until .+ \(you approved their request\)\./,
    );
    expect(await bob.page.locator('#requests-empty').isVisible()).to.equal(true);
    await expectAccessible(bob.page, "bob's account page after his approval");

    await actingAsBob().waitFor({ timeout: WITHIN });
    const started = Date.now();
    expect(started - approvedAt, 'the console went on within seconds').to.be.below(WITHIN);
    await alice.saysNoError(alice.page.locator('#orders tbody tr').first());
    expect(await alice.text('#customer-title')).to.equal("Bob Brown's account, as Bob sees it");
    expect(await alice.text('#customer-access')).to.contain('Read only');
    expect(await alice.page.locator('#waiting-card').isHidden()).to.equal(true);
    // Under Details, closed: the text of the steps, not what is on screen.
    expect(await alice.page.locator('#steps li.done').allTextContents()).to.satisfy((steps: string[]) =>
      steps.some((text) => text.startsWith("1b. Wait for bob's approval") && text.endsWith('Bob approved.')),
    );
    await expectAccessible(alice.page, 'the console acting as bob after his approval');

    // Bob's page tells him, seconds later: the identity service's webhook reached the backend's receiver.
    const notice = bob.page.locator('#notifications li', { hasText: 'started acting as you' });
    await notice.waitFor({ timeout: WITHIN });
    expect(Date.now() - started, 'bob is told within a few seconds').to.be.below(scaled(8000));
    expect(await notice.innerText()).to.match(
      /^Alice from support started acting as you \(ticket T-1234\) at \d\d:\d\d UTC on \d{1,2} \w+ 20\d\d$/,
    );
    await expectAccessible(bob.page, "bob's account page with a notification");
    await screenshot(bob.page, 'account-notification.png');
  });

  it("bob ends the access: alice's token is refused within two seconds, and her console says he ended it without a reload", async () => {
    const token = await alice.actingToken();
    await bob.page.getByRole('button', { name: 'End access' }).click();
    expect(await refusedWithin(demo, token, 2000)).to.equal(401);
    // Her console is told, without a reload: the backend heard of the stop by webhook.
    await alice.page.locator('#error').waitFor({ state: 'visible', timeout: WITHIN });
    expect(await alice.text('#error-message')).to.equal(
      'Bob Brown ended the access they gave: this impersonation stopped',
    );
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect(await alice.page.locator('#customer-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#orders tbody tr').count()).to.equal(0);
    await bob.page.locator('#support-notice').waitFor();
    expect(await bob.text('#support-notice')).to.equal(
      'The access ended: whoever used it no longer acts on your account.',
    );
    expect(await bob.page.locator('#grants-empty').isVisible()).to.equal(true);
    await bob.page
      .locator('#notifications li', { hasText: 'Alice from support stopped acting as you (ticket T-1234)' })
      .waitFor({ timeout: WITHIN });
  });

  it('bob denies her next request; her console says so, with his reason', async () => {
    await alice.impersonate('bob', 'Refund question', 'T-1300');
    await waitingForBob().waitFor();
    const request = bob.page.locator('#requests li.request');
    await request.waitFor({ timeout: WITHIN });
    expect(await request.locator('p').innerText()).to.contain('ticket T-1300: Refund question');
    const deny = bob.page.getByRole('form', { name: 'Deny the request of Alice Adams (support)' });
    await deny.getByLabel('Reason (optional, support sees it)').fill('Please call me first');
    await deny.getByRole('button', { name: 'Deny' }).click();
    await bob.page.locator('#support-notice').waitFor();
    expect(await bob.text('#support-notice')).to.equal('You denied Alice Adams (support) access to your account.');

    await alice.page.locator('#error').waitFor({ state: 'visible', timeout: WITHIN });
    expect(await alice.text('#error-message')).to.equal('Bob Brown (bob) denied your request: Please call me first');
    expect(await alice.page.locator('#waiting-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#impersonate-card').isVisible()).to.equal(true);
    await expectAccessible(alice.page, 'the console after a denial');
  });

  it('alice may stop waiting: the console says bob can still answer', async () => {
    await alice.impersonate('bob', 'Address check', 'T-1400');
    await waitingForBob().waitFor();
    await alice.page.getByRole('button', { name: 'Stop waiting' }).click();
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    expect(await alice.text('#notice')).to.equal(
      'You stopped waiting for Bob Brown (bob). They can still answer; ask again to use their answer.',
    );
    expect(await alice.page.locator('#waiting-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#impersonate-card').isVisible()).to.equal(true);
  });

  it("asked again while her earlier request waits, the console names that request's ticket, as bob, the trail and his notification do", async () => {
    // The request alice stopped waiting for (T-1400) still waits: asking again waits for it, not for a new one.
    await alice.impersonate('bob', 'Invoice resend', 'T-2001');
    await waitingForBob().waitFor();
    expect(await alice.text('#waiting-detail')).to.match(
      /^You asked to see the account of Bob Brown \(bob\), ticket T-1400\. Bob answers on their account page; /,
    );
    expect(await alice.text('#notice')).to.equal(
      'Bob has not answered your earlier request yet (ticket T-1400): this console waits for that one. ' +
        'Ask again for ticket T-2001 once they answer.',
    );
    const request = bob.page.locator('#requests li.request');
    await request.filter({ hasText: 'ticket T-1400: Address check' }).waitFor({ timeout: WITHIN });
    expect(await request.count()).to.equal(1);
    await bob.ready();

    const approve = bob.page.getByRole('form', { name: 'Approve the request of Alice Adams (support)' });
    await approve.getByRole('button', { name: 'Approve' }).click();
    await actingAsBob().waitFor({ timeout: WITHIN });
    expect(await alice.text('#banner-ticket')).to.equal('T-1400: Address check');
    // The line that said an earlier request waits is gone with the wait.
    expect(await alice.page.locator('#notice').isHidden()).to.equal(true);
    await bob.page
      .locator('#notifications li', { hasText: 'Alice from support started acting as you (ticket T-1400)' })
      .waitFor({ timeout: WITHIN });
    const { items } = await demo.auditLog.query!({ subject: 'bob', events: ['impersonation.exchange.succeeded'] });
    expect((items[0] as { context: { ticketId?: string } }).context.ticketId).to.equal('T-1400');

    // As it was: alice acts as no one, and bob gave no access.
    await alice.page.getByRole('button', { name: 'Stop impersonating' }).click();
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    await bob.page.reload();
    await bob.ready();
    await bob.page.getByRole('button', { name: 'End access' }).click();
    await bob.page.locator('#grants-empty').waitFor();
  });

  it('dave needs no approval: alice acts as him at once', async () => {
    await alice.impersonate('dave');
    await alice.saysNoError(alice.page.locator('#orders tbody tr').first());
    expect(await alice.text('#acting-banner')).to.contain('Acting as Dave Doyle (dave)');
    expect(await alice.page.locator('#steps').textContent()).to.not.contain('approval');
    await alice.page.getByRole('button', { name: 'Stop impersonating' }).click();
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
  });

  it('bob gives read-only access ahead of time, to alice, with a note; she then acts as him without waiting', async () => {
    await bob.ready();
    await bob.page.locator('#give > summary').click();
    const give = bob.page.locator('#give-form');
    await give.getByLabel('For', { exact: true }).selectOption({ label: '8 hours' });
    await give.getByLabel('To', { exact: true }).selectOption({ label: 'Alice Adams' });
    await give.getByLabel('Read only').check();
    await give.getByLabel('Note for support (optional)').fill('About the invoice of November');
    await expectAccessible(bob.page, 'the form that gives access');
    await give.getByRole('button', { name: 'Give access' }).click();
    await bob.page.locator('#support-notice').waitFor();
    expect(await bob.text('#support-notice')).to.match(
      /^You gave Alice Adams \(support\) access to your account \(read only\) until .+\.$/,
    );
    expect(await bob.text('#grants')).to.match(
      /Alice Adams \(support\) may see your account until .+\. Your note: About the invoice of November\./,
    );

    await alice.impersonate('bob');
    await alice.saysNoError(actingAsBob());
    expect(await alice.page.locator('#steps').textContent()).to.not.contain('approval');
    await alice.page.getByRole('button', { name: 'Stop impersonating' }).click();
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
  });

  it("an emergency access (break-glass, outside the console) is marked as such on bob's activity", async () => {
    const m2m = await fetch(`${demo.identity.issuer}/token`, {
      method: 'POST',
      headers: { authorization: basic('emergency-access', 'emergency-access-secret') },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: demo.identity.managementResource,
        scope: 'subject-tokens:create',
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const created = await fetch(demo.identity.managementUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${((await m2m.json()) as { access_token: string }).access_token}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({
        userId: 'bob',
        actorId: 'alice',
        clientId: 'support-console',
        context: { ticketId: 'INC-77', reason: 'Payments down' },
        breakGlass: { reason: 'Incident INC-77: payments failing for every customer' },
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const { subjectToken } = (await created.json()) as { subjectToken: string };
    const actorToken = await signIn(demo, { login: 'alice', password: 'alice-password' });
    expect((await exchange(demo, subjectToken, actorToken)).status).to.equal(200);

    await bob.page.reload();
    await bob.ready();
    const marked = bob.page.locator('#activity li.emergency');
    expect(await marked.count()).to.equal(1);
    expect(await marked.locator('.mark').innerText()).to.equal('Emergency access');
    expect(await marked.innerText()).to.match(
      /^Emergency access Alice Adams \(support\) accessed your account on .+, ticket INC-77: Payments down, without your approval: Incident INC-77: payments failing for every customer$/,
    );
    await expectAccessible(bob.page, "bob's activity with an emergency access");
  });

  it('raised no script errors and sent nothing off this machine, in either browser', () => {
    for (const browser of browsers) {
      expect(browser.pageErrors).to.deep.equal([]);
      expect(browser.offHost).to.deep.equal([]);
    }
  });
});
