import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { expect } from 'chai';
import {
  createImpersonation,
  EVENTS,
  TOKEN_EXCHANGE_GRANT,
  WEBHOOK_DEAD_LETTERED,
  WEBHOOK_DROPPED,
  WEBHOOK_GONE,
  type WebhookOptions,
} from '../../lib/index.js';
import { createMemoryAdapter } from '../../lib/index.js';
import { publicTokenId } from '../../lib/access-token.js';
import type { CommitOutcome, CommitWrite } from '../../lib/adapters/contracts/commit.js';
import { hasOutbox } from '../../lib/outbox/contract.js';
import { testPrefix } from '../support/adapter.js';
import { ADAPTERS, type AdapterKind } from '../support/adapters.js';
import { portOf, stopChildren } from '../support/children.js';
import { apiRequest, exchange, expectError, introspect, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, exchangeAsActor, impersonate, revokeSession, SESSIONS } from '../support/impersonations.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';
import { redisTestAdapter } from '../support/adapter.js';
import { CLIENTS, MANAGEMENT, OPAQUE_API, startProvider } from '../support/provider.js';
import { askForSubjectToken, newCustomer, requestIdOf, startApprovalProvider } from '../support/approvals.js';
import { approveRequest } from '../../lib/approvals/actions.js';
import { expectedSignature, startReceiver, webhookSecret, type Receiver } from '../support/webhook-receiver.js';
import { scaled } from '../support/time.js';

const SECRET = webhookSecret('crm');
/** Users the fixture provider knows, impersonated in turn. */
const SUBJECTS = ['bob', 'carol', 'admin'];
const SUBJECT = { userId: 'bob', context: { ticket: 'SUP-42', reason: 'billing question' } };

function webhooks(receiver: Receiver, more: Partial<WebhookOptions> = {}): WebhookOptions {
  return {
    subscriptions: [
      {
        id: 'crm',
        url: receiver.url,
        events: [EVENTS.exchangeSucceeded, EVENTS.sessionRevoked, EVENTS.sessionEnded],
        secret: SECRET,
      },
    ],
    pollInterval: 20,
    timeout: 1000,
    ...more,
  };
}

const parse = (body: string) => JSON.parse(body) as { type: string; timestamp: string; data: Record<string, unknown> };

for (const kind of ADAPTERS) {
  describe(`webhooks on the ${kind.name} store`, function () {
    this.timeout(60_000);
    const open: { close(): Promise<void> }[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((thing) => thing.close()));
    });

    async function provider(receiver: Receiver, more: Partial<WebhookOptions> = {}, adapter?: unknown) {
      const tp = await startProvider(
        { plugin: { webhooks: webhooks(receiver, more) }, ...(adapter ? { adapter: adapter as never } : {}) },
        kind,
      );
      open.push(tp);
      return tp;
    }

    async function receiver(): Promise<Receiver> {
      const started = await startReceiver();
      open.push(started);
      return started;
    }

    it('lists each subscription at zero while idle, on an instance that delivers and on one that does not', async () => {
      const hooks = await receiver();
      const idle = { subscriptions: { crm: { pending: 0, dead: 0, dropped: 0 } } };
      expect(await (await provider(hooks)).impersonation.webhooks().stats()).to.deep.include(idle);
      const viewing = await startProvider({ plugin: { webhooks: webhooks(hooks), deliverOutbox: false } }, kind);
      open.push(viewing);
      expect(await viewing.impersonation.webhooks().stats()).to.deep.include(idle);
    });

    it('tells a subscription that an impersonation started and stopped, in order, signed', async () => {
      const hooks = await receiver();
      const tp = await provider(hooks);
      const { token, session } = await impersonate(tp, {
        actorToken: await userAccessToken(tp, 'alice'),
        subject: SUBJECT,
      });
      expect((await revokeSession(tp, await adminToken(tp), session, { reason: 'done' })).status).to.equal(204);
      const [started, stopped] = await hooks.waitFor(2);
      expect(parse(started!.body).type).to.equal(EVENTS.exchangeSucceeded);
      expect(parse(stopped!.body).type).to.equal(EVENTS.sessionRevoked);
      const data = parse(started!.body).data;
      expect(data).to.include({ sessionId: session, subject: 'bob', actor: 'alice' });
      expect(data['context']).to.deep.equal(SUBJECT.context);
      expect(parse(stopped!.body).data).to.include({ sessionId: session, reason: 'done' });
      for (const delivery of [started!, stopped!]) {
        expect(delivery.headers['webhook-signature']).to.equal(expectedSignature(SECRET, delivery));
        expect(delivery.headers['webhook-id']).to.match(/^msg_/);
        expect(Number(delivery.headers['webhook-timestamp'])).to.be.closeTo(Date.now() / 1000, 30);
        expect(delivery.body).to.not.include(token);
      }
      // Settled just after the receiver answered.
      const deadline = Date.now() + 5000;
      while (((await tp.impersonation.webhooks().stats()).subscriptions['crm']?.pending ?? 0) > 0) {
        expect(Date.now()).to.be.below(deadline);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    });

    it('tells nothing of a delegation, started or stopped: the customer hears of the impersonation alone', async () => {
      const hooks = await receiver();
      const tp = await provider(hooks);
      const admin = await adminToken(tp);
      const sessionOf = async (token: string) => (await introspect(tp, token))['impersonation_session'] as string;
      // Opaque tokens: a delegation's subject token id would be the impersonation token's sha256 name.
      const { token, session } = await impersonate(tp, {
        actorToken: await userAccessToken(tp, 'alice'),
        resource: OPAQUE_API,
        scope: 'read',
        subject: SUBJECT,
      });
      const delegated = await exchange(tp, { subject_token: token, resource: OPAQUE_API }, CLIENTS.orders);
      expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
      const delegation = await sessionOf(delegated.body['access_token'] as string);
      // A delegation of bob's own token, stopped through the Management API.
      const own = await userAccessToken(tp, 'bob', { resource: OPAQUE_API, scope: 'openid read' });
      const ownDelegated = await exchange(tp, { subject_token: own, resource: OPAQUE_API }, CLIENTS.orders);
      const ownDelegation = await sessionOf(ownDelegated.body['access_token'] as string);
      expect((await revokeSession(tp, admin, ownDelegation)).status).to.equal(204);
      // The impersonation's stop ends its delegation (parent_session_stopped).
      expect((await revokeSession(tp, admin, session)).status).to.equal(204);
      expect((await apiRequest(tp, 'GET', `${SESSIONS}/${delegation}`, admin)).body).to.include({
        endReason: 'parent_session_stopped',
      });

      await hooks.waitFor(2);
      const deadline = Date.now() + 5000;
      while (((await tp.impersonation.webhooks().stats()).subscriptions['crm']?.pending ?? 0) > 0) {
        expect(Date.now()).to.be.below(deadline);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const delivered = hooks.deliveries.map((delivery) => parse(delivery.body));
      expect(delivered.map((delivery) => [delivery.type, delivery.data['sessionId']])).to.deep.equal([
        [EVENTS.exchangeSucceeded, session],
        [EVENTS.sessionRevoked, session],
      ]);
      expect(JSON.stringify(delivered)).to.not.include(publicTokenId('opaque', token));
    });

    it("tells a subscription of the customer's approvals: asked, approved, the grant it became, and a break-glass access", async () => {
      const hooks = await receiver();
      const { tp, deps, policy } = await startApprovalProvider({
        kind,
        plugin: {
          webhooks: {
            ...webhooks(hooks),
            subscriptions: [
              {
                id: 'customer-inbox',
                url: hooks.url,
                events: [
                  EVENTS.approvalRequested,
                  EVENTS.approvalApproved,
                  EVENTS.accessGrantCreated,
                  EVENTS.breakGlassUsed,
                ],
                secret: SECRET,
              },
            ],
          },
        },
        approvals: { breakGlassClients: [CLIENTS.oncall.client_id] },
      });
      open.push(tp);
      policy.answer = 'request';
      const customer = newCustomer();
      const context = { ticket: 'SUP-7', reason: 'cannot pay' };
      const asked = await askForSubjectToken(tp, {
        userId: customer,
        actorId: 'alice',
        clientId: CLIENTS.console.client_id,
        context,
      });
      const requestId = requestIdOf(asked);
      const { grant } = await approveRequest(deps, customer, requestId, { duration: 600 });
      const emergency = await askForSubjectToken(
        tp,
        {
          userId: customer,
          actorId: 'alice',
          clientId: CLIENTS.console.client_id,
          context,
          breakGlass: { reason: 'payments are down' },
        },
        CLIENTS.oncall,
      );
      expect(emergency.status, JSON.stringify(emergency.body)).to.equal(201);

      const deliveries = (await hooks.waitFor(4)).map((delivery) => parse(delivery.body));
      expect(deliveries.map((delivery) => delivery.type)).to.deep.equal([
        EVENTS.approvalRequested,
        EVENTS.approvalApproved,
        EVENTS.accessGrantCreated,
        EVENTS.breakGlassUsed,
      ]);
      for (const delivery of deliveries) expect(delivery.data['subject']).to.equal(customer);
      expect(deliveries[0]!.data).to.include({ approvalRequestId: requestId, actor: 'alice' });
      expect(deliveries[0]!.data['context']).to.deep.equal(context);
      expect(deliveries[1]!.data).to.include({ approvalRequestId: requestId, accessGrantId: grant.id });
      expect(deliveries[2]!.data).to.include({ accessGrantId: grant.id, approvalRequestId: requestId });
      expect(deliveries[3]!.data).to.include({ reason: 'payments are down' });
      expect(JSON.stringify(deliveries)).to.not.include(String(emergency.body['subjectToken']));
    });

    it('delivers everything once a receiver that was down is back, each event acknowledged once', async () => {
      const hooks = await receiver();
      let down = true;
      hooks.answer = () => (down ? { status: 503, headers: { 'retry-after': '0' } } : { status: 204 });
      const tp = await provider(hooks);
      const actorToken = await userAccessToken(tp, 'alice');
      for (let i = 0; i < 3; i++) await impersonate(tp, { actorToken, subject: { userId: SUBJECTS[i % 3]! } });
      while (hooks.deliveries.length < 6) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(hooks.acknowledged()).to.have.length(0);
      down = false;
      const acknowledged = await hooks.waitFor(3);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const ids = hooks.acknowledged().map((d) => d.headers['webhook-id']);
      expect(ids).to.have.length(3);
      expect(new Set(ids).size).to.equal(3);
      expect(acknowledged.map((d) => parse(d.body).data['subject']).sort()).to.deep.equal([...SUBJECTS].sort());
    });

    it('two instances on one store deliver each event once', async () => {
      const hooks = await receiver();
      const Adapter = await kind.open();
      const first = await provider(hooks, {}, Adapter);
      const second = await provider(hooks, {}, Adapter);
      const actorToken = await userAccessToken(first, 'alice');
      for (let i = 0; i < 6; i++) {
        await impersonate(i % 2 ? first : second, { actorToken, subject: { userId: SUBJECTS[i % 3]! } });
      }
      await hooks.waitFor(6);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(hooks.deliveries).to.have.length(6);
      expect(new Set(hooks.deliveries.map((d) => d.headers['webhook-id'])).size).to.equal(6);
    });

    it('an instance with deliverOutbox: false writes notifications and delivers none; another on the store delivers them', async () => {
      const hooks = await receiver();
      const Adapter = await kind.open();
      const serving = await startProvider(
        { plugin: { webhooks: webhooks(hooks), deliverOutbox: false }, adapter: Adapter as never },
        kind,
      );
      open.push(serving);
      await impersonate(serving, { actorToken: await userAccessToken(serving, 'alice'), subject: SUBJECT });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(hooks.deliveries).to.have.length(0);
      expect((await serving.impersonation.webhooks().stats()).subscriptions['crm']).to.include({ pending: 1 });
      const started = Date.now();
      await provider(hooks, {}, Adapter);
      await hooks.waitFor(1);
      expect(Date.now() - started).to.be.below(scaled(1000));
      expect(parse(hooks.deliveries[0]!.body).type).to.equal(EVENTS.exchangeSucceeded);
    });

    it('drops and counts what comes past the bound, and says so', async () => {
      const hooks = await receiver();
      hooks.answer = () => 'hold';
      const tp = await provider(hooks, { maxPending: 1 });
      const drops: unknown[] = [];
      tp.provider.on(WEBHOOK_DROPPED as never, (notice: unknown) => drops.push(notice));
      const actorToken = await userAccessToken(tp, 'alice');
      for (let i = 0; i < 3; i++) await impersonate(tp, { actorToken, subject: { userId: SUBJECTS[i % 3]! } });
      expect(drops).to.deep.equal([
        { subscription: 'crm', type: EVENTS.exchangeSucceeded },
        { subscription: 'crm', type: EVENTS.exchangeSucceeded },
      ]);
      expect((await tp.impersonation.webhooks().stats()).subscriptions['crm']).to.deep.equal({
        pending: 1,
        dead: 0,
        dropped: 2,
      });
    });

    it('dead-letters an entry past its attempts, and stops at 410 Gone', async () => {
      const hooks = await receiver();
      hooks.answer = () => ({ status: 500, headers: { 'retry-after': '0' } });
      const tp = await provider(hooks, { maxAttempts: 2 });
      const notices: unknown[] = [];
      tp.provider.on(WEBHOOK_DEAD_LETTERED as never, (notice: unknown) => notices.push(notice));
      tp.provider.on(WEBHOOK_GONE as never, (notice: unknown) => notices.push(notice));
      const actorToken = await userAccessToken(tp, 'alice');
      await impersonate(tp, { actorToken, subject: SUBJECT });
      while (!notices.length) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(notices[0]).to.include({ subscription: 'crm', reason: 'attempts', attempts: 2 });
      const [letter] = await tp.impersonation.webhooks().deadLetters();
      expect(letter).to.include({ subscription: 'crm', subject: 'bob', reason: 'attempts' });
      hooks.answer = () => ({ status: 410 });
      await impersonate(tp, { actorToken, subject: SUBJECT });
      while (notices.length < 3) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(notices.slice(1)).to.deep.include({ subscription: 'crm' });
      expect((await tp.impersonation.webhooks().stats()).subscriptions['crm']).to.include({ pending: 0, dead: 2 });
    });

    it('redelivers, once its lease ran out, what an instance that died was delivering', async function () {
      const hooks = await receiver();
      const Adapter = await sharedStore(kind);
      const child = kind.id === 'memory' ? undefined : await deliveryProcess(Adapter.env, hooks);
      if (!child) {
        // One process: the instance that dies is a claim that is never settled.
        const outbox = new Adapter.Adapter('ImpersonationOutbox');
        if (!hasOutbox(outbox)) throw new Error('no outbox');
        const tp = await provider(hooks, { pollInterval: 60_000 }, Adapter.Adapter);
        await tp.impersonation.webhooks().stop();
        await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
        expect(await outbox.outbox().claim(10, 1000, Date.now(), 0)).to.have.length(1);
      } else {
        hooks.answer = () => 'hold';
        // A provider enqueues without delivering; the child process delivers, and is killed mid-delivery.
        await enqueueThrough(kind, Adapter.Adapter, hooks);
        await hooks.held();
        child.kill('SIGKILL');
        await once(child, 'exit');
        hooks.answer = () => ({ status: 204 });
      }
      const started = Date.now();
      await provider(hooks, {}, Adapter.Adapter);
      const [delivered] = await hooks.waitFor(1);
      expect(parse(delivered!.body).type).to.equal(EVENTS.exchangeSucceeded);
      // Not before the lease ran out: the receiver saw the entry twice, with one id (at least once).
      if (child) {
        expect(Date.now() - started).to.be.greaterThan(1000);
        expect(new Set(hooks.deliveries.map((d) => d.headers['webhook-id'])).size).to.equal(1);
        expect(hooks.deliveries).to.have.length(2);
      }
    });
  });
}

describe('webhooks: the store cannot take the notification of an exchange', () => {
  // The real memory adapter and outbox underneath; a commit that carries notifications fails, on demand.
  let failNotifyingCommits = false;
  const Memory = createMemoryAdapter();
  class NotifyingCommitsFail extends Memory {
    override commitOnce(write: CommitWrite): Promise<CommitOutcome> {
      if (failNotifyingCommits && write.outbox?.entries.length) return Promise.reject(new Error('store unreachable'));
      return super.commitOnce(write);
    }
  }

  it('refuses the exchange: 500, no live token, no session, nothing burned, nothing delivered; then one notification', async () => {
    const hooks = await startReceiver();
    const tp = await startProvider({ adapter: NotifyingCommitsFail, plugin: { webhooks: webhooks(hooks) } });
    try {
      const actorToken = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp, SUBJECT);
      const saved: string[] = [];
      const destroyed: string[] = [];
      const exchanged = (token: { gty?: string }) => token.gty === TOKEN_EXCHANGE_GRANT;
      tp.provider.on('access_token.saved', (token: { jti: string; gty?: string }) => {
        if (exchanged(token)) saved.push(token.jti);
      });
      tp.provider.on('access_token.destroyed', (token: { jti: string; gty?: string }) => {
        if (exchanged(token)) destroyed.push(token.jti);
      });
      failNotifyingCommits = true;
      const refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: OPAQUE_API });
      failNotifyingCommits = false;
      expectError(refused, 500, 'server_error');
      expect(refused.body).to.not.have.property('access_token');
      expect(saved, 'the opaque token was written, then destroyed').to.have.length(1);
      expect(destroyed).to.deep.equal(saved);
      const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, await adminToken(tp));
      expect(listed.body).to.deep.equal({ items: [], nextCursor: null });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(hooks.deliveries).to.deep.equal([]);
      expect((await tp.impersonation.webhooks().stats()).subscriptions['crm']?.pending ?? 0).to.equal(0);

      // The notification and the exchange are one commit: the same subject token goes through, notified once.
      const issued = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: OPAQUE_API });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      const [delivered] = await hooks.waitFor(1);
      expect(parse(delivered!.body).type).to.equal(EVENTS.exchangeSucceeded);
    } finally {
      failNotifyingCommits = false;
      await tp.close();
      await hooks.close();
    }
  });
});

describe('webhooks: the options', () => {
  const base = { managementResource: MANAGEMENT };
  const subscription = { id: 'crm', url: 'https://crm.example/hooks', events: [EVENTS.sessionRevoked], secret: SECRET };

  it('refuses an unknown option, naming it', () => {
    expect(() =>
      createImpersonation({ ...base, webhooks: { subscriptions: [subscription], maxPendng: 5 } as never }),
    ).to.throw(TypeError, 'option "webhooks.maxPendng" is unknown; did you mean "webhooks.maxPending"?');
  });

  it('refuses a deliverOutbox that is not a boolean', () => {
    expect(() => createImpersonation({ ...base, deliverOutbox: 'no' as never })).to.throw(TypeError, 'deliverOutbox');
  });

  it('refuses plain http except on a loopback address', () => {
    for (const url of ['http://crm.example/hooks', 'ftp://127.0.0.1/', 'https://user:pw@crm.example/']) {
      expect(() => createImpersonation({ ...base, webhooks: { subscriptions: [{ ...subscription, url }] } })).to.throw(
        TypeError,
        'webhooks.subscriptions[0].url',
      );
    }
    expect(() =>
      createImpersonation({ ...base, webhooks: { subscriptions: [{ ...subscription, url: 'http://[::1]:8080/' }] } }),
    ).to.not.throw();
  });

  it('refuses a secret not in the whsec_ form without repeating it', () => {
    for (const secret of ['not-a-secret-value-at-all', 'whsec_c2hvcnQ=', `whsec_${'A'.repeat(200)}`]) {
      let message = '';
      try {
        createImpersonation({ ...base, webhooks: { subscriptions: [{ ...subscription, secret }] } });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).to.include('webhooks.subscriptions[0].secret');
      expect(message).to.not.include(secret.slice(6));
    }
  });

  it('refuses an event that is no webhook event (a refusal) and duplicate ids', () => {
    expect(() =>
      createImpersonation({
        ...base,
        webhooks: { subscriptions: [{ ...subscription, events: [EVENTS.exchangeRefused as never] }] },
      }),
    ).to.throw(TypeError, 'webhooks.subscriptions[0].events');
    expect(() => createImpersonation({ ...base, webhooks: { subscriptions: [subscription, subscription] } })).to.throw(
      TypeError,
      'webhooks.subscriptions[1].id',
    );
  });

  it('signs as the standardwebhooks package verifies', async () => {
    const require = createRequire(import.meta.url);
    const { Webhook } = require('standardwebhooks') as {
      Webhook: new (secret: string) => { verify(body: string, headers: Record<string, string>): unknown };
    };
    const hooks = await startReceiver();
    const tp = await startProvider({ plugin: { webhooks: webhooks(hooks) } });
    try {
      await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      const [delivery] = await hooks.waitFor(1);
      const headers = Object.fromEntries(Object.entries(delivery!.headers).map(([k, v]) => [k, String(v)]));
      expect(new Webhook(SECRET).verify(delivery!.body, headers)).to.deep.equal(JSON.parse(delivery!.body));
      expect(() => new Webhook(webhookSecret('other')).verify(delivery!.body, headers)).to.throw();
    } finally {
      await tp.close();
      await hooks.close();
    }
  });
});

interface Shared {
  Adapter: new (name: string) => object;
  env: Record<string, string>;
}

/** A store a child process can open too. */
async function sharedStore(kind: AdapterKind): Promise<Shared> {
  if (kind.id === 'redis') {
    const keyPrefix = testPrefix();
    return { Adapter: redisTestAdapter({ keyPrefix }), env: { STORE: 'redis', KEY_PREFIX: keyPrefix } };
  }
  if (kind.id === 'postgres') {
    const table = testTable();
    const Adapter = await postgresTestAdapter({ table });
    return { Adapter, env: { STORE: 'postgres', STORE_SCHEMA: await postgresRunSchema(), STORE_TABLE: table } };
  }
  return { Adapter: await kind.open(), env: {} };
}

async function deliveryProcess(env: Record<string, string>, hooks: Receiver) {
  const child = spawn(process.execPath, [new URL('./delivery-process.js', import.meta.url).pathname], {
    env: { ...process.env, ...env, WEBHOOKS: JSON.stringify(webhooks(hooks)) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  await portOf(child);
  after(() => stopChildren([child]));
  return child;
}

/** An impersonation on a provider of the shared store whose own delivery is stopped at once. */
async function enqueueThrough(kind: AdapterKind, Adapter: unknown, hooks: Receiver): Promise<void> {
  const tp = await startProvider({ adapter: Adapter as never, plugin: { webhooks: webhooks(hooks) } }, kind);
  await tp.impersonation.webhooks().stop();
  await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
  await tp.close();
}
