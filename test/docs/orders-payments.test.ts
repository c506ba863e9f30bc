/**
 * docs/token-exchange.md's orders → payments example, as it is written: the
 * page shows docs/examples/orders-payments.ts whole, and this runs it (the
 * package resolved to its own dist/), signing a user in as the front end's
 * browser would.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { ORDERS, PAYMENTS, startOrdersPayments, type OrdersPayments } from '../../docs/examples/orders-payments.js';

const root = new URL('../../../', import.meta.url);
const CALLBACK = 'http://127.0.0.1/orders/callback';
const SECRET = 'orders-secret';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

/** A JWT's claims, unverified: the services verified it. */
function decodeJwt(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/** bob's sign-in at the front end (authorization code with PKCE, oidc-provider's development interactions). */
async function signIn(issuer: string, scope: string): Promise<string> {
  const cookies = new Map<string, string>();
  const send = async (url: string, form?: Record<string, string>) => {
    const response = await fetch(new URL(url, issuer), {
      method: form ? 'POST' : 'GET',
      headers: { cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join('; ') },
      ...(form ? { body: new URLSearchParams(form) } : {}),
      redirect: 'manual',
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const [name, value] = pair!.split('=');
      cookies.set(name!, value ?? '');
    }
    await response.arrayBuffer();
    return response.headers.get('location') ?? '';
  };
  const verifier = randomBytes(32).toString('base64url');
  const authorize = new URL('/auth', issuer);
  authorize.search = new URLSearchParams({
    client_id: 'orders-web',
    response_type: 'code',
    redirect_uri: CALLBACK,
    scope,
    resource: ORDERS,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  let location = await send(authorize.href);
  for (let hop = 0; hop < 8 && !location.startsWith(CALLBACK); hop += 1) {
    const interaction = /^\/interaction\/[^/]+$/.exec(new URL(location, issuer).pathname);
    location = !interaction
      ? await send(location)
      : await send(location, cookies.has('_session') ? { prompt: 'consent' } : { prompt: 'login', login: 'bob' });
  }
  const code = new URL(location).searchParams.get('code');
  if (!code) throw new Error(`the sign-in ended at ${location}`);
  const token = await fetch(new URL('/token', issuer), {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: 'orders-web',
      code,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
      resource: ORDERS,
    }),
  });
  const body = (await token.json()) as Record<string, unknown>;
  expect(token.status, JSON.stringify(body)).to.equal(200);
  return body['access_token'] as string;
}

function order(
  service: string,
  token: string,
  amount = 42,
): Promise<{ status: number; body: Record<string, unknown> }> {
  return fetch(`${service}/orders`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ amount }),
  }).then(async (response) => ({ status: response.status, body: (await response.json()) as Record<string, unknown> }));
}

describe('docs: the orders → payments example', function () {
  this.timeout(60_000);
  let example: OrdersPayments;

  before(async () => {
    example = await startOrdersPayments({ frontEndCallback: CALLBACK, ordersSecret: SECRET });
  });
  after(() => example?.close());

  it('is shown whole in docs/token-exchange.md', () => {
    const page = readFileSync(new URL('docs/token-exchange.md', root), 'utf8');
    const block = /<!-- orders-payments -->\n```ts\n([\s\S]*?)```\n/.exec(page)?.[1];
    expect(block, 'docs/token-exchange.md has no orders-payments block').to.be.a('string');
    expect(block).to.equal(readFileSync(new URL('docs/examples/orders-payments.ts', root), 'utf8'));
  });

  it("places an order with the user's token and pays for it with a delegated one that names the orders service", async () => {
    const userToken = await signIn(example.issuer, 'openid orders:write payments:charge');
    expect(decodeJwt(userToken)).to.include({ sub: 'bob', aud: ORDERS, scope: 'orders:write payments:charge' });
    const placed = await order(example.orders, userToken);
    expect(placed.status, JSON.stringify(placed.body)).to.equal(201);
    expect(placed.body).to.deep.equal({
      customer: 'bob',
      payment: { customer: 'bob', actor: 'orders-service', amount: 42 },
    });
    // The user's own token is for ORDERS: the payments service refuses it.
    const direct = await fetch(`${example.payments}/charges`, {
      method: 'POST',
      headers: { authorization: `Bearer ${userToken}` },
      body: '{"amount":1}',
    });
    expect(direct.status).to.equal(401);
  });

  it('gives the orders service payments:charge only, as getResourceServerInfo says for its client', async () => {
    const userToken = await signIn(example.issuer, 'openid orders:write payments:charge');
    const exchange = (scope: string) =>
      fetch(`${example.issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${btoa(`orders-service:${SECRET}`)}` },
        body: new URLSearchParams({
          grant_type: TOKEN_EXCHANGE,
          subject_token: userToken,
          subject_token_type: ACCESS_TOKEN,
          resource: PAYMENTS,
          scope,
        }),
      }).then(async (response) => ({
        status: response.status,
        body: (await response.json()) as Record<string, unknown>,
      }));
    const charge = await exchange('payments:charge');
    expect(charge.status).to.equal(200);
    expect(decodeJwt(charge.body['access_token'] as string)).to.deep.include({
      sub: 'bob',
      aud: PAYMENTS,
      scope: 'payments:charge',
      act: { sub: 'orders-service', client_id: 'orders-service' },
    });
    const refund = await exchange('payments:refund');
    expect(refund.status).to.equal(400);
    expect(refund.body).to.include({ error: 'invalid_scope' });
  });

  it('cannot pay for a user whose token does not carry payments:charge', async () => {
    const userToken = await signIn(example.issuer, 'openid orders:write');
    const placed = await order(example.orders, userToken);
    expect(placed.status).to.equal(502);
    expect(placed.body['exchange']).to.include({ error: 'invalid_scope' });
  });
});
