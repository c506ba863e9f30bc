import { expect } from 'chai';
import { decodeJwt } from 'jose';
import type { RequestSpec } from '../../bench/load.js';
import {
  creationRequest,
  customers,
  exchangeRequest,
  isCustomer,
  obtainCredentials,
  type Credentials,
} from '../../bench/requests.js';
import { standingGrantSetup } from '../../bench/standing-grant.js';
import { TokenPool } from '../../bench/token-pool.js';
import { EVENTS, onImpersonationEvent, type ImpersonationOptions } from '../../lib/index.js';
import { startProvider, USERS, type TestProvider } from '../support/provider.js';

/** Sends one of the bench's requests as autocannon would build it; its status and JSON body. */
async function send(tp: TestProvider, spec: RequestSpec): Promise<{ status: number; body: Record<string, unknown> }> {
  const request = typeof spec.setupRequest === 'function' ? spec.setupRequest({ ...spec }, {}) : spec;
  const response = await fetch(`${tp.base}${request.path}`, {
    method: request.method ?? 'GET',
    headers: request.headers as Record<string, string>,
    body: request.body as string,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  if (typeof spec.onResponse === 'function') spec.onResponse(response.status, text, {}, undefined);
  return { status: response.status, body: JSON.parse(text) as Record<string, unknown> };
}

describe('bench: the provider with a standing grant in force', () => {
  let tp: TestProvider;
  let credentials: Credentials;
  const setup = standingGrantSetup();
  const plugin: Partial<ImpersonationOptions> = { ...setup.plugin };

  before(async () => {
    // As bench/server.ts: the fixture's users, and the customers the bench creates subject tokens for.
    tp = await startProvider({
      plugin,
      configuration: {
        findAccount: (_ctx: unknown, sub: string) =>
          USERS.includes(sub) || isCustomer(sub) ? { accountId: sub, claims: () => ({ sub }) } : undefined,
      },
    });
    credentials = await obtainCredentials(tp.base, { namedActor: true });
  });

  after(async () => {
    await tp.close();
  });

  it('without the grant, the customer is asked and no subject token is issued', async () => {
    const creation = creationRequest(await credentials.m2m(), undefined, credentials.subjectTokenBody);
    const answer = await send(tp, creation);
    expect(answer.status).to.equal(202);
    expect(answer.body).to.have.property('approvalRequest');
  });

  it('once given, the grant covers the subject tokens the bench creates and bounds their exchange', async () => {
    const grants: string[] = [];
    onImpersonationEvent(tp.provider, EVENTS.accessGrantCreated, (event) => grants.push(event.accessGrantId));
    const exchanged: (string | undefined)[] = [];
    onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, (event) => exchanged.push(event.accessGrantId));
    await setup.give(tp, plugin);
    expect(grants).to.have.length(customers().length);

    const pool = new TokenPool();
    const created = await send(tp, creationRequest(await credentials.m2m(), pool, credentials.subjectTokenBody));
    expect(created.status).to.equal(201);
    const exchange = await send(tp, exchangeRequest(credentials.actorToken, pool));
    expect(exchange.status).to.equal(200);
    expect(exchanged).to.have.length(1);
    expect(grants).to.include(exchanged[0]);
    const claims = decodeJwt(exchange.body['access_token'] as string);
    expect(claims['sub']).to.match(/^customer-\d+$/);
    expect(claims).to.include({ scope: 'profile:read' });
    expect(claims['act']).to.deep.include({ sub: 'alice' });
  });
});
