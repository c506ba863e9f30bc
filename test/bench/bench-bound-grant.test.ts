import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { boundConfiguration, registerBoundGrant } from '../../bench/bound-grant.js';
import { deploymentSetup } from '../../bench/deployment.js';
import { isCustomer, obtainCredentials, type Credentials } from '../../bench/requests.js';
import { BOUND_GRANT } from '../../bench/scenarios.js';
import { ACCESS_TOKEN, API, CLIENTS, FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { exchange, subjectToken, tokenRequest } from '../../fixtures/flows.js';
import { EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { startProvider, USERS, type TestProvider } from '../support/provider.js';

/**
 * The bench's bound (bench/bound-grant.ts) stands for the exchange's
 * unavoidable work: its token must carry what the exchange's carries, and its
 * one commit must redeem and list as the exchange's does, or the rate
 * compared with it would be that of less work.
 */
describe("bench: the exchange's bound", () => {
  let tp: TestProvider;
  let credentials: Credentials;
  const deployment = deploymentSetup();
  const heard: ImpersonationEvent[] = [];

  before(async () => {
    // As bench/server.ts sets up a deployment's provider.
    tp = await startProvider({
      plugin: deployment.plugin,
      configuration: {
        findAccount: (_ctx: unknown, sub: string) =>
          USERS.includes(sub) || isCustomer(sub) ? { accountId: sub, claims: () => ({ sub }) } : undefined,
        ...boundConfiguration(FIXTURE_CLIENTS, CLIENTS.console.client_id),
      },
    });
    registerBoundGrant(tp.provider, deployment.plugin.getCustomJwtClaims);
    onImpersonationEvent(tp.provider, EVENTS.exchangeSucceeded, (event) => heard.push(event));
    credentials = await obtainCredentials(tp.base);
  });

  after(async () => {
    await tp.close();
    await deployment.close();
  });

  const creation = { userId: 'customer-7', context: { ticketId: 'T-1', reason: 'checkout fails' } };
  const params = (subject: string) => ({
    subject_token: subject,
    subject_token_type: ACCESS_TOKEN,
    actor_token: credentials.actorToken,
    actor_token_type: ACCESS_TOKEN,
    resource: API,
    scope: 'profile:read',
  });

  it("issues a token with the exchange's claims, redeems the subject token and tells the listeners of its session", async () => {
    const exchanged = await exchange(tp, params(await subjectToken(tp, creation)));
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const subject = await subjectToken(tp, creation);
    const bound = await tokenRequest(tp, { grant_type: BOUND_GRANT, ...params(subject) });
    expect(bound.status, JSON.stringify(bound.body)).to.equal(200);

    const claims = (reply: typeof bound) => decodeJwt(reply.body['access_token'] as string);
    const [ours, its] = [claims(bound), claims(exchanged)];
    expect(Object.keys(ours).sort()).to.deep.equal(Object.keys(its).sort());
    for (const name of ['sub', 'aud', 'scope', 'client_id', 'act', 'impersonation_context', 'iss']) {
      expect(ours[name], name).to.deep.equal(its[name]);
    }
    // The same lifetime: its session joins the sorted indexes where the exchange's do.
    expect(ours.exp! - ours.iat!).to.equal(its.exp! - its.iat!);
    expect(heard.map((event) => event.sessionId)).to.deep.equal([
      its['impersonation_session'],
      ours['impersonation_session'],
    ]);

    // Redeemed in the plugin's own store: neither the bound nor the exchange takes it again.
    expect((await tokenRequest(tp, { grant_type: BOUND_GRANT, ...params(subject) })).status).to.equal(400);
    const again = await exchange(tp, params(subject));
    expect(again.body).to.deep.include({
      error: 'invalid_request',
      error_description: 'subject_token was already used',
    });
  });
});
