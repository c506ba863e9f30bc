import { expect } from 'chai';
import type { AdapterPayload } from 'oidc-provider';
import type { CommitOutcome, CommitWrite } from '../../lib/adapters/contracts/commit.js';
import type { ImpersonationAdapterClass } from '../../lib/adapters/contract.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { apiRequest, expectError, introspect, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, exchangeAsActor, SESSIONS } from '../support/impersonations.js';
import { API, OPAQUE_API, startProvider, TOKEN_EXCHANGE, type TestProvider } from '../support/provider.js';

/** The steps of an exchange's writes that the adapter below can be made to fail. */
type Step = 'AccessToken.upsert' | 'Grant.upsert' | 'commitOnce';

/**
 * An exchange writes the provider's token (and for an opaque one its Grant),
 * then commits: one store operation redeems the subject token and lists the
 * session. A failure at any step leaves nothing live, nothing listed and the
 * subject token unburned; many exchanges of one subject token at once issue
 * exactly one token and list exactly one session.
 */
describe(`the exchange's commit (${suiteAdapterKind().name})`, function () {
  this.timeout(30_000);
  let tp: TestProvider;
  let failing: Step | undefined;
  const saved: string[] = [];
  const destroyed: string[] = [];
  let hold: (() => void) | undefined;

  before(async () => {
    const Store: ImpersonationAdapterClass = await suiteAdapterKind().open();
    // The suite's real adapter underneath; the chosen step fails, on demand, before it reaches the store.
    class FailingAt extends Store {
      readonly model: string;
      constructor(name: string) {
        super(name);
        this.model = name;
      }
      override upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
        if (failing === `${this.model}.upsert`) return Promise.reject(new Error('store unreachable'));
        return super.upsert(id, payload, expiresIn);
      }
      override commitOnce(write: CommitWrite): Promise<CommitOutcome> {
        if (failing === 'commitOnce') return Promise.reject(new Error('store unreachable'));
        return super.commitOnce(write);
      }
    }
    tp = await startProvider({
      adapter: FailingAt,
      plugin: {
        canExchange: () => {
          hold?.();
          return true;
        },
      },
    });
    // The exchanges' tokens only, not the actors' sign-ins.
    const exchanged = (token: { gty?: string }) => token.gty === TOKEN_EXCHANGE;
    tp.provider.on('access_token.saved', (token: { jti: string; gty?: string }) => {
      if (exchanged(token)) saved.push(token.jti);
    });
    tp.provider.on('access_token.destroyed', (token: { jti: string; gty?: string }) => {
      if (exchanged(token)) destroyed.push(token.jti);
    });
  });
  after(() => tp.close());
  beforeEach(() => {
    failing = undefined;
    hold = undefined;
    saved.length = 0;
    destroyed.length = 0;
  });

  const listedFor = async (subject: string) =>
    (await apiRequest(tp, 'GET', `${SESSIONS}?subject=${subject}`, await adminToken(tp))).body['items'] as unknown[];

  for (const [step, resource] of [
    ['AccessToken.upsert', OPAQUE_API],
    ['Grant.upsert', OPAQUE_API],
    ['commitOnce', OPAQUE_API],
    ['commitOnce', API],
  ] as const) {
    it(`fails closed when ${step} fails (${resource === API ? 'JWT' : 'opaque'}): 500, nothing live, nothing listed, nothing burned`, async () => {
      const actorToken = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp, { userId: 'carol' });
      failing = step;
      const refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource });
      failing = undefined;
      expectError(refused, 500, 'server_error');
      expect(refused.body).to.not.have.property('access_token');
      // A JWT is never stored: it is simply never handed out.
      if (resource === OPAQUE_API) {
        expect(
          saved.filter((jti) => !destroyed.includes(jti)),
          'every token written is taken back',
        ).to.deep.equal([]);
      }
      expect(await listedFor('carol')).to.deep.equal([]);

      // Back without a restart: the same subject token is exchanged, once.
      const issued = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      expect(await listedFor('carol')).to.have.length(1);
      expectError(
        await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource }),
        400,
        'invalid_request',
        /subject_token was already used/,
      );
      await apiRequest(
        tp,
        'DELETE',
        `${SESSIONS}/${(await listedFor('carol'))[0]!['id' as never]}`,
        await adminToken(tp),
      );
    });
  }

  for (const resource of [API, OPAQUE_API]) {
    it(`issues one token and lists one session of 20 concurrent exchanges of one subject token (${resource === API ? 'JWT' : 'opaque'})`, async () => {
      const actorToken = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp, { userId: 'bob' });
      const replies = await Promise.all(
        Array.from({ length: 20 }, () => exchangeAsActor(tp, { subjectToken: subject, actorToken, resource })),
      );
      const issued = replies.filter((reply) => reply.status === 200);
      expect(issued).to.have.length(1);
      for (const reply of replies.filter((r) => r.status !== 200)) {
        expectError(reply, 400, 'invalid_request', /subject_token was already used/);
      }
      const listed = await listedFor('bob');
      expect(listed).to.have.length(1);
      if (resource === OPAQUE_API) {
        // Each exchange that got as far as the commit wrote its opaque token first; the losers' are gone.
        expect(saved.filter((jti) => !destroyed.includes(jti))).to.have.length(1);
        expect((await introspect(tp, issued[0]!.body['access_token'] as string))['active']).to.equal(true);
      }
      await apiRequest(tp, 'DELETE', `${SESSIONS}/${listed[0]!['id' as never]}`, await adminToken(tp));
    });
  }

  it('refuses an exchange that ran past the deadline between its reads and its commit: 503, nothing burned', async () => {
    const actorToken = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp, { userId: 'carol' });
    const realNow = Date.now;
    // The policy runs after every read: from there on, the clock says two minutes and a second went by.
    hold = () => {
      const shifted = realNow() + 121_000;
      Date.now = () => shifted;
    };
    let refused;
    try {
      refused = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: API });
    } finally {
      Date.now = realNow;
      hold = undefined;
    }
    expectError(refused, 503, 'temporarily_unavailable', /took longer than 120 s/);
    expect(await listedFor('carol')).to.deep.equal([]);
    const issued = await exchangeAsActor(tp, { subjectToken: subject, actorToken, resource: API });
    expect(issued.status, 'nothing burned').to.equal(200);
    const listed = await listedFor('carol');
    await apiRequest(tp, 'DELETE', `${SESSIONS}/${listed[0]!['id' as never]}`, await adminToken(tp));
  });
});
