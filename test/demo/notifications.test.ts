import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { EVENTS } from '../../lib/index.js';
import { webhookSecret } from '../support/webhook-receiver.js';
import { accountSignIn, exchange, REQUEST_TIMEOUT, requestImpersonation, signIn } from './helpers.js';
import { scaled } from '../support/time.js';

const SECRET = webhookSecret('demo-notifications');
const RECEIVER = '/api/webhooks/impersonation';

const { Webhook } = createRequire(import.meta.url)('standardwebhooks') as {
  Webhook: new (secret: string) => { sign(id: string, at: Date, body: string): string };
};

/** A payload as the plugin's webhooks carry it. */
function payload(type: string, subject: string, ticketId = 'T-7', at = new Date()): string {
  return JSON.stringify({
    type,
    timestamp: at.toISOString(),
    data: { sessionId: 'imp_x', subject, actor: 'alice', clientId: 'support-console', context: { ticketId } },
  });
}

interface Delivery {
  id?: string;
  timestamp?: string;
  signature?: string;
  body: string;
}

/** A delivery signed with `secret` by the standardwebhooks package, at `at`. */
function signed(body: string, { secret = SECRET, at = new Date(), id = `msg_${randomUUID()}` } = {}): Delivery {
  return {
    id,
    timestamp: String(Math.floor(at.getTime() / 1000)),
    signature: new Webhook(secret).sign(id, at, body),
    body,
  };
}

async function deliver(demo: Demo, delivery: Delivery): Promise<{ status: number; body: string }> {
  const response = await fetch(`${demo.backend.url}${RECEIVER}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(delivery.id === undefined ? {} : { 'webhook-id': delivery.id }),
      ...(delivery.timestamp === undefined ? {} : { 'webhook-timestamp': delivery.timestamp }),
      ...(delivery.signature === undefined ? {} : { 'webhook-signature': delivery.signature }),
    },
    body: delivery.body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  return { status: response.status, body: await response.text() };
}

/** The notifications the customer's account page shows, newest first. */
async function notificationsOf(demo: Demo, customer: string): Promise<string[]> {
  const { html } = await accountSignIn(demo.backend.url, customer);
  const list = /<ul class="items" id="notifications">([\s\S]*?)<\/ul>/.exec(html)?.[1] ?? '';
  return [...list.matchAll(/<li>([^<]*)<\/li>/g)].map((match) => match[1]!);
}

/** Resolves with the customer's notifications once there are `count`; fails after `ms`. */
async function notified(demo: Demo, customer: string, count: number, ms = 5000): Promise<string[]> {
  const deadline = Date.now() + ms;
  for (;;) {
    const shown = await notificationsOf(demo, customer);
    if (shown.length >= count) return shown;
    if (Date.now() > deadline) throw new Error(`${customer} has ${shown.length} notifications, not ${count}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("demo: the customers' notifications, fed by the identity service's webhooks", function () {
  this.timeout(30_000);
  let demo: Demo;
  const lines: string[] = [];

  before(async () => {
    demo = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: (line) => lines.push(line),
      webhookSecret: SECRET,
      backend: { notificationLimits: { perCustomer: 3, maxSeen: 6 } },
    });
  });
  after(() => demo?.close());

  it('dave is told within seconds when alice starts acting as him, and when she stops', async () => {
    expect(await notificationsOf(demo, 'dave')).to.deep.equal([]);
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const asked = await requestImpersonation(demo, alice, { userId: 'dave', reason: 'Invoices', ticketId: 'T-1234' });
    const started = Date.now();
    const exchanged = await exchange(demo, asked.body['subjectToken'] as string, alice);
    expect(exchanged.status).to.equal(200);
    const [first] = await notified(demo, 'dave', 1);
    expect(Date.now() - started, 'within seconds').to.be.below(scaled(5000));
    expect(first).to.match(
      /^Alice from support started acting as you \(ticket T-1234\) at \d\d:\d\d UTC on \d{1,2} \w+ 20\d\d$/,
    );

    const sessionId = decodeJwt(exchanged.body['access_token'] as string)['impersonation_session'] as string;
    const stopped = await fetch(`${demo.backend.url}/api/stop-impersonation`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(stopped.status).to.equal(204);
    const [latest, earlier] = await notified(demo, 'dave', 2);
    expect(latest).to.match(/^Alice from support stopped acting as you \(ticket T-1234\) at /);
    expect(earlier).to.equal(first);
    // Another customer's page shows none of dave's.
    expect(await notificationsOf(demo, 'bob')).to.deep.equal([]);
  });

  it('keeps a delivery signed as Standard Webhooks signs it, with the secret the identity service was given', async () => {
    const answer = await deliver(demo, signed(payload(EVENTS.exchangeSucceeded, 'carol', 'T-SIGNED')));
    expect(answer.status).to.equal(204);
    expect((await notificationsOf(demo, 'carol'))[0]).to.match(
      /^Alice from support started acting as you \(ticket T-SIGNED\)/,
    );
  });

  it('refuses a delivery without its headers, with another signature, or a body changed, and keeps nothing of it', async () => {
    const body = payload(EVENTS.exchangeSucceeded, 'carol', 'T-FORGED');
    const good = signed(body);
    const cases: Array<[string, Delivery, number]> = [
      ['no webhook-id', { ...good, id: undefined }, 400],
      ['no webhook-timestamp', { ...good, timestamp: undefined }, 400],
      ['no webhook-signature', { ...good, signature: undefined }, 400],
      ['a malformed timestamp', { ...good, timestamp: '12e3' }, 400],
      ['another secret', signed(body, { secret: webhookSecret('other') }), 401],
      ['a body changed after signing', { ...good, body: body.replace('T-FORGED', 'T-CHANGED') }, 401],
      ['another id than the one signed', { ...good, id: `msg_${randomUUID()}` }, 401],
      ['another timestamp than the one signed', { ...good, timestamp: String(Number(good.timestamp) + 1) }, 401],
      ['a signature of another version', { ...good, signature: good.signature!.replace(/^v1,/, 'v2,') }, 401],
      ['a signature cut short', { ...good, signature: good.signature!.slice(0, -8) }, 401],
    ];
    for (const [what, delivery, status] of cases) {
      expect((await deliver(demo, delivery)).status, what).to.equal(status);
    }
    expect(await notificationsOf(demo, 'carol')).to.not.satisfy((shown: string[]) =>
      shown.some((text) => text.includes('T-FORGED') || text.includes('T-CHANGED')),
    );
    // One good signature among others is enough, as Standard Webhooks allows (a secret being rotated).
    const rotated = signed(payload(EVENTS.sessionRevoked, 'carol', 'T-ROTATED'));
    const other = signed(rotated.body, {
      secret: webhookSecret('old'),
      id: rotated.id!,
      at: new Date(Number(rotated.timestamp) * 1000),
    });
    expect((await deliver(demo, { ...rotated, signature: `${other.signature} ${rotated.signature}` })).status).to.equal(
      204,
    );
    expect((await notificationsOf(demo, 'carol'))[0]).to.contain('T-ROTATED');
    expect(lines.filter((line) => line === '[backend] webhook refused: its signature does not match')).to.have.length(
      6,
    );
  });

  it('refuses a delivery signed too long ago or ahead, so a captured one cannot be replayed later', async () => {
    for (const [what, offset] of [
      ['ten minutes ago', -600_000],
      ['ten minutes ahead', 600_000],
    ] as const) {
      const at = new Date(Date.now() + offset);
      const answer = await deliver(demo, signed(payload(EVENTS.exchangeSucceeded, 'carol', 'T-STALE', at), { at }));
      expect(answer.status, what).to.equal(401);
      expect(JSON.parse(answer.body)).to.deep.equal({
        error: 'invalid_signature',
        error_description: 'the timestamp is too far from now',
      });
    }
    expect((await notificationsOf(demo, 'carol')).some((text) => text.includes('T-STALE'))).to.equal(false);
    // Within the tolerance (five minutes), a delivery is late, not refused.
    const late = new Date(Date.now() - 120_000);
    expect(
      (await deliver(demo, signed(payload(EVENTS.sessionEnded, 'carol', 'T-LATE', late), { at: late }))).status,
    ).to.equal(204);
  });

  it('keeps a delivery sent again (a replay, or the sender delivering at least once) only once, and acknowledges it', async () => {
    // Alice's own page, as a customer of the demo like any other.
    const first = signed(payload(EVENTS.exchangeSucceeded, 'alice', 'T-ONCE'));
    expect((await deliver(demo, first)).status).to.equal(204);
    expect((await deliver(demo, first)).status).to.equal(204);
    // Signed again later by the sender, with the same id: still the same delivery.
    const again = signed(first.body, { id: first.id!, at: new Date(Date.now() + 2000) });
    expect((await deliver(demo, again)).status).to.equal(204);
    expect(await notificationsOf(demo, 'alice')).to.have.length(1);
    expect(
      lines.filter((line) => line === `[backend] webhook ${first.id} was delivered before: not kept again`),
    ).to.have.length(2);
  });

  it('keeps only the newest notifications of a customer, and a bounded number of ids', async () => {
    const deliveries = ['T-1', 'T-2', 'T-3', 'T-4', 'T-5', 'T-6', 'T-7'].map((ticket, index) =>
      signed(payload(EVENTS.exchangeSucceeded, 'bob', ticket, new Date(Date.now() - (7 - index) * 1000))),
    );
    for (const delivery of deliveries) expect((await deliver(demo, delivery)).status).to.equal(204);
    const shown = await notificationsOf(demo, 'bob');
    expect(shown.map((text) => /ticket (T-\d)/.exec(text)?.[1])).to.deep.equal(['T-7', 'T-6', 'T-5']);
    // Past the bound of ids kept (six here), the oldest is forgotten: memory stays bounded.
    expect((await deliver(demo, deliveries[0]!)).status).to.equal(204);
    expect(lines.at(-1)).to.match(/^\[backend\] notification for bob: /);
    expect(await notificationsOf(demo, 'bob')).to.have.length(3);
  });

  it('refuses a body that is not JSON or too large, and ignores an event the customer is not told of', async () => {
    expect((await deliver(demo, signed('not json'))).status).to.equal(400);
    expect((await deliver(demo, signed(JSON.stringify({ type: EVENTS.exchangeSucceeded, data: {} })))).status).to.equal(
      400,
    );
    expect((await deliver(demo, signed(`"${'x'.repeat(70_000)}"`))).status).to.equal(413);
    const before = await notificationsOf(demo, 'dave');
    const other = signed(payload('impersonation.subject_token.created', 'dave'));
    expect((await deliver(demo, other)).status).to.equal(204);
    expect(await notificationsOf(demo, 'dave')).to.deep.equal(before);
  });

  it('logs no secret: neither the signing secret nor a signature', () => {
    const text = lines.join('\n');
    expect(text).to.not.contain(SECRET.slice('whsec_'.length));
    expect(text).to.not.contain('v1,');
  });
});
