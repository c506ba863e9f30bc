import path from 'node:path';
import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import { ARTIFACTS, expectAccessible, launch, screenshot, type Browser } from './browser.js';
import { CUSTOMER_EVENTS } from '../../demo/activity.js';
import { letSupportIn, managementToken, quiet, refusedWithin } from './helpers.js';
import { Person } from './person.js';

describe('demo: support console in headless Chromium', function () {
  this.timeout(90_000);
  let demo: Demo;
  let browser: Browser;
  let alice: Person;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    // Bob gave support access ahead of time: alice acts as him without waiting (the wait is approval.e2e.test.ts's).
    await letSupportIn(demo.backend.url);
    browser = await launch();
    alice = new Person(browser.page, demo);
  });

  after(async () => {
    await browser?.close();
    await demo?.close();
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && browser) {
      await browser.page.screenshot({ path: path.join(ARTIFACTS, 'demo-console-failure.png'), fullPage: true });
    }
  });

  it('shows a plain error for a wrong password on the login page', async () => {
    await alice.openConsole();
    await alice.page.click('#sign-in');
    await alice.enterPassword('alice', 'not-her-password');
    expect(await alice.text('#login-error')).to.equal('Invalid login or password.');
  });

  it('alice acts as bob: a banner names him, the ticket and the time left; the header says so; his data is shown read-only', async () => {
    await alice.signIn('alice', 'alice-password');
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as alice');
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    await expectAccessible(alice.page, 'the console, signed in');

    await alice.impersonate('bob');
    const banner = alice.page.getByRole('status').filter({ hasText: 'Acting as' });
    await banner.waitFor();
    expect(await banner.innerText()).to.match(
      /^Acting as Bob Brown \(bob\) · ticket T-1234: Cannot see the invoices · (9:5\d|10:00) left/,
    );
    expect(await banner.getByRole('button', { name: 'Stop impersonating' }).isVisible()).to.equal(true);
    expect(await alice.text('#signed-in-user')).to.equal('alice, acting as Bob Brown (bob)');
    // The banner is at the top of the screen, not below the fold.
    const box = await banner.boundingBox();
    expect(box!.y + box!.height).to.be.below(200);

    expect(await alice.text('#customer-title')).to.equal("Bob Brown's account, as Bob sees it");
    expect(await alice.text('#profile-address')).to.equal('12 Harbour Street, BS1 4RW Bristol, United Kingdom');
    expect(await alice.text('#orders tbody')).to.contain('ORD-1042');
    expect(await alice.text('#invoices tbody')).to.contain('INV-2026-0388');
    expect(await alice.text('#customer-access')).to.contain('Read only');
    expect(await alice.page.locator('#impersonate-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#error').isHidden()).to.equal(true);
    await expectAccessible(alice.page, 'the console, acting as bob');
    await screenshot(alice.page, 'console-acting-as-bob.png');

    // A read-only token cannot change anything at the API either.
    const response = await fetch(`${demo.backend.url}/api/customer/shipping-address`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${await alice.actingToken()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ line1: 'Elsewhere 1', city: 'Bath', postcode: 'BA1 1AA', country: 'United Kingdom' }),
    });
    expect(response.status).to.equal(403);
  });

  it('keeps the protocol view behind "Details": the three steps and the token\'s claims', async () => {
    const details = alice.page.locator('#details');
    expect(await alice.page.locator('#claim-sub').isVisible()).to.equal(false);
    await details.locator('> summary').click();
    expect(await alice.text('#claim-sub')).to.equal('bob');
    expect(JSON.parse(await alice.text('#claim-act'))).to.deep.equal({ sub: 'alice' });
    expect(await alice.text('#claim-aud')).to.equal('https://api.example.com');
    expect(await alice.text('#claim-scope')).to.equal('profile:read');
    expect(JSON.parse(await alice.text('#claim-context'))).to.deep.equal({
      ticket_id: 'T-1234',
      reason: 'Cannot see the invoices',
      support_engineer: 'alice',
    });
    expect(await alice.page.locator('#steps li.done').count()).to.equal(3);
    expect(await alice.text('#steps')).to.contain('no refresh token');
    expect(await alice.text('#api-message')).to.equal('alice is acting as bob');
    // The banner stays on this view too.
    expect(await alice.page.getByRole('status').filter({ hasText: 'Acting as Bob Brown (bob)' }).isVisible()).to.equal(
      true,
    );
    await expectAccessible(alice.page, 'the console with its details open');
    await details.locator('> summary').click();
  });

  it('the impersonation survives a reload: banner, header, data and the protocol under "Details" are back', async () => {
    await alice.page.reload();
    await alice.ready();
    await alice.page.locator('#orders tbody tr').first().waitFor();
    expect(await alice.text('#acting-banner')).to.contain('Acting as Bob Brown (bob)');
    expect(await alice.text('#signed-in-user')).to.equal('alice, acting as Bob Brown (bob)');
    expect(await alice.page.locator('#impersonate-card').isHidden()).to.equal(true);
    await alice.page.locator('#details > summary').click();
    expect(await alice.page.locator('#steps li.done').count()).to.equal(3);
    expect(await alice.text('#claim-sub')).to.equal('bob');
    expect(await alice.text('#api-message')).to.equal('alice is acting as bob');
    expect(await alice.page.locator('#details-empty').isHidden()).to.equal(true);
    await alice.page.locator('#details > summary').click();
  });

  it('Stop impersonating revokes the session: the banner goes, the resource API refuses the token, the trail records it', async () => {
    const token = await alice.actingToken();
    expect(await refusedWithin(demo, token, 0)).to.equal(200);
    await alice.page.getByRole('button', { name: 'Stop impersonating' }).click();
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    expect(await alice.text('#notice')).to.equal(
      'You stopped acting as Bob Brown (bob). The token you held no longer opens their account.',
    );
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect(await alice.page.locator('#customer-card').isHidden()).to.equal(true);
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as alice');
    expect(await refusedWithin(demo, token, 1000)).to.equal(401);
    const { items } = await (demo.auditLog as MemoryAuditLog).query({ subject: 'bob' });
    expect(items[0]).to.include({
      event: EVENTS.sessionRevoked,
      actor: 'alice',
      subject: 'bob',
      reason: 'stopped in the support console by alice',
    });
    await expectAccessible(alice.page, 'the console after a stop');
    await screenshot(alice.page, 'console-after-stop.png');
    await alice.page.reload();
    await alice.ready();
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
  });

  it('says in words that carol is protected, the OAuth code on a smaller line', async () => {
    await alice.impersonate('carol', 'Password reset', 'T-5678');
    await alice.page.locator('#error').waitFor({ state: 'visible' });
    expect(await alice.text('#error-message')).to.equal('carol is protected from impersonation');
    expect(await alice.text('#error-code')).to.equal(
      'Requesting impersonation: HTTP 403 · access_denied — carol is protected from impersonation',
    );
    const [message, code] = await Promise.all(
      ['#error-message', '#error-code'].map((selector) =>
        alice.page.locator(selector).evaluate((node) => parseFloat(getComputedStyle(node).fontSize)),
      ),
    );
    expect(code).to.be.below(message!);
    // The box holds its two lines within its padding, and no blank line above, between or below them.
    const blank = await alice.page.locator('#error').evaluate((box) => {
      const style = getComputedStyle(box);
      const inner = box.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
      const shown = [...box.children].filter((child) => child.getClientRects().length > 0);
      return inner - (shown[shown.length - 1]!.getBoundingClientRect().bottom - shown[0]!.getBoundingClientRect().top);
    });
    expect(blank).to.be.below(1);
    await alice.page.locator('#error').screenshot({ path: path.join(ARTIFACTS, 'demo-console-refusal.png') });
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    await expectAccessible(alice.page, 'the console with an error');
  });

  it('an impersonation stopped elsewhere ends at once, without a reload, with who stopped it; his data goes', async () => {
    await alice.impersonate('bob');
    await alice.page.locator('#acting-banner').waitFor();
    await alice.page.locator('#orders tbody tr').first().waitFor();
    const session = JSON.parse(Buffer.from((await alice.actingToken()).split('.')[1]!, 'base64url').toString())[
      'impersonation_session'
    ] as string;
    const revoked = await fetch(`${new URL(demo.identity.issuer).origin}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${await managementToken(demo, 'impersonations:revoke')}` },
    });
    expect(revoked.status).to.equal(204);
    // The backend hears of the stop by webhook and tells the console: no reload, no call of the resource API.
    await alice.page.locator('#error').waitFor({ state: 'visible', timeout: 10_000 });
    expect(await alice.text('#error-message')).to.equal(
      "this impersonation was stopped by the support team's administration (impersonation-backend)",
    );
    expect(await alice.text('#error-code')).to.equal(
      'GET /api/impersonation-events: stopped — this impersonation was stopped',
    );
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect(await alice.page.locator('#customer-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#orders tbody tr').count()).to.equal(0);
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as alice');
  });

  it('an impersonation that runs out ends with a clear message', async () => {
    await alice.impersonate('bob');
    await alice.page.locator('#acting-banner').waitFor();
    // Two seconds left, as if the ten minutes had passed.
    await alice.page.evaluate(() => {
      const acting = JSON.parse(sessionStorage.getItem('support-console.acting')!) as { expiresAt: number };
      sessionStorage.setItem('support-console.acting', JSON.stringify({ ...acting, expiresAt: Date.now() + 2000 }));
    });
    await alice.page.reload();
    await alice.ready();
    expect(await alice.text('#banner-time')).to.match(/^0:0[12] left$/);
    await alice.page.locator('#error').waitFor({ state: 'visible', timeout: 5000 });
    expect(await alice.text('#error-message')).to.equal(
      'your impersonation of Bob Brown (bob) ended: its time ran out. Impersonate again to continue.',
    );
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect(await alice.page.locator('#impersonate-card').isVisible()).to.equal(true);
  });

  it('bob, a customer, never sees the impersonation form, and is pointed to his account page', async () => {
    await alice.signIn('bob', 'bob-password');
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as bob');
    expect(await alice.page.locator('#impersonate-form').count()).to.equal(1);
    expect(await alice.page.locator('#impersonate-card').isHidden()).to.equal(true);
    expect(await alice.page.locator('#not-support-card').isVisible()).to.equal(true);
    expect(await alice.page.locator('#not-support-card a').getAttribute('href')).to.equal(
      `${demo.backend.url}/account`,
    );
  });

  it('bob signs in at /account and sees who from support accessed his account, when and why, newest first', async () => {
    const page = alice.page;
    await page.goto(`${demo.backend.url}/account`);
    await page.click('#account-sign-in');
    await alice.enterPassword('bob', 'bob-password');
    await page.waitForURL(`${demo.backend.url}/account`);
    expect(await alice.text('#account-user')).to.equal('Signed in as Bob Brown (bob)');
    const lines = await page.locator('#activity li').allInnerTexts();
    const accessed = lines.filter((line) => line.includes('accessed your account'));
    expect(accessed).to.have.length(3);
    for (const line of accessed) {
      expect(line).to.match(
        /^Alice Adams \(support\) accessed your account on \d{1,2} \w+ 20\d\d(,| at) \d\d:\d\d UTC, ticket T-1234: Cannot see the invoices$/,
      );
    }
    // Newest first, in the trail's order: the stops, and the ends of her impersonations when she signed out, among them.
    expect(lines.filter((line) => line.includes('to your account ended')).length).to.be.at.least(2);
    const { items } = await (demo.auditLog as MemoryAuditLog).query({ subject: 'bob' });
    const shown = items.filter((item) => CUSTOMER_EVENTS.includes(item.event));
    expect(lines.map((line) => line.includes('accessed your account'))).to.deep.equal(
      shown.map((item) => item.event === EVENTS.exchangeSucceeded),
    );
    // The oldest: the access he gave before alice started.
    expect(lines.at(-1)).to.match(/^You let anyone in support see and change your account, on /);
    await expectAccessible(page, 'the account page');
    await page.locator('#activity-title').evaluate((heading) => heading.scrollIntoView());
    await screenshot(page, 'account-activity.png');
    // A customer's page shows only the customer's account.
    expect(await page.content()).to.not.contain('carol');
  });

  it('raised no script errors and sent nothing off this machine', () => {
    expect(browser.pageErrors).to.deep.equal([]);
    expect(browser.offHost).to.deep.equal([]);
  });
});

describe('demo: changes need a fresh sign-in, and are recorded', function () {
  this.timeout(90_000);
  const MAX_AGE = 6;
  let demo: Demo;
  let browser: Browser;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, actorMaxAge: MAX_AGE });
    await letSupportIn(demo.backend.url);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await demo?.close();
  });

  it("refuses an edit while alice's sign-in is old, asks her to sign in again, then allows it and records it with her and bob", async () => {
    const alice = new Person(browser.page, demo);
    await alice.signIn('alice', 'alice-password');
    const signedInAt = Date.now();
    await alice.impersonate('bob');
    await alice.page.locator('#orders tbody tr').first().waitFor();
    expect(await alice.text('#customer-access')).to.contain('Read only');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, signedInAt + (MAX_AGE + 1) * 1000 - Date.now())));

    await alice.page.click('#edit-address');
    await alice.page.locator('#error').waitFor({ state: 'visible' });
    expect(await alice.text('#error-message')).to.equal('your sign-in is too old for changes: sign in again');
    expect(await alice.text('#error-code')).to.contain('insufficient_user_authentication');
    expect(await alice.page.locator('#address-form').isHidden()).to.equal(true);
    // Still acting as bob, read-only.
    expect(await alice.page.locator('#acting-banner').isVisible()).to.equal(true);

    await alice.page.getByRole('button', { name: 'Sign in again' }).click();
    await alice.enterPassword('alice', 'alice-password');
    await alice.page.waitForURL(`${demo.backend.url}/`);
    await alice.ready();
    await alice.page.locator('#address-form').waitFor({ state: 'visible' });
    expect(await alice.text('#customer-access')).to.contain('You may change');
    expect(await alice.text('#signed-in-user')).to.equal('alice, acting as Bob Brown (bob)');
    await alice.page.fill('#address-line1', '7 Quay Road');
    await alice.page.fill('#address-city', 'Bath');
    await alice.page.fill('#address-postcode', 'BA1 1AA');
    await alice.page.click('#save-address');
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    expect(await alice.text('#profile-address')).to.equal('7 Quay Road, BA1 1AA Bath, United Kingdom');

    // The edit impersonation replaced the read-only one, which was stopped.
    const { items } = await (demo.auditLog as MemoryAuditLog).query({ subject: 'bob' });
    expect(items.filter((item) => item.event === EVENTS.exchangeSucceeded)).to.have.length(2);
    expect(items.filter((item) => item.event === EVENTS.exchangeRefused)[0]).to.include({ actor: 'alice' });

    await alice.page.goto(`${demo.backend.url}/account`);
    await alice.page.click('#account-sign-in');
    await alice.enterPassword('bob', 'bob-password');
    await alice.page.waitForURL(`${demo.backend.url}/account`);
    const lines = await alice.page.locator('#activity li').allInnerTexts();
    // Newest first: her sign-out ended the impersonation after the change; the change came after her access.
    const changed = lines.findIndex((line) => /^Alice Adams \(support\) changed your shipping address on /.test(line));
    expect(changed, lines.join('\n')).to.be.at.least(0);
    expect(
      lines.slice(changed + 1).some((line) => line.startsWith('Alice Adams (support) accessed your account on ')),
    ).to.equal(true);
    expect(lines.slice(0, changed).some((line) => line.includes('accessed'))).to.equal(false);
  });
});
