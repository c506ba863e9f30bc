import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { startDemo, type Demo } from '../../demo/demo.js';
import { quiet } from './helpers.js';

/** Debian's chromium; nothing here ever downloads a browser. */
const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.resolve('test-artifacts');
const LOCAL_HOSTS = new Set(['localhost', '127.0.0.1']);

describe('demo: support console in headless Chromium', function () {
  this.timeout(90_000);
  let demo: Demo;
  let userDataDir: string;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];
  const offHost: string[] = [];

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (the test never downloads a browser)`);
    }
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    userDataDir = await mkdtemp(path.join(tmpdir(), 'demo-chromium-'));
    await mkdir(ARTIFACTS, { recursive: true });
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      timeout: 30_000,
      viewport: { width: 1100, height: 1300 },
      args: [
        '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ],
    });
    context.setDefaultTimeout(10_000);
    // Nothing leaves this machine: any request to another host is refused and recorded.
    await context.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.protocol === 'data:' || LOCAL_HOSTS.has(url.hostname)) return route.continue();
      offHost.push(url.href);
      return route.abort();
    });
    page = context.pages()[0] ?? await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await context?.close();
    await demo?.close();
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed' && page) {
      return page.screenshot({ path: path.join(ARTIFACTS, 'demo-console-failure.png'), fullPage: true }).then(() => {});
    }
    return undefined;
  });

  async function signIn(login: string, password: string): Promise<void> {
    await page.goto(`${demo.backend.url}/`);
    await page.locator('body[data-ready="true"]').waitFor();
    if (await page.locator('#sign-out').isVisible()) {
      // Signing out ends the identity service's session as well (RP-initiated logout).
      await page.click('#sign-out');
      await page.waitForURL(`${demo.identity.issuer}/session/end**`);
      await page.click('#logout-yes');
      await page.waitForURL(`${demo.backend.url}/`);
      await page.locator('body[data-ready="true"]').waitFor();
      expect(await page.locator('#sign-in-card').isVisible()).to.equal(true);
    }
    await page.click('#sign-in');
    await page.waitForURL(`${demo.identity.baseUrl}/interaction/**`);
    await page.fill('input[name="login"]', login);
    await page.fill('input[name="password"]', password);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${demo.backend.url}/`);
    await page.locator('body[data-ready="true"]').waitFor();
  }

  async function impersonate(user: string, reason: string, ticket: string): Promise<void> {
    await page.fill('#user', user);
    await page.fill('#reason', reason);
    await page.fill('#ticket', ticket);
    await page.click('#impersonate');
  }

  it('shows a plain error for a wrong password on the login page', async () => {
    await page.goto(`${demo.backend.url}/`);
    await page.click('#sign-in');
    await page.waitForURL(`${demo.identity.baseUrl}/interaction/**`);
    await page.fill('input[name="login"]', 'alice');
    await page.fill('input[name="password"]', 'not-her-password');
    await page.click('button[type="submit"]');
    expect(await page.locator('#login-error').textContent()).to.equal('Invalid login or password.');
  });

  it('alice signs in and impersonates bob: the page shows the token and the API answer', async () => {
    await signIn('alice', 'alice-password');
    expect(await page.locator('#signed-in-user').textContent()).to.contain('Signed in as alice');
    expect(await page.locator('#error').isHidden()).to.equal(true);

    await impersonate('bob', 'Cannot see the invoices', 'T-1234');
    await page.locator('#api-card').waitFor({ state: 'visible' });

    expect(await page.locator('#error').isHidden()).to.equal(true);
    expect(await page.locator('#claim-sub').textContent()).to.equal('bob');
    expect(JSON.parse(await page.locator('#claim-act').textContent() ?? '')).to.deep.equal({ sub: 'alice' });
    expect(await page.locator('#claim-aud').textContent()).to.equal('https://api.example.com');
    expect(await page.locator('#claim-scope').textContent()).to.equal('profile:read');
    expect(JSON.parse(await page.locator('#claim-context').textContent() ?? '')).to.deep.equal({
      ticket_id: 'T-1234', reason: 'Cannot see the invoices', support_engineer: 'alice',
    });
    expect(await page.locator('#claim-exp').textContent()).to.match(/^(9:5\d|10:00) remaining/);
    expect(await page.locator('#steps li.done').count()).to.equal(3);
    expect(await page.locator('#steps').textContent()).to.contain('no refresh token');

    expect(await page.locator('#api-message').textContent()).to.equal('alice is acting as bob');
    const answer = JSON.parse(await page.locator('#api-answer').textContent() ?? '') as Record<string, unknown>;
    expect(answer).to.include({ subject: 'bob', actor: 'alice', client_id: 'support-console' });
    expect(answer['impersonation_context']).to.deep.equal({
      ticket_id: 'T-1234', reason: 'Cannot see the invoices', support_engineer: 'alice',
    });

    await page.screenshot({ path: path.join(ARTIFACTS, 'demo-console.png'), fullPage: true });
  });

  it('impersonating carol is refused, plainly', async () => {
    await impersonate('carol', 'Password reset', 'T-5678');
    await page.locator('#error').waitFor({ state: 'visible' });
    const error = await page.locator('#error').textContent();
    expect(error).to.equal('Requesting impersonation failed: HTTP 403 — access_denied: carol is protected from impersonation');
    expect(await page.locator('#token-card').isHidden()).to.equal(true);
    expect(await page.locator('#api-card').isHidden()).to.equal(true);
    expect(await page.locator('#steps li.failed').count()).to.equal(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'demo-console-carol.png'), fullPage: true });
  });

  it('bob, who is not support staff, is refused by the backend', async () => {
    await signIn('bob', 'bob-password');
    expect(await page.locator('#signed-in-user').textContent()).to.contain('Signed in as bob');
    await impersonate('carol', 'Curious', 'T-0');
    await page.locator('#error').waitFor({ state: 'visible' });
    expect(await page.locator('#error').textContent()).to.contain('HTTP 403 — access_denied: bob is not support staff');
  });

  it('raised no script errors and sent nothing off this machine', () => {
    expect(pageErrors).to.deep.equal([]);
    expect(offHost).to.deep.equal([]);
  });
});
