import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { CookieJar, follow, quiet, REQUEST_TIMEOUT } from './helpers.js';

const MAX = 20;

/**
 * The attacker is anonymous: they start sign-ins without credentials and never finish them.
 * They can fill the bound, and new sign-ins are refused while it is full; they cannot cancel
 * a sign-in someone else has in flight.
 */
describe('demo: sign-ins in progress are bounded, refused when full, never evicted', function () {
  this.timeout(20_000);
  let demo: Demo;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, backend: { pendingSignIns: { max: MAX } } });
  });
  after(async () => {
    await demo?.close();
  });

  const pages = [
    {
      name: '/web/login',
      kind: 'web' as const,
      user: 'alice',
      done: (html: string) => /<pre id="access-token">[^<]+<\/pre>/.test(html),
    },
    {
      name: '/account/login',
      kind: 'account' as const,
      user: 'bob',
      done: (html: string) => html.includes('Signed in as Bob Brown (bob)'),
    },
  ];

  for (const { name, kind, user, done } of pages) {
    it(`${name}: a flood fills the bound and is refused 503; a sign-in in flight still completes`, async () => {
      const other = kind === 'web' ? 'account' : 'web';
      const otherBefore = demo.backend.pendingSignIns[other];
      // Someone's sign-in, started before the flood: at the login form of the identity service.
      const jar = new CookieJar();
      const form = await follow(jar, `${demo.backend.url}${name}`);
      expect(form.url).to.match(/\/interaction\/[^/]+$/);

      const answers = [];
      for (let i = 0; i < 2 * MAX; i += 1) answers.push(await anonymousStart(demo, name));
      const kept = demo.backend.pendingSignIns;

      const signedIn = await follow(jar, `${form.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ login: user, password: `${user}-password` }),
      });
      const html = await signedIn.text();
      expect(signedIn.status, html).to.equal(200);
      expect(done(html), html).to.equal(true);

      expect(answers.filter((answer) => answer.status === 302)).to.have.length(MAX - 1);
      const refused = answers.filter((answer) => answer.status === 503);
      expect(refused).to.have.length(MAX + 1);
      expect(refused[0]!.text).to.contain('temporarily_unavailable: too many sign-ins are in progress');
      expect(kept[kind], 'what the flood keeps').to.equal(MAX);
      expect(kept[other], 'the other page keeps its own bound').to.equal(otherBefore);

      // The place it held is free again, and only that one.
      expect((await anonymousStart(demo, name)).status).to.equal(302);
      expect((await anonymousStart(demo, name)).status).to.equal(503);
    });
  }
});

describe('demo: sign-ins in progress expire, and free their places', function () {
  this.timeout(20_000);
  const TTL = 1000;
  let demo: Demo;

  before(async () => {
    demo = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      backend: { pendingSignIns: { max: 5, ttl: TTL } },
    });
  });
  after(async () => {
    await demo?.close();
  });

  it('a full bound accepts new sign-ins again once the ones that filled it expire', async () => {
    const answers = [];
    for (let i = 0; i < 6; i += 1) answers.push((await anonymousStart(demo, '/web/login')).status);
    expect(answers).to.deep.equal([302, 302, 302, 302, 302, 503]);
    await new Promise((resolve) => setTimeout(resolve, TTL + 100));
    expect(demo.backend.pendingSignIns.web).to.equal(0);
    expect((await anonymousStart(demo, '/web/login')).status).to.equal(302);
  });

  it('refuses a sign-in that comes back after it expired, and forgets it', async () => {
    const jar = new CookieJar();
    const form = await follow(jar, `${demo.backend.url}/web/login`);
    await new Promise((resolve) => setTimeout(resolve, TTL + 100));
    const late = await follow(jar, `${form.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ login: 'alice', password: 'alice-password' }),
    });
    expect(late.status).to.equal(400);
    expect(await late.text()).to.contain('this sign-in is unknown or expired');
    expect(demo.backend.pendingSignIns.web).to.equal(0);
  });
});

/** One sign-in started by a caller with no cookie and no credentials: its status, and the body of a refusal. */
async function anonymousStart(demo: Demo, path: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${demo.backend.url}${path}`, {
    redirect: 'manual',
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, text: response.status === 503 ? await response.text() : '' };
}
