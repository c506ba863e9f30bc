import { expect } from 'chai';
import { createMemoryAdapter, type MemoryAdapterClass } from '../../lib/index.js';
import { replayShareBounds } from '../../lib/adapters/replay-shares.js';
import { DpopKey } from '../support/dpop.js';
import { API, CLIENTS, REDIRECT_URI, pkcePair, startProvider, type TestProvider } from '../support/provider.js';
import {
  ACCESS_TOKEN,
  exchange,
  expectError,
  managementRequest,
  m2mToken,
  subjectToken,
  userAccessToken,
} from '../support/http.js';

const BOUND = 500;
const FLOOD = 700;

/** One unauthenticated authorization request: oidc-provider stores an Interaction for it. */
async function startSignIn(tp: TestProvider): Promise<number> {
  const url = new URL(`${tp.base}/auth`);
  url.search = new URLSearchParams({
    client_id: CLIENTS.console.client_id,
    response_type: 'code',
    redirect_uri: REDIRECT_URI,
    scope: 'openid',
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
  }).toString();
  const response = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(10_000) });
  await response.arrayBuffer();
  return response.status;
}

describe('memory store under a flood of unauthenticated requests', () => {
  let tp: TestProvider;
  let Memory: MemoryAdapterClass;
  before(async () => {
    Memory = createMemoryAdapter({ max: BOUND });
    tp = await startProvider({ adapter: Memory });
  });
  after(() => tp.close());

  it(`keeps subject tokens, sessions and DPoP replay entries through ${FLOOD} GET /auth at a bound of ${BOUND}`, async () => {
    const actor = await userAccessToken(tp, 'alice');
    const waiting = await subjectToken(tp);
    const key = await DpopKey.generate();
    const proof = await key.proof(`${tp.base}/token`);
    const bound = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
      dpop: proof,
    });
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);

    for (let sent = 0; sent < FLOOD; sent += 25) {
      const statuses = await Promise.all(Array.from({ length: 25 }, () => startSignIn(tp)));
      expect(statuses.every((status) => status === 303)).to.equal(true);
    }

    const replay = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
      dpop: proof,
    });
    expectError(replay, 400, 'invalid_dpop_proof');
    const redeemed = await exchange(tp, {
      subject_token: waiting,
      resource: API,
      actor_token: actor,
      actor_token_type: ACCESS_TOKEN,
    });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);

    const stats = Memory.stats();
    expect(stats.models['Interaction']!.size).to.be.at.most(BOUND);
    expect(stats.evictedUnexpired['Interaction']).to.be.at.least(FLOOD - BOUND);
    expect(stats.evictedUnexpired).to.have.keys('Interaction');
  });
});

describe('memory store at the bound of a protected model: fail closed, never forget', () => {
  it('answers 503 temporarily_unavailable for one subject token too many, and the earlier ones stay redeemable', async () => {
    // A subject token takes two entries (its record, the pointer from its id); the client's share one more.
    const tp = await startProvider({ adapter: createMemoryAdapter({ limits: { SubjectToken: 7 } }) });
    try {
      const tokens = [await subjectToken(tp), await subjectToken(tp), await subjectToken(tp)];
      const refused = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
      expectError(refused, 503, 'temporarily_unavailable');
      expect(refused.body['error_description']).to.equal('the SubjectToken store is full; retry shortly');
      expect(JSON.stringify(refused.body)).to.not.include('ist_');
      for (const token of tokens) {
        expect((await exchange(tp, { subject_token: token, resource: API })).status).to.equal(200);
      }
    } finally {
      await tp.close();
    }
  });

  it("refuses a DPoP proof with 503 when the client's share of the replay store is full, burns nothing, and still refuses earlier proofs' replays", async () => {
    const tp = await startProvider({ adapter: createMemoryAdapter({ limits: { ReplayDetection: 16 } }) });
    try {
      const key = await DpopKey.generate();
      const proofs = await Promise.all(
        Array.from({ length: replayShareBounds(16).perClient.credentialed }, () => key.proof(`${tp.base}/token`)),
      );
      for (const proof of proofs) {
        const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
          dpop: proof,
        });
        expect(result.status, JSON.stringify(result.body)).to.equal(200);
      }
      const subject = await subjectToken(tp);
      const full = await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, {
        dpop: await key.proof(`${tp.base}/token`),
      });
      expectError(full, 503, 'temporarily_unavailable');
      for (const proof of proofs) {
        expectError(
          await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, { dpop: proof }),
          400,
          'invalid_dpop_proof',
        );
      }
      expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
    } finally {
      await tp.close();
    }
  });
});
