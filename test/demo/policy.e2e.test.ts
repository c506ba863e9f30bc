/**
 * Who may act for whom, as the support console shows it in headless Chromium
 * (playwright-core, Debian's /usr/bin/chromium): the other organisation's
 * customer refused in words, the read-only tier refused a change, and no
 * impersonation without a ticket.
 */
import path from 'node:path';
import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { ARTIFACTS, launch, type Browser } from './browser.js';
import { quiet } from './helpers.js';
import { Person } from './person.js';

describe('demo: support roles in the console, in headless Chromium', function () {
  this.timeout(90_000);
  let demo: Demo;
  let browser: Browser;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    browser = await launch();
  });
  after(async () => {
    await browser?.close();
    await demo?.close();
  });
  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && browser) {
      await browser.page.screenshot({ path: path.join(ARTIFACTS, 'demo-policy-failure.png'), fullPage: true });
    }
  });

  async function refusal(person: Person): Promise<{ message: string; code: string }> {
    await person.page.locator('#error').waitFor({ state: 'visible' });
    return { message: await person.text('#error-message'), code: await person.text('#error-code') };
  }

  it("refuses alice the other organisation's customer, in words", async () => {
    const alice = new Person(browser.page, demo);
    await alice.signIn('alice', 'alice-password');
    await alice.impersonate('frank');
    const { message, code } = await refusal(alice);
    expect(message).to.equal('alice supports Northwind customers only; frank is a customer of Globex');
    expect(code).to.match(/^Requesting impersonation: HTTP 403 · access_denied/);
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
  });

  it('refuses an impersonation without a ticket', async () => {
    const alice = new Person(browser.page, demo);
    await alice.openConsole();
    await alice.impersonate('dave', 'Cannot see the invoices', '   ');
    const { message } = await refusal(alice);
    expect(message).to.match(/ticketId is required/);
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
  });

  it('lets erin (read only) see dave, and refuses her a change in words', async () => {
    const erin = new Person(browser.page, demo);
    await erin.signIn('erin', 'erin-password');
    await erin.impersonate('dave');
    const banner = erin.page.getByRole('status').filter({ hasText: 'Acting as' });
    await banner.waitFor();
    expect(await banner.innerText()).to.match(/^Acting as Dave Doyle \(dave\) · ticket T-1234: .* · (4:5\d|5:00) left/);
    expect(await erin.text('#customer-access')).to.contain('Read only');
    await erin.page.click('#edit-address');
    const { message, code } = await refusal(erin);
    expect(message).to.equal("erin's role (support trainee, read only) may not change customer data");
    expect(code).to.contain('HTTP 403 · access_denied');
    expect(await erin.page.locator('#address-form').isHidden()).to.equal(true);
  });

  it('raised no script errors and sent nothing off this machine', () => {
    expect(browser.pageErrors).to.deep.equal([]);
    expect(browser.offHost).to.deep.equal([]);
  });
});
