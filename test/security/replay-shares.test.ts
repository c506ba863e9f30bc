import { expect } from 'chai';
import { createMemoryAdapter, type MemoryAdapterClass } from '../../lib/index.js';
import { replayShareBounds } from '../../lib/adapters/replay-shares.js';
import { reply } from '../../fixtures/flows.js';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { ADAPTERS } from '../support/adapters.js';
import { DpopKey } from '../support/dpop.js';
import { API, CLIENTS, REDIRECT_URI, pkcePair, startProvider, type TestProvider } from '../support/provider.js';
import { exchange, expectError, subjectToken, userSignIn, type Reply } from '../support/http.js';

const BOUND = 64;
const SHARES = replayShareBounds(BOUND);

/** A public client's pushed authorization request (RFC 9126) with a fresh DPoP proof: no credential at all. */
async function pushAuthorization(tp: TestProvider, clientId: string, key: DpopKey): Promise<Reply> {
  const response = await fetch(`${tp.base}/request`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      dpop: await key.proof(`${tp.base}/request`),
    },
    body: new URLSearchParams({
      client_id: clientId,
      response_type: 'code',
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
    }),
    signal: AbortSignal.timeout(10_000),
  });
  return reply(response);
}

/**
 * The attack: pushed authorization requests in `clientId`'s name until the
 * replay store refuses one; how many were accepted, and the refusal.
 */
async function floodUntilRefused(tp: TestProvider, clientId: string): Promise<{ accepted: number; refusal: Reply }> {
  const key = await DpopKey.generate();
  for (let accepted = 0; accepted <= BOUND; accepted += 1) {
    const pushed = await pushAuthorization(tp, clientId, key);
    if (pushed.status !== 201) return { accepted, refusal: pushed };
  }
  throw new Error(`${BOUND + 1} pushed authorization requests were all accepted`);
}

/** What the attacker was told: the client's share of unauthenticated requests is full, 503. */
function expectShareRefusal(flood: { accepted: number; refusal: Reply }, accepted: number): void {
  expectError(flood.refusal, 503, 'temporarily_unavailable', /unauthenticated requests/);
  expect(flood.accepted).to.equal(accepted);
}

async function dpopExchange(tp: TestProvider, key: DpopKey): Promise<Reply> {
  return exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
    dpop: await key.proof(`${tp.base}/token`),
  });
}

describe('the replay store against anonymous pushed authorization requests with DPoP (memory)', () => {
  let tp: TestProvider;
  let Memory: MemoryAdapterClass;
  beforeEach(async () => {
    Memory = createMemoryAdapter({ limits: { ReplayDetection: BOUND } });
    tp = await startProvider({ adapter: Memory });
  });
  afterEach(() => tp.close());

  it("fills only the flooded public client's share: the support console's DPoP-bound exchange and pushed request still pass", async () => {
    const flood = await floodUntilRefused(tp, CLIENTS.customer.client_id);

    const key = await DpopKey.generate();
    const exchanged = await dpopExchange(tp, key);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(exchanged.body['token_type']).to.equal('DPoP');
    expect((await pushAuthorization(tp, CLIENTS.console.client_id, key)).status).to.equal(201);
    expectShareRefusal(flood, SHARES.perClient.anonymous);
    expect(Memory.stats().refusedFull).to.deep.equal({ ReplayDetection: 1 });
  });

  it("a flood in the exchange client's own name leaves its exchange and its sign-in's DPoP-bound code grant their place", async () => {
    const flood = await floodUntilRefused(tp, CLIENTS.console.client_id);

    const key = await DpopKey.generate();
    const exchanged = await dpopExchange(tp, key);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(exchanged.body['token_type']).to.equal('DPoP');
    // The engineer's own sign-in, proof and all: a code is a credential, so its proof is no anonymous write.
    await userSignIn(tp, 'alice', { headers: { dpop: await key.proof(`${tp.base}/token`) } });
    expectShareRefusal(flood, SHARES.perClient.anonymous);
  });

  it('public clients flooded until the anonymous pool is full leave the exchange and the sign-in their place', async () => {
    await tp.close();
    const flooded = Array.from({ length: SHARES.pool.anonymous / SHARES.perClient.anonymous }, (_, n) => ({
      client_id: `spa-${n}`,
      token_endpoint_auth_method: 'none' as const,
      grant_types: ['authorization_code'],
      response_types: ['code' as const],
      redirect_uris: [REDIRECT_URI],
    }));
    tp = await startProvider({ adapter: Memory, configuration: { clients: [...FIXTURE_CLIENTS, ...flooded] } });
    const floods = [];
    for (const client of flooded) floods.push(await floodUntilRefused(tp, client.client_id));
    const last = await floodUntilRefused(tp, CLIENTS.console.client_id);

    const key = await DpopKey.generate();
    const exchanged = await dpopExchange(tp, key);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    await userSignIn(tp, 'alice', { headers: { dpop: await key.proof(`${tp.base}/token`) } });
    for (const flood of floods) expectShareRefusal(flood, SHARES.perClient.anonymous);
    expectShareRefusal(last, 0);
  });
});

for (const kind of ADAPTERS.filter(({ id }) => id !== 'memory')) {
  describe(`the replay store against anonymous pushed authorization requests with DPoP (${kind.name})`, () => {
    it('bounds replay entries by their TTL only: refuses none of the flood, and the DPoP-bound exchange succeeds', async () => {
      const tp = await startProvider({}, kind);
      try {
        const key = await DpopKey.generate();
        for (let sent = 0; sent < BOUND; sent += 16) {
          const pushed = await Promise.all(
            Array.from({ length: 16 }, () => pushAuthorization(tp, CLIENTS.console.client_id, key)),
          );
          expect(pushed.map(({ status }) => status)).to.deep.equal(Array(16).fill(201));
        }
        const exchanged = await dpopExchange(tp, key);
        expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      } finally {
        await tp.close();
      }
    });
  });
}

describe('the replay shares of the memory adapter', () => {
  // Outside any request a write counts as credentialed.
  const perClient = replayShareBounds(16).perClient.credentialed;

  async function refusal(write: Promise<void>): Promise<unknown> {
    return write.then(
      () => undefined,
      (error: unknown) => error,
    );
  }

  it("refuses one client's entry beyond its share with 503, forgets none of its earlier ones, and takes another client's", async () => {
    const Memory = createMemoryAdapter({ limits: { ReplayDetection: 16 } });
    const replays = new Memory('ReplayDetection');
    for (let n = 0; n < perClient; n += 1) await replays.upsert(`a${n}`, { jti: `a${n}`, iss: 'a' }, 60);
    expect(await refusal(replays.upsert('a-more', { jti: 'a-more', iss: 'a' }, 60))).to.include({
      status: 503,
      error: 'temporarily_unavailable',
    });
    for (let n = 0; n < perClient; n += 1) expect(await replays.find(`a${n}`)).to.not.equal(undefined);
    await replays.upsert('b0', { jti: 'b0', iss: 'b' }, 60);
    // Rewriting an entry already held takes no more room.
    await replays.upsert('a0', { jti: 'a0', iss: 'a' }, 60);
    expect(await replays.find('a-more')).to.equal(undefined);
    expect(Memory.stats().refusedFull).to.deep.equal({ ReplayDetection: 1 });
  });

  it('gives a place back when its entry is destroyed, expires or is cleared', async () => {
    const Memory = createMemoryAdapter({ limits: { ReplayDetection: 16 } });
    const replays = new Memory('ReplayDetection');
    const fill = async (prefix: string, ttl: number): Promise<void> => {
      for (let n = 0; n < perClient; n += 1) await replays.upsert(`${prefix}${n}`, { jti: 'x', iss: 'a' }, ttl);
    };
    await fill('a', 60);
    await replays.destroy('a0');
    await replays.upsert('destroyed', { jti: 'x', iss: 'a' }, 60);
    Memory.clear();
    await fill('short', 1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await fill('later', 60);
    expect(Memory.stats().models['ReplayDetection']!.size).to.equal(perClient);
  });
});
