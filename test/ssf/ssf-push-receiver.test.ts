import { expect } from 'chai';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { ADAPTERS } from '../support/adapters.js';
import { ACCESS_TOKEN, decodeJwt, exchange, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, revokeSession } from '../support/impersonations.js';
import { API, type TestProvider } from '../support/provider.js';
import { pushEndpoint } from '../support/push-endpoint.js';
import { RECEIVERS, receiverToken, startSsfProvider, STREAMS } from '../support/ssf.js';
import { scaled } from '../support/time.js';

const PUSH_CREDENTIAL = 'Bearer push-credential-of-the-resource-server';

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<ImpersonationTokenError | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return error as ImpersonationTokenError;
  }
}

/** Verifies `token` until it is refused with `code`, or `ms` pass; resolves the last refusal. */
async function refusedAs(verifier: ImpersonationVerifier, token: string, code: string | undefined, ms: number) {
  const deadline = Date.now() + scaled(ms);
  let error = await refusal(verifier, token);
  while (error?.code !== code && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    error = await refusal(verifier, token);
  }
  return error;
}

for (const kind of ADAPTERS) {
  describe(`resource-server helper as an SSF receiver (push, verification as heartbeat), on the ${kind.name} store`, function () {
    this.timeout(30_000);
    let tp: TestProvider;
    let endpoint: Awaited<ReturnType<typeof pushEndpoint>>;
    let verifier: ImpersonationVerifier | undefined;
    let alice: string;

    before(async () => {
      tp = await startSsfProvider(kind, { minVerificationInterval: 1 });
      alice = await userAccessToken(tp, 'alice');
      endpoint = await pushEndpoint(() => verifier);
      verifier = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        ssf: {
          delivery: 'push',
          endpointUrl: endpoint.url,
          configurationEndpoint: `${tp.base}${STREAMS}`,
          verificationEndpoint: `${tp.base}/ssf/verify`,
          accessToken: () => receiverToken(tp),
          audience: RECEIVERS.first.client_id,
          authorization: PUSH_CREDENTIAL,
          clockSkew: 0,
        },
        // A verification each read: no more often than min_verification_interval (1 s).
        refreshInterval: 1100,
        maxStaleness: 3000,
      });
      await verifier.ready();
      // A token issued in the second the receiver started is refused (knowsSince): the next one is not.
      await new Promise((resolve) => setTimeout(resolve, 1000));
    });
    after(async () => {
      verifier?.close();
      endpoint.server.closeAllConnections();
      await new Promise((resolve) => endpoint.server.close(resolve));
      await tp.close();
    });

    async function impersonation(): Promise<string> {
      const result = await exchange(tp, {
        subject_token: await subjectToken(tp),
        resource: API,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });
      return result.body['access_token'] as string;
    }

    it('refuses a token of a stopped session within one second, from the pushed session-revoked SET', async () => {
      const token = await impersonation();
      expect((await verifier!.verify(token)).subject).to.equal('bob');
      const session = decodeJwt(token)['impersonation_session'] as string;
      expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
      const error = await refusedAs(verifier!, token, 'session_revoked', 1000);
      expect(error?.code, 'refused within 1 s').to.equal('session_revoked');
    });

    it('is stale without a verified verification SET within maxStaleness, failing closed, and recovers knowing only what follows', async () => {
      const token = await impersonation();
      expect(verifier!.state.stale).to.equal(false);
      endpoint.cut = true;
      const cutAt = Date.now();
      const stale = await refusedAs(verifier!, token, 'revocations_unavailable', 6000);
      expect(stale?.code).to.equal('revocations_unavailable');
      // Never honoured past maxStaleness (3 s) plus one read's interval.
      expect(Date.now() - cutAt).to.be.below(scaled(3000 + 1100 + 1000));
      // Every read begun during the cut passes its deadline (maxStaleness) before pushes come through again:
      // one a busy machine's late timer let complete would rightly prove the gap held nothing (Invariant 56).
      await new Promise((resolve) => setTimeout(resolve, scaled(3500)));
      endpoint.cut = false;
      // Fresh again, it cannot know what a SET given up on during the gap said: a token from before is refused,
      const before = await refusedAs(verifier!, token, 'invalid_token', 8000);
      expect(before?.message).to.match(/predates the revocations/);
      // and one issued now is honoured.
      expect(await refusal(verifier!, await impersonation())).to.equal(undefined);
    });

    it('refuses a push without the stream credential (401) and a SET it cannot verify (400), taking nothing', async () => {
      const before = verifier!.state.revoked;
      expect(await verifier!.receivePush({ body: 'x.y.z', authorization: 'Bearer wrong' })).to.deep.include({
        status: 401,
      });
      const answer = await verifier!.receivePush({ body: 'not-a-jwt', authorization: PUSH_CREDENTIAL });
      expect(answer.status).to.equal(400);
      expect(answer.body?.err).to.equal('invalid_request');
      expect(verifier!.state.revoked).to.equal(before);
    });
  });
}

describe('resource-server helper: receivePush without a pushed stream', () => {
  it('answers 404: this verifier takes no pushed SETs', async () => {
    const verifier = createImpersonationVerifier({
      issuer: 'https://id.example.com',
      audience: API,
      revocationsUri: 'http://127.0.0.1:9/feed',
      jwks: async () => {
        throw new Error('no keys');
      },
    });
    verifier.ready().catch(() => {});
    try {
      expect((await verifier.receivePush({ body: 'x' })).status).to.equal(404);
    } finally {
      verifier.close();
    }
  });
});
