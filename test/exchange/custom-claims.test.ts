import { expect } from 'chai';
import type { CustomJwtClaimsInput } from '../../lib/index.js';
import { runCustomClaims } from '../../lib/exchange/claims.js';
import { API, CLIENTS, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';
import { basic, decodeJwt, exchange, subjectToken, userAccessToken, ACCESS_TOKEN } from '../support/http.js';

type Behaviour = (input: CustomJwtClaimsInput) => unknown;

describe('custom claims: getCustomJwtClaims (spec 2.7)', () => {
  let tp: TestProvider;
  let alice: string;
  let behaviour: Behaviour;
  const calls: CustomJwtClaimsInput[] = [];

  before(async () => {
    tp = await startProvider({
      plugin: {
        environmentVariables: { REGION: 'eu-1' },
        customClaimsTimeout: 200,
        // Answers as the behaviour does: a value at once (not waited for) or a promise.
        getCustomJwtClaims: (input) => {
          calls.push(input);
          return behaviour(input) as Record<string, unknown> | Promise<Record<string, unknown>>;
        },
      },
      configuration: {
        // A deployment's own extraTokenClaims keeps working and cannot forge act.
        extraTokenClaims: () => ({ tenant: 'acme', act: { sub: 'forged' } }),
      },
    });
    alice = await userAccessToken(tp, 'alice');
  });
  after(() => tp.close());
  beforeEach(() => {
    calls.length = 0;
  });

  const sample: Behaviour = ({ context }) => {
    const { ticketId, reason, supportEngineerId } = context.grant.subjectTokenContext;
    return { impersonation_context: { ticket_id: ticketId, reason, support_engineer: supportEngineerId } };
  };

  it('adds the returned claims, called with token, context and environmentVariables', async () => {
    behaviour = sample;
    const context = { ticketId: 'T-42', reason: 'cannot log in', supportEngineerId: 'alice' };
    const result = await exchange(tp, {
      subject_token: await subjectToken(tp, { userId: 'bob', context }),
      resource: API,
      scope: 'profile:read',
      actor_token: alice,
      actor_token_type: ACCESS_TOKEN,
    });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    const claims = decodeJwt(result.body['access_token'] as string);
    expect(claims['impersonation_context']).to.deep.equal({
      ticket_id: 'T-42',
      reason: 'cannot log in',
      support_engineer: 'alice',
    });
    expect(claims['act']).to.deep.equal({ sub: 'alice' });
    expect(claims['tenant']).to.equal('acme');

    expect(calls).to.have.length(1);
    const [input] = calls;
    expect(input!.context.grant).to.deep.equal({
      type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subjectTokenContext: context,
    });
    expect(input!.context.client).to.deep.equal({ id: CLIENTS.console.client_id });
    expect(input!.context.user).to.deep.equal({ id: 'bob' });
    expect(input!.context.actor).to.deep.equal({ id: 'alice' });
    expect(input!.environmentVariables).to.deep.equal({ REGION: 'eu-1' });
    expect(input!.token).to.include({
      sub: 'bob',
      aud: API,
      client_id: CLIENTS.console.client_id,
      scope: 'profile:read',
    });
    expect(Object.isFrozen(input!.token)).to.equal(true);
  });

  it('gets the creation context as a frozen view: a hook that changes it fails, and the context stays as created', async () => {
    const context = { ticketId: 'T-43', reason: 'locked out', supportEngineerId: 'alice', nested: { tags: ['a'] } };
    const subject = await subjectToken(tp, { userId: 'bob', context });
    behaviour = ({ context: given }) => {
      const { subjectTokenContext } = given.grant;
      (subjectTokenContext['nested'] as { tags: string[] }).tags.push('changed');
      return {};
    };
    const refused = await exchange(tp, { subject_token: subject, resource: API });
    expect(refused.status).to.equal(400);
    expect(refused.body['error_description']).to.match(/getCustomJwtClaims failed/);
    behaviour = ({ context: given }) => ({ seen: given.grant.subjectTokenContext });
    const result = await exchange(tp, { subject_token: subject, resource: API });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    expect(decodeJwt(result.body['access_token'] as string)['seen']).to.deep.equal(context);
    expect(Object.isFrozen(calls.at(-1)!.context.grant.subjectTokenContext['nested'])).to.equal(true);
  });

  it('adds nothing when it returns {}, and still drops a forged act from extraTokenClaims', async () => {
    behaviour = () => ({});
    const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
    const claims = decodeJwt(result.body['access_token'] as string);
    expect(claims).to.not.have.property('act');
    expect(claims).to.not.have.property('impersonation_context');
  });

  it('carries the claims as JSON writes them: a Date as its text, an undefined member left out, -0 as 0', async () => {
    let deep: unknown = 'bottom';
    for (let level = 0; level < 100; level += 1) deep = [deep];
    behaviour = () => ({ at: new Date(5), gone: undefined, zero: -0, list: [1, undefined], deep });
    const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    const claims = decodeJwt(result.body['access_token'] as string);
    expect(claims).to.deep.include({ at: '1970-01-01T00:00:00.005Z', zero: 0, list: [1, null], deep });
    expect(claims).to.not.have.property('gone');
  });

  it('carries the claims into introspection of opaque tokens', async () => {
    behaviour = () => ({ ticket: 'T-5' });
    const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: OPAQUE_API, scope: 'read' });
    const introspection = (await (
      await fetch(`${tp.base}/token/introspection`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(CLIENTS.web) },
        body: new URLSearchParams({ token: result.body['access_token'] as string }),
      })
    ).json()) as Record<string, unknown>;
    expect(introspection).to.include({ active: true, sub: 'bob', ticket: 'T-5', tenant: 'acme' });
    expect(introspection).to.not.have.property('act');
  });

  const failures: Array<[string, Behaviour, RegExp]> = [
    [
      'throws',
      () => {
        throw new Error('database down');
      },
      /getCustomJwtClaims failed/,
    ],
    ['rejects', () => Promise.reject(new Error('database down')), /getCustomJwtClaims failed/],
    ['times out', () => new Promise((resolve) => setTimeout(() => resolve({}), 1000)), /did not answer within 200 ms/],
    ['returns null', () => null, /must return an object/],
    ['resolves to null', () => Promise.resolve(null), /must return an object/],
    ['resolves to act', () => Promise.resolve({ act: { sub: 'mallory' } }), /reserved claims: act/],
    ['returns an array', () => ['x'], /must return an object/],
    ['returns a string', () => 'claims', /must return an object/],
    ['returns undefined', () => undefined, /must return an object/],
    ['sets act', () => ({ act: { sub: 'mallory' } }), /reserved claims: act/],
    ['sets sub and aud', () => ({ sub: 'admin', aud: 'https://elsewhere' }), /reserved claims: sub, aud/],
    ['sets cnf', () => ({ cnf: { jkt: 'x' } }), /reserved claims: cnf/],
    ['returns a value JSON cannot carry', () => ({ big: 10n }), /not JSON/],
    [
      'returns a cycle',
      () => {
        const loop: Record<string, unknown> = {};
        loop['self'] = loop;
        return { loop };
      },
      /not JSON/,
    ],
  ];
  for (const [name, failing, description] of failures) {
    it(`fails the exchange with invalid_request when it ${name}, and does not burn the subject token`, async () => {
      behaviour = failing;
      const subject = await subjectToken(tp);
      const result = await exchange(tp, { subject_token: subject, resource: API });
      expect(result.status).to.equal(400);
      expect(result.body['error']).to.equal('invalid_request');
      expect(result.body['error_description']).to.match(description);
      behaviour = () => ({});
      expect((await exchange(tp, { subject_token: subject, resource: API })).status).to.equal(200);
    });
  }

  const authenticationClaims = [
    'acr',
    'amr',
    'auth_time',
    'sid',
    'azp',
    'nonce',
    'typ',
    'at_hash',
    'c_hash',
    's_hash',
    'events',
    'may_act',
  ];
  for (const claim of authenticationClaims) {
    it(`refuses ${claim} from the hook: an impersonation token never claims how the customer authenticated`, async () => {
      behaviour = () => ({ [claim]: 'forged' });
      const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
      expect(result.status).to.equal(400);
      expect(result.body['error_description']).to.equal(`getCustomJwtClaims may not set reserved claims: ${claim}`);
    });
  }

  it("drops the authentication claims a deployment's extraTokenClaims adds, from impersonation tokens only", async () => {
    const forged = Object.fromEntries(authenticationClaims.map((claim) => [claim, 'forged']));
    const other = await startProvider({ configuration: { extraTokenClaims: () => ({ ...forged, tenant: 'acme' }) } });
    try {
      const result = await exchange(other, { subject_token: await subjectToken(other), resource: API });
      const claims = decodeJwt(result.body['access_token'] as string);
      expect(claims['tenant']).to.equal('acme');
      for (const claim of authenticationClaims) expect(claims, claim).to.not.have.property(claim);
    } finally {
      await other.close();
    }
  });

  it('answers a hook that fails at once with a rejection, never a synchronous throw: the step timing it ends', async () => {
    const input = {} as CustomJwtClaimsInput;
    const thrown = () => {
      throw new Error('database down');
    };
    for (const [hook, description] of [
      [thrown, /getCustomJwtClaims failed/],
      [() => ({ act: { sub: 'mallory' } }), /reserved claims: act/],
    ] as const) {
      const answer = runCustomClaims(hook as never, input, 200);
      expect(answer).to.be.instanceOf(Promise);
      const error = await (answer as Promise<unknown>).then(
        () => expect.fail('resolved'),
        (refused: unknown) => refused as { error: string; error_description: string },
      );
      expect(error.error).to.equal('invalid_request');
      expect(error.error_description).to.match(description);
    }
    expect(runCustomClaims(() => ({ tier: 'gold' }), input, 200)).to.deep.equal({ tier: 'gold' });
  });

  it("does not expose the hook's internal error message to the client", async () => {
    behaviour = () => {
      throw new Error('password=hunter2');
    };
    const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
    expect(JSON.stringify(result.body)).to.not.include('hunter2');
  });
});
