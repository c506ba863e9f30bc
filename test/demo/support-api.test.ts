import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { exchange, quiet, REQUEST_TIMEOUT, requestImpersonation, signIn } from './helpers.js';
import { scaled } from '../support/time.js';

/** A customer who needs no approval. */
const DAVE = { userId: 'dave', reason: 'Cannot see the invoices', ticketId: 'T-1234' };

describe("demo: the support product's API (stop, status, the customer's data)", function () {
  this.timeout(20_000);
  let demo: Demo;
  let alice: string;
  let bob: string;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    bob = await signIn(demo, { login: 'bob', password: 'bob-password' });
  });
  after(() => demo?.close());

  async function call(
    path: string,
    token: string | undefined,
    init: { method?: string; body?: unknown } = {},
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${demo.backend.url}${path}`, {
      method: init.method ?? 'GET',
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(init.body === undefined
        ? {}
        : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  async function impersonation(
    access: 'read' | 'edit' = 'read',
    scope?: string,
  ): Promise<{ token: string; sessionId: string }> {
    const subject = (await requestImpersonation(demo, alice, { ...DAVE, access })).body['subjectToken'] as string;
    const exchanged = await exchange(demo, subject, alice, undefined, {}, scope);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const token = exchanged.body['access_token'] as string;
    return { token, sessionId: decodeJwt(token)['impersonation_session'] as string };
  }

  it("serves the customer's profile, orders and invoices to profile:read, and refuses a change without profile:write", async () => {
    const { token } = await impersonation();
    const read = await call('/api/customer', token);
    expect(read.status).to.equal(200);
    expect(read.body).to.have.keys('profile', 'orders', 'invoices');
    expect((read.body['profile'] as { name: string }).name).to.equal('Dave Doyle');
    const change = await call('/api/customer/shipping-address', token, {
      method: 'PUT',
      body: { line1: '1 A St', city: 'B', postcode: 'C', country: 'D' },
    });
    expect(change).to.deep.include({
      status: 403,
      body: { error: 'insufficient_scope', error_description: 'this needs the profile:write scope' },
    });
    expect((await call('/api/customer', undefined)).status).to.equal(401);
  });

  it('narrows an exchange that asks for profile:write to reading, unless the impersonation was asked for editing', async () => {
    const narrowed = await impersonation('read', 'profile:read profile:write');
    expect(decodeJwt(narrowed.token)['scope']).to.equal('profile:read');
    const edit = await impersonation('edit', 'profile:read profile:write');
    expect(decodeJwt(edit.token)['scope']).to.equal('profile:read profile:write');
    const changed = await call('/api/customer/shipping-address', edit.token, {
      method: 'PUT',
      body: { line1: '7 Quay Road', city: 'Bath', postcode: 'BA1 1AA', country: 'United Kingdom' },
    });
    expect(changed.status).to.equal(200);
    expect((changed.body['shippingAddress'] as { city: string }).city).to.equal('Bath');
  });

  it('answers a malformed change with 400 and changes nothing', async () => {
    const { token } = await impersonation('edit', 'profile:read profile:write');
    const before = (await call('/api/customer', token)).body['profile'];
    for (const body of [
      { line1: '1 A St' },
      { line1: '', city: 'B', postcode: 'C', country: 'D' },
      { line1: 'x'.repeat(201), city: 'B', postcode: 'C', country: 'D' },
      { line1: '1', city: 'B', postcode: 'C', country: 'D', admin: true },
      [1],
      'not json',
    ]) {
      const answer = await call('/api/customer/shipping-address', token, { method: 'PUT', body });
      expect(answer.status, JSON.stringify(body)).to.equal(400);
      expect(answer.body['error']).to.equal('invalid_request');
      expect(answer.body['error_description']).to.be.a('string');
    }
    expect((await call('/api/customer', token)).body['profile']).to.deep.equal(before);
  });

  it("stops only the engineer's own impersonation, and says afterwards who stopped it", async () => {
    const { token, sessionId } = await impersonation();
    expect((await call(`/api/impersonation-status?sessionId=${sessionId}`, alice)).body).to.include({
      state: 'active',
    });
    // Not support staff, not a session id, not one of hers, no token: refused, and nothing is revoked.
    expect((await call('/api/stop-impersonation', bob, { method: 'POST', body: { sessionId } })).status).to.equal(403);
    expect(
      await call('/api/stop-impersonation', alice, { method: 'POST', body: { sessionId: 'nope' } }),
    ).to.deep.include({
      status: 400,
      body: { error: 'invalid_request', error_description: 'sessionId is not an impersonation session id' },
    });
    expect(
      (
        await call('/api/stop-impersonation', alice, {
          method: 'POST',
          body: { sessionId: 'imp_unknownunknownunknow' },
        })
      ).status,
    ).to.equal(404);
    expect((await call('/api/stop-impersonation', undefined, { method: 'POST', body: { sessionId } })).status).to.equal(
      401,
    );
    expect((await call('/api/customer', token)).status).to.equal(200);

    expect((await call('/api/stop-impersonation', alice, { method: 'POST', body: { sessionId } })).status).to.equal(
      204,
    );
    expect((await call(`/api/impersonation-status?sessionId=${sessionId}`, alice)).body).to.include({
      state: 'revoked',
      stoppedBy: 'Alice Adams',
    });
    // Stopping it again changes nothing.
    expect((await call('/api/stop-impersonation', alice, { method: 'POST', body: { sessionId } })).status).to.equal(
      204,
    );
    const started = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - started < scaled(1500)) {
      status = (await call('/api/customer', token)).status;
      if (status === 200) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).to.equal(401);
  });

  it('accepts access read or edit only', async () => {
    const answer = await requestImpersonation(demo, alice, { ...DAVE, access: 'admin' });
    expect(answer.status).to.equal(400);
    expect(answer.body['error_description']).to.equal('access must be read or edit');
  });
});
