import { expect } from 'chai';
import { DpopKey } from '../support/dpop.js';
import { API, CLIENTS, startProvider, type TestProvider } from '../support/provider.js';
import { exchange, expectError, subjectToken } from '../support/http.js';

/** As oidc-provider's own grants do, the proof is checked before any deployment hook sees the request. */
describe('DPoP is checked before the deployment hooks run', () => {
  let tp: TestProvider;
  const calls: string[] = [];

  before(async () => {
    tp = await startProvider({
      plugin: {
        canExchange: () => {
          calls.push('canExchange');
          return true;
        },
        getCustomJwtClaims: () => {
          calls.push('getCustomJwtClaims');
          return {};
        },
      },
    });
  });
  after(() => tp.close());

  it('a replayed proof is refused before canExchange and getCustomJwtClaims, and keeps the subject token', async () => {
    const key = await DpopKey.generate();
    const proof = await key.proof(`${tp.base}/token`);
    const first = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
      dpop: proof,
    });
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    expect(calls).to.deep.equal(['canExchange', 'getCustomJwtClaims']);

    calls.length = 0;
    const subject = await subjectToken(tp);
    expectError(
      await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, { dpop: proof }),
      400,
      'invalid_dpop_proof',
      /Replay/,
    );
    expect(calls).to.deep.equal([]);
    const fresh = await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, {
      dpop: await key.proof(`${tp.base}/token`),
    });
    expect(fresh.status, JSON.stringify(fresh.body)).to.equal(200);
  });

  it('spends no proof on a request that names no subject token it can redeem', async () => {
    const key = await DpopKey.generate();
    const proof = await key.proof(`${tp.base}/token`);
    for (const subject of [`ist_${'A'.repeat(43)}`, await usedSubjectToken()]) {
      expectError(
        await exchange(tp, { subject_token: subject, resource: API }, CLIENTS.console, { dpop: proof }),
        400,
        'invalid_request',
      );
    }
    const redeemed = await exchange(tp, { subject_token: await subjectToken(tp), resource: API }, CLIENTS.console, {
      dpop: proof,
    });
    expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
  });

  async function usedSubjectToken(): Promise<string> {
    const subject = await subjectToken(tp);
    expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
    return subject;
  }
});
