import type http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { APIRequestContext } from 'playwright-core';
import { startDemo, type Demo } from '../../demo/demo.js';
import { closeServer, listen, portOf } from '../../demo/http.js';
import { sharedDemoKeys } from '../../demo/keys.js';
import { assertRedisReachable, closeTestAdapters, redisTestAdapter, testPrefix } from '../support/adapter.js';
import { RoundRobinProxy } from '../support/round-robin.js';
import { ARTIFACTS, launch, type Browser } from './browser.js';
import { quiet } from './helpers.js';
import { Person } from './person.js';

/** How soon after Stop is pressed every instance's resource API refuses the token. */
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

/** Presses Stop and resolves how long `other`'s resource API went on accepting the token (its last status with it). */
async function stopHonouredBy(person: Person, other: Demo, request: APIRequestContext) {
  const token = await person.actingToken();
  expect((await customerAt(request, other, token)).status).to.equal(200);
  const pressed = Date.now();
  await person.page.getByRole('button', { name: 'Stop impersonating' }).click();
  let status = 200;
  while (status === 200 && Date.now() - pressed <= STOP_HONOURED_WITHIN) {
    status = (await customerAt(request, other, token)).status;
    if (status === 200) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { status, elapsed: Date.now() - pressed };
}

async function actAsBob(person: Person): Promise<void> {
  await person.impersonate('bob');
  await person.saysNoError(person.page.locator('#orders tbody tr').first());
  await person.page.getByRole('status').filter({ hasText: 'Acting as Bob Brown (bob)' }).waitFor();
  expect(await person.text('#signed-in-user')).to.equal('alice, acting as Bob Brown (bob)');
}

describe('demo: two instances on Redis behind one identity address, in headless Chromium', function () {
  this.timeout(60_000);
  const servers: http.Server[] = [];
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
    const pairs = [];
    for (let instance = 0; instance < 2; instance += 1) {
      const pair = { identity: await listen(0), backend: await listen(0) };
      servers.push(pair.identity, pair.backend);
      pairs.push(pair);
    }
    // Each console has its own address; a sign-in it starts may reach either identity service.
    const backendUrls = pairs.map(({ backend }) => `http://localhost:${portOf(backend)}`);
    const keyPrefix = testPrefix();
    const keyFile = path.join(dir, 'demo-keys.json');
    for (const pair of pairs) {
      demos.push(
        await startDemo({
          servers: pair,
          log: quiet,
          adapter: redisTestAdapter({ keyPrefix }),
          // The first makes the key file, the second reads it.
          keys: (await sharedDemoKeys(keyFile, {})).keys,
          identityPublicUrl: balancer.url,
          peerBackendUrls: backendUrls,
        }),
      );
    }
    balancer.targets = pairs.map(({ identity }) => `http://localhost:${portOf(identity)}`);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    await Promise.all(demos.map((demo) => demo.close()));
    await Promise.all(servers.map((server) => closeServer(server)));
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

  it("alice acts as bob in the first console; the second's resource API honours the token, and honours Stop within a second", async () => {
    const [first, second] = demos as [Demo, Demo];
    const alice = new Person(browser!.page, first);
    await alice.signIn('alice', 'alice-password');
    await actAsBob(alice);

    const request = browser!.context.request;
    const token = await alice.actingToken();
    const answer = await customerAt(request, second, token);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect((answer.body as { profile: { name: string } }).profile.name).to.equal('Bob Brown');

    const { status, elapsed } = await stopHonouredBy(alice, second, request);
    expect(status, `still accepted ${elapsed} ms after Stop`).to.equal(401);
    await alice.page.locator('#notice').waitFor({ state: 'visible' });
    expect(await alice.page.locator('#acting-banner').isHidden()).to.equal(true);
    expect((await customerAt(request, first, token)).status).to.equal(401);
  });

  it("alice's console on the second instance works too: her sign-in carries over, and Stop there is honoured by the first", async () => {
    const [first, second] = demos as [Demo, Demo];
    const page = await browser!.context.newPage();
    page.on('pageerror', (error) => browser!.pageErrors.push(error.message));
    const alice = new Person(page, second);
    await alice.openConsole();
    await page.click('#sign-in');
    // One session at the common address: no password asked again.
    await page.waitForURL(`${second.backend.url}/`);
    await alice.ready();
    expect(await alice.text('#signed-in-user')).to.contain('Signed in as alice');
    await actAsBob(alice);

    const request = browser!.context.request;
    const token = await alice.actingToken();
    expect((await customerAt(request, first, token)).status).to.equal(200);
    const { status, elapsed } = await stopHonouredBy(alice, first, request);
    expect(status, `still accepted ${elapsed} ms after Stop`).to.equal(401);
    await page.locator('#notice').waitFor({ state: 'visible' });
    await page.close();
  });

  it('had both identity services answer the browser, raised no script errors and sent nothing off this machine', () => {
    expect([...balancer!.served.keys()].sort()).to.deep.equal([...balancer!.targets].sort());
    expect(browser!.pageErrors).to.deep.equal([]);
    expect(browser!.offHost).to.deep.equal([]);
  });
});
