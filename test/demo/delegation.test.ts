import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { exchange, REQUEST_TIMEOUT, requestImpersonation, signIn } from './helpers.js';

describe('demo: the resource API calls the orders service on the customer’s behalf (delegation)', function () {
  this.timeout(20_000);
  let demo: Demo;
  let alice: string;
  const lines: string[] = [];

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: (line) => lines.push(line) });
    alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
  });
  after(() => demo?.close());

  async function callOrders(token: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${demo.backend.url}/api/me/orders-service`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it('shows the act chain: the resource API acting for alice acting as dave; stopping the impersonation stops it', async () => {
    const subject = (await requestImpersonation(demo, alice, { userId: 'dave', reason: 'Orders', ticketId: 'T-9' }))
      .body['subjectToken'] as string;
    const exchanged = await exchange(demo, subject, alice);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const token = exchanged.body['access_token'] as string;

    const called = await callOrders(token);
    expect(called.status, JSON.stringify(called.body)).to.equal(200);
    const orders = called.body['ordersService'] as Record<string, unknown>;
    expect(orders).to.include({ subject: 'dave', scope: 'profile:read' });
    expect(orders['actors']).to.deep.equal(['resource-api', 'alice']);
    expect(orders['message']).to.equal('resource-api for alice for dave');

    const sessionId = decodeJwt(token)['impersonation_session'] as string;
    const stopped = await fetch(`${demo.backend.url}/api/stop-impersonation`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(stopped.status).to.be.within(200, 204);
    // Refused at once: by the identity service, which delegates nothing from a stopped session (403), or,
    // once the feed was read, by the resource API itself (401).
    let status = 200;
    for (let waited = 0; status === 200 && waited < 3000; waited += 100) {
      status = (await callOrders(token)).status;
      if (status === 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(status).to.be.oneOf([401, 403]);
  });
});
