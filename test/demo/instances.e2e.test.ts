import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { APIRequestContext } from 'playwright-core';
import { startDemo, type Demo } from '../../demo/demo.js';
import { freePort, portOf } from '../../demo/http.js';
import { sharedDemoKeys } from '../../demo/keys.js';
import { assertRedisReachable, closeTestAdapters, redisTestAdapter, testPrefix } from '../support/adapter.js';
import { RoundRobinProxy } from '../support/round-robin.js';
import { scaled } from '../support/time.js';
import { ARTIFACTS, launch, type Browser } from './browser.js';
import { quiet } from './helpers.js';
import { Person } from './person.js';

/** How soon after Stop is pressed every instance's resource API refuses the token (docs/demo.md), on an idle machine. */
const STOP_HONOURED_WITHIN = 1000;

async function customerAt(
  request: APIRequestContext,
  demo: Demo,
  token: string,
): Promise<{ status: number; body: unknown }> {
  const answer = await request.get(`${demo.backend.url}/api/customer`, {
    headers: { authorization: `Bearer ${token}` },
    failOnStatusCode: false,
  });
  return { status: answer.status(), body: await answer.json() };
}

/**
 * Presses Stop, then asks every instance's resource API with the token until
 * each refuses it or STOP_HONOURED_WITHIN has passed; resolves each one's
 * last status.
 */
async function pressStop(person: Person, request: APIRequestContext, demos: Demo[]): Promise<number[]> {
  const token = await person.actingToken();
  for (const demo of demos) expect((await customerAt(request, demo, token)).status).to.equal(200);
  // The bound runs from the stop's answer: a busy browser's click is no part of what the servers promise.
  const stopped = person.page.waitForResponse((response) => response.url().endsWith('/api/stop-impersonation'));
  await person.page.getByRole('button', { name: 'Stop impersonating' }).click();
  expect((await stopped).status()).to.equal(204);
  const pressed = Date.now();
  const statuses = demos.map(() => 200);
  const bound = scaled(STOP_HONOURED_WITHIN);
  while (statuses.includes(200) && Date.now() - pressed <= bound) {
    for (const [index, demo] of demos.entries()) {
      if (statuses[index] === 200) statuses[index] = (await customerAt(request, demo, token)).status;
    }
    if (statuses.includes(200)) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return statuses;
}

async function actAsDave(person: Person): Promise<void> {
  await person.impersonate('dave');
  await person.saysNoError(person.page.locator('#orders tbody tr').first());
  await person.page.getByRole('status').filter({ hasText: 'Acting as Dave Doyle (dave)' }).waitFor();
  expect(await person.text('#signed-in-user')).to.equal('alice, acting as Dave Doyle (dave)');
}

describe('demo: two instances on Redis behind one identity address, in headless Chromium', function () {
  this.timeout(60_000);
  const demos: Demo[] = [];
  let dir: string | undefined;
  let balancer: RoundRobinProxy | undefined;
  let browser: Browser | undefined;

  before(async () => {
    await assertRedisReachable();
    dir = await mkdtemp(path.join(tmpdir(), 'demo-instances-e2e-'));
    // The load balancer in front of both identity services: their common address, and issuer.
    balancer = new RoundRobinProxy();
    await balancer.start();
    // Each console has its own address, named in both identity services' configuration before either starts;
    // a sign-in it starts may reach either identity service.
    const backendPorts = [await freePort(), await freePort()];
    const backendUrls = backendPorts.map((port) => `http://localhost:${port}`);
    const keyPrefix = testPrefix();
    const keyFile = path.join(dir, 'demo-keys.json');
    for (const backendPort of backendPorts) {
      demos.push(
        await startDemo({
          identityPort: 0,
          backendPort,
          log: quiet,
          adapter: redisTestAdapter({ keyPrefix }),
          // The first makes the key file, the second reads it.
          keys: (await sharedDemoKeys(keyFile, {})).keys,
          identityPublicUrl: balancer.url,
          peerBackendUrls: backendUrls,
        }),
      );
      balancer.targets.push(`http://localhost:${portOf(demos.at(-1)!.identity.server)}`);
    }
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await Promise.all(demos.map((demo) => demo.close()));
    await balancer?.close();
    await closeTestAdapters();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  afterEach(async function () {
    if (this.currentTest?.state !== 'failed' || !browser) return;
    for (const [index, page] of browser.context.pages().entries()) {
      await page.screenshot({ path: path.join(ARTIFACTS, `demo-instances-failure-${index}.png`), fullPage: true });
    }
  });

  it("alice acts as dave in the first console; the second's resource API honours the token, and honours Stop within a second", async () => {
    const [first, second] = demos as [Demo, Demo];
    const alice = new Person(browser!.page, first);
    await alice.signIn('alice', 'alice-password');
    await actAsDave(alice);

    const request = browser!.context.request;
    const token = await alice.actingToken();
    const answer = await customerAt(request, second, token);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect((answer.body as { profile: { name: string } }).profile.name).to.equal('Dave Doyle');

    // [the second's, the first's]: each still accepting the token a second after Stop would be a 200.
    expect(await pressStop(alice, request, [second, first])).to.deep.equal([401, 401]);
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
  });

  it("alice's console on the second instance works too: her sign-in carries over, and Stop there is honoured by the first", async () => {
    const [first, second] = demos as [Demo, Demo];
    const page = await browser!.context.newPage();
    page.on('pageerror', (error) => browser!.pageErrors.push(error.message));
    const alice = new Person(page, second);
    await alice.openConsole();
    await page.click('#sign-in');
    // One session at the common address: no password asked again.
    await alice.saysNoError(page.locator('#signed-in-user'));
    expect(page.url()).to.equal(`${second.backend.url}/`);
    await alice.ready();
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as alice');
    await actAsDave(alice);

    const request = browser!.context.request;
    expect(await pressStop(alice, request, [first, second])).to.deep.equal([401, 401]);
    await page.locator('#notice').waitFor({ state: 'visible' });
    await page.close();
  });

  it('had both identity services answer the browser, raised no script errors and sent nothing off this machine', () => {
    // The backends poll the revocation feed through the balancer too: only what the browser asked for counts here.
    const fromBrowser = balancer!.answered.filter(({ userAgent }) => userAgent.includes('Chrome'));
    expect([...new Set(fromBrowser.map(({ target }) => target))].sort()).to.deep.equal([...balancer!.targets].sort());
    expect(browser!.pageErrors).to.deep.equal([]);
    expect(browser!.offHost).to.deep.equal([]);
  });
});
