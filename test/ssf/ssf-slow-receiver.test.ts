/**
 * A receiver that never answers, beside healthy ones: it holds its own
 * deliveries and nothing else. Each stop reaches the healthy webhook, the
 * healthy push stream and the resource-server helper (polling a stream of its
 * own) within a second, however many of the slow receivers' deliveries hang;
 * and the helper never honours a stopped token for longer than maxStaleness,
 * even when the transmitter cannot deliver at all (it says so, and fails
 * closed).
 */
import { expect } from 'chai';
import { EVENTS, type WebhookOptions } from '../../lib/index.js';
import {
  createImpersonationVerifier,
  type ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { IN_FLIGHT_PER_SUBSCRIPTION } from '../../lib/webhooks/worker.js';
import { ADAPTERS } from '../support/adapters.js';
import { userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { API, type TestProvider } from '../support/provider.js';
import { POLL, PUSH, RECEIVERS, receiverToken, ssfRequest, startSsfProvider, STREAMS } from '../support/ssf.js';
import { scaled } from '../support/time.js';
import { startReceiver, webhookSecret, type Receiver } from '../support/webhook-receiver.js';

/** What a receiver that never answers may hold each delivery for: far beyond what the healthy ones are given. */
const RECEIVER_TIME_MS = scaled(8000);
/** "Within a second" on an idle machine; as long as the machine is slower on a busy one. */
const SECOND = scaled(1000);
const MAX_STALENESS_MS = SECOND;

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<ImpersonationTokenError | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return error as ImpersonationTokenError;
  }
}

/**
 * Verifies `token` again and again for `ms` after `stoppedAt`: resolves the
 * first refusal, and the last moment (ms after the stop) it was honoured.
 */
async function watch(verifier: ImpersonationVerifier, token: string, stoppedAt: number, ms: number) {
  let lastHonoured = -1;
  let first: ImpersonationTokenError | undefined;
  while (Date.now() - stoppedAt < ms) {
    const error = await refusal(verifier, token);
    if (error) first ??= error;
    else lastHonoured = Date.now() - stoppedAt;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { first, lastHonoured };
}

for (const kind of ADAPTERS) {
  describe(`a receiver that never answers, on the ${kind.name} store`, function () {
    this.timeout(120_000);
    const open: { close(): Promise<void> }[] = [];
    const verifiers: ImpersonationVerifier[] = [];
    afterEach(async () => {
      for (const verifier of verifiers.splice(0)) verifier.close();
      await Promise.all(open.splice(0).map((thing) => thing.close()));
    });

    async function receiver(answer: 'hold' | number): Promise<Receiver> {
      const started = await startReceiver();
      started.answer = () => (answer === 'hold' ? 'hold' : { status: answer });
      open.push(started);
      return started;
    }

    function helper(tp: TestProvider, endpoint: string): ImpersonationVerifier {
      const verifier = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        ssf: {
          endpoint,
          accessToken: () => receiverToken(tp, RECEIVERS.second),
          audience: RECEIVERS.second.client_id,
          clockSkew: 0,
        },
        refreshInterval: 100,
        maxStaleness: MAX_STALENESS_MS,
      });
      verifiers.push(verifier);
      return verifier;
    }

    it('delays its own deliveries only: every other stream, webhook and the helper get each stop within a second', async () => {
      const [slowHook, healthyHook, slowPush, healthyPush] = await Promise.all([
        receiver('hold'),
        receiver(204),
        receiver('hold'),
        receiver(202),
      ]);
      const subscription = (id: string, hooks: Receiver) => ({
        id,
        url: hooks.url,
        events: [EVENTS.sessionRevoked],
        secret: webhookSecret(id),
      });
      const webhooks: WebhookOptions = {
        subscriptions: [subscription('slow', slowHook), subscription('healthy', healthyHook)],
        pollInterval: 50,
        timeout: RECEIVER_TIME_MS,
      };
      const tp = await startSsfProvider(kind, {}, { webhooks });
      open.push(tp);
      const first = await receiverToken(tp);
      for (const hooks of [slowPush, healthyPush]) {
        const created = await ssfRequest(tp, 'POST', STREAMS, first, {
          delivery: { method: PUSH, endpoint_url: hooks.url },
        });
        expect(created.status, JSON.stringify(created.body)).to.equal(201);
      }
      const polled = await ssfRequest(tp, 'POST', STREAMS, await receiverToken(tp, RECEIVERS.second), {
        delivery: { method: POLL },
      });
      const verifier = helper(tp, (polled.body['delivery'] as { endpoint_url: string }).endpoint_url);
      await verifier.ready();

      const actor = await userAccessToken(tp, 'alice');
      const admin = await adminToken(tp);
      // More stops than a subscription may have deliveries under way: the slow ones fill their room.
      const stops = IN_FLIGHT_PER_SUBSCRIPTION + 2;
      for (let stop = 1; stop <= stops; stop += 1) {
        const { token, session } = await impersonate(tp, {
          actorToken: actor,
          subject: { userId: 'bob', context: { ticket: `SUP-${stop}`, reason: 'billing question' } },
        });
        expect((await verifier.verify(token)).sessionId).to.equal(session);
        expect((await revokeSession(tp, admin, session)).status).to.equal(204);
        const stoppedAt = Date.now();
        await healthyHook.waitFor(stop, 1000);
        await healthyPush.waitFor(stop, 1000);
        const { first: refused, lastHonoured } = await watch(verifier, token, stoppedAt, SECOND + 200);
        expect(refused?.code, `stop ${stop}: the helper refuses the token`).to.equal('session_revoked');
        expect(lastHonoured, `stop ${stop}: honoured ${lastHonoured} ms after the stop`).to.be.below(SECOND);
      }
      // Each slow receiver holds no more than its room, and never answered any.
      for (const hooks of [slowHook, slowPush]) {
        expect(hooks.deliveries.length).to.be.within(1, IN_FLIGHT_PER_SUBSCRIPTION);
        expect(hooks.acknowledged()).to.deep.equal([]);
      }
      expect(verifier.state.stale).to.equal(false);
    });

    it('fails closed when the transmitter cannot deliver: the helper never honours a stopped token past maxStaleness', async () => {
      // The only instance delivers nothing: each stop's SET stays in the outbox.
      const tp = await startSsfProvider(kind, {}, { deliverOutbox: false });
      open.push(tp);
      const polled = await ssfRequest(tp, 'POST', STREAMS, await receiverToken(tp, RECEIVERS.second), {
        delivery: { method: POLL },
      });
      const verifier = helper(tp, (polled.body['delivery'] as { endpoint_url: string }).endpoint_url);
      await verifier.ready();
      const { token, session } = await impersonate(tp, {
        actorToken: await userAccessToken(tp, 'alice'),
        subject: { userId: 'bob', context: { ticket: 'SUP-1', reason: 'billing question' } },
      });
      expect((await verifier.verify(token)).sessionId).to.equal(session);
      expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
      const stoppedAt = Date.now();
      const { first, lastHonoured } = await watch(verifier, token, stoppedAt, MAX_STALENESS_MS + scaled(1500));
      expect(lastHonoured, `honoured ${lastHonoured} ms after the stop`).to.be.below(MAX_STALENESS_MS);
      expect(first?.code).to.equal('revocations_unavailable');
      expect(first?.status).to.equal(503);
      expect(verifier.state.stale).to.equal(true);
    });
  });
}
