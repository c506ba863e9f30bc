import { expect } from 'chai';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { ACCESS_TOKEN, API, CLIENTS, TOKEN_EXCHANGE, startProvider, type TestProvider } from '../support/provider.js';
import { managementRequest, m2mToken, tokenRequest, userAccessToken } from '../support/http.js';

/**
 * The spec's flow end to end, over HTTP only: a support engineer signs in with
 * the authorization-code flow and PKCE, the backend gets a subject token from
 * the Management API with its client_credentials token, the console exchanges
 * it with the engineer's access token as actor token, and a resource server
 * verifies the result against the provider's published keys.
 */
describe("end to end: the spec's three steps", () => {
  let tp: TestProvider;
  const audit: Array<[string, ImpersonationEvent]> = [];
  const stops: Array<() => void> = [];

  before(async () => {
    tp = await startProvider({
      plugin: {
        getCustomJwtClaims: ({ context }) => {
          const { ticketId, reason, supportEngineerId } = context.grant.subjectTokenContext;
          return { impersonation_context: { ticket_id: ticketId, reason, support_engineer: supportEngineerId } };
        },
      },
    });
    for (const name of Object.values(EVENTS)) {
      stops.push(onImpersonationEvent(tp.provider, name, (event) => audit.push([name, event])));
    }
  });
  after(async () => {
    for (const stop of stops) stop();
    await tp.close();
  });

  for (const client of [CLIENTS.console, CLIENTS.web]) {
    it(`works for ${client.client_id}`, async () => {
      audit.length = 0;
      // Step 0: the support engineer signs in (authorization code + PKCE).
      const actorToken = await userAccessToken(tp, 'alice', { client, scope: 'openid profile' });

      // Step 1-2: the integrator backend asks the Management API for a subject token.
      const m2m = await m2mToken(tp);
      const created = await managementRequest(
        tp,
        {
          userId: 'bob',
          context: { ticketId: 'T-100', reason: 'checkout fails', supportEngineerId: 'alice' },
        },
        m2m,
      );
      expect(created.status).to.equal(201);
      const { subjectToken, expiresIn } = created.body as { subjectToken: string; expiresIn: number };
      expect(expiresIn).to.be.a('number').and.be.greaterThan(0);

      // Step 3: the console exchanges it at the token endpoint.
      const exchanged = await tokenRequest(
        tp,
        {
          grant_type: TOKEN_EXCHANGE,
          scope: 'profile:read',
          subject_token: subjectToken,
          subject_token_type: ACCESS_TOKEN,
          resource: API,
          actor_token: actorToken,
          actor_token_type: ACCESS_TOKEN,
        },
        client,
      );
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(exchanged.body).to.include({
        issued_token_type: ACCESS_TOKEN,
        token_type: 'Bearer',
        scope: 'profile:read',
      });
      expect(exchanged.body).to.not.have.property('refresh_token');

      // The resource server verifies it with the provider's published keys.
      const { payload } = await jwtVerify(
        exchanged.body['access_token'] as string,
        createRemoteJWKSet(new URL(`${tp.base}/jwks`)),
        {
          issuer: tp.issuer,
          audience: API,
          typ: 'at+jwt',
        },
      );
      expect(payload).to.include({ sub: 'bob', aud: API, iss: tp.issuer, client_id: client.client_id });
      expect(payload.act).to.deep.equal({ sub: 'alice' });
      expect(payload['impersonation_context']).to.deep.equal({
        ticket_id: 'T-100',
        reason: 'checkout fails',
        support_engineer: 'alice',
      });
      expect(payload.exp! - Math.floor(Date.now() / 1000)).to.be.within(890, 900);

      // The subject token is spent.
      const replay = await tokenRequest(
        tp,
        {
          grant_type: TOKEN_EXCHANGE,
          subject_token: subjectToken,
          subject_token_type: ACCESS_TOKEN,
          resource: API,
        },
        client,
      );
      expect(replay.body['error']).to.equal('invalid_request');

      // The audit trail tells the story, with one id tying creation to redemption.
      expect(audit.map(([name]) => name)).to.deep.equal([
        EVENTS.subjectTokenCreated,
        EVENTS.exchangeSucceeded,
        EVENTS.exchangeRefused,
      ]);
      const ids = new Set(audit.map(([, event]) => event.subjectTokenId));
      expect(ids.size).to.equal(1);
    });
  }
});
