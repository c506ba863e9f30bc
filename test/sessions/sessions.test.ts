import { expect } from 'chai';
import { createMemoryAdapter, EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import {
  API,
  CLIENTS,
  OPAQUE_API,
  READ_SCOPE,
  REVOKE_SCOPE,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  apiRequest as call,
  decodeJwt,
  exchange,
  expectError,
  introspect,
  logout,
  managementRequest,
  m2mToken,
  subjectToken,
  userAccessToken,
  userSignIn,
  type Reply,
} from '../support/http.js';
import {
  adminToken,
  exchangeAsActor,
  impersonate,
  revokeSession,
  SESSIONS,
  type ImpersonationRequest,
} from '../support/impersonations.js';
import { scaled } from '../support/time.js';

describe('impersonation sessions', () => {
  let tp: TestProvider;
  let alice: string;
  let admin: string;
  let readOnly: string;
  const events: Array<[string, ImpersonationEvent]> = [];

  before(async () => {
    tp = await startProvider({
      plugin: {
        // Read-only unless the ticket says writes are allowed; carol never.
        canExchange: ({ subject, scope, context }) => {
          if (subject === 'carol') return false;
          if (context['widen']) return { scope: [...scope, 'profile:admin'] };
          return context['writes'] ? true : { scope: scope.filter((name) => !name.endsWith(':write')) };
        },
      },
    });
    alice = await userAccessToken(tp, 'alice');
    admin = await adminToken(tp);
    readOnly = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
    for (const name of [
      EVENTS.sessionRevoked,
      EVENTS.sessionEnded,
      EVENTS.subjectTokenWithdrawn,
      EVENTS.revocationsServed,
      EVENTS.exchangeSucceeded,
    ]) {
      onImpersonationEvent(tp.provider, name, (event) => events.push([name, event]));
    }
  });
  after(() => tp.close());

  /** alice impersonates bob for ticket T-1 on API with profile:read, unless the test says otherwise. */
  const impersonateAsAlice = (request: Partial<ImpersonationRequest> = {}) =>
    impersonate(tp, {
      actorToken: alice,
      resource: API,
      scope: 'profile:read',
      subject: { userId: 'bob', context: { ticketId: 'T-1' } },
      ...request,
    });

  describe('a session per exchange', () => {
    it('names its session in the token and the success event, and lists it with who, whom, where and why', async () => {
      events.length = 0;
      const { session } = await impersonateAsAlice();
      expect(session).to.match(/^imp_[A-Za-z0-9_-]{22}$/);
      const succeeded = events.find(([name]) => name === EVENTS.exchangeSucceeded)![1];
      expect(succeeded.sessionId).to.equal(session);

      const read = await call(tp, 'GET', `${SESSIONS}/${session}`, readOnly);
      expect(read.status).to.equal(200);
      expect(read.body).to.include({
        id: session,
        subject: 'bob',
        actor: 'alice',
        clientId: CLIENTS.console.client_id,
        resource: API,
        scope: 'profile:read',
        state: 'active',
      });
      expect(read.body['context']).to.deep.equal({ ticketId: 'T-1' });
      expect(Date.parse(read.body['createdAt'] as string)).to.be.closeTo(Date.now(), 5000);
      expect(Date.parse(read.body['expiresAt'] as string) - Date.parse(read.body['createdAt'] as string)).to.equal(
        900_000,
      );
      expect(read.headers.get('cache-control')).to.equal('no-store');

      const listed = await call(tp, 'GET', `${SESSIONS}?subject=bob&limit=100`, readOnly);
      expect((listed.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.include(session);
    });

    it('backs an opaque token with a Grant: introspection shows act and the session', async () => {
      const { token, session } = await impersonateAsAlice({
        resource: OPAQUE_API,
        subject: { userId: 'bob' },
        scope: 'read',
      });
      const introspection = await introspect(tp, token);
      expect(introspection).to.include({ active: true, sub: 'bob', impersonation_session: session });
      expect(introspection['act']).to.deep.equal({ sub: 'alice' });
      const stored = await tp.provider.AccessToken.find(token);
      const grant = await tp.provider.Grant.find(stored!.grantId!);
      expect(grant).to.include({ accountId: 'bob', clientId: CLIENTS.console.client_id });
    });
  });

  describe('listing', () => {
    it('filters by subject, actor and client, and pages with limit and an opaque cursor', async () => {
      const mine = [];
      for (let i = 0; i < 3; i += 1) mine.push((await impersonateAsAlice({ subject: { userId: 'admin' } })).session);
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Reply = await call(
          tp,
          'GET',
          `${SESSIONS}?subject=admin&actor=alice&clientId=${CLIENTS.console.client_id}&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
          readOnly,
        );
        expect(page.status, JSON.stringify(page.body)).to.equal(200);
        const items = page.body['items'] as Array<{ id: string; subject: string }>;
        expect(items.length).to.be.at.most(2);
        for (const item of items) expect(item.subject).to.equal('admin');
        seen.push(...items.map((item) => item.id));
        cursor = page.body['nextCursor'] as string | null;
      } while (cursor);
      expect(seen.sort()).to.deep.equal(mine.sort());
      const nobody = await call(tp, 'GET', `${SESSIONS}?actor=nobody`, readOnly);
      expect(nobody.body).to.deep.equal({ items: [], nextCursor: null });
    });

    const refusals: Array<[string, string, RegExp]> = [
      ['a cursor it never returned', '?cursor=bm90LWEtY3Vyc29y', /cursor/],
      ['a limit of 0', '?limit=0', /limit/],
      ['a limit above 100', '?limit=101', /limit/],
      ['a limit that is not a number', '?limit=ten', /limit/],
      ['an unknown parameter', '?state=revoked', /unknown query parameter: state/],
      ['a filter given twice', '?subject=bob&subject=carol', /subject/],
      ['an empty filter', '?actor=', /actor/],
    ];
    for (const [name, query, description] of refusals) {
      it(`answers 400 invalid_request for ${name}`, async () => {
        expectError(await call(tp, 'GET', `${SESSIONS}${query}`, readOnly), 400, 'invalid_request', description);
      });
    }
  });

  describe('who may call', () => {
    it('answers 401 without a token, 403 for a token without the scope each endpoint needs', async () => {
      const { session } = await impersonateAsAlice();
      const creator = await m2mToken(tp);
      expectError(await call(tp, 'GET', SESSIONS), 401, 'invalid_token');
      expectError(await call(tp, 'GET', SESSIONS, 'not-a-token'), 401, 'invalid_token');
      const forbidden = await call(tp, 'GET', SESSIONS, creator);
      expectError(forbidden, 403, 'insufficient_scope');
      expect(forbidden.headers.get('www-authenticate')).to.equal(
        `Bearer error="insufficient_scope", scope="${READ_SCOPE}"`,
      );
      expectError(await call(tp, 'GET', `${SESSIONS}/${session}`, creator), 403, 'insufficient_scope');
      expectError(await revokeSession(tp, readOnly, session), 403, 'insufficient_scope');
      expectError(
        await call(tp, 'DELETE', `/api/subject-tokens/stid_AAAAAAAAAAAAAAAA`, readOnly),
        403,
        'insufficient_scope',
      );
      expectError(await managementRequest(tp, { userId: 'bob' }, admin), 403, 'insufficient_scope');
    });

    it('answers 404 for an unknown or malformed session id', async () => {
      expectError(await call(tp, 'GET', `${SESSIONS}/imp_AAAAAAAAAAAAAAAAAAAAAA`, readOnly), 404, 'not_found');
      expectError(await call(tp, 'GET', `${SESSIONS}/nonsense`, readOnly), 404, 'not_found');
      expectError(await revokeSession(tp, admin, 'imp_AAAAAAAAAAAAAAAAAAAAAA'), 404, 'not_found');
    });

    it('never advertises the new scopes, nor lets an end-user flow carry them', async () => {
      const discovery = (await (await fetch(`${tp.base}/.well-known/openid-configuration`)).json()) as {
        scopes_supported: string[];
      };
      expect(discovery.scopes_supported).to.not.include.members([READ_SCOPE, REVOKE_SCOPE]);
      const token = await userAccessToken(tp, 'alice', { scope: `openid ${READ_SCOPE} ${REVOKE_SCOPE}` });
      expect(String((await introspect(tp, token))['scope'])).to.equal('openid');
    });
  });

  describe('revocation', () => {
    it('revokes a JWT session: 204, recorded with who and why, off the list, on the revocation feed, idempotent', async () => {
      events.length = 0;
      const { session } = await impersonateAsAlice();
      const revoked = await revokeSession(tp, admin, session, { reason: 'ticket closed' });
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
      const read = await call(tp, 'GET', `${SESSIONS}/${session}`, readOnly);
      expect(read.body).to.include({
        state: 'revoked',
        revokedBy: CLIENTS.admin.client_id,
        revocationReason: 'ticket closed',
      });
      const listed = await call(tp, 'GET', `${SESSIONS}?subject=bob&limit=100`, readOnly);
      expect((listed.body['items'] as Array<{ id: string }>).map((item) => item.id)).to.not.include(session);

      const feed = await call(tp, 'GET', `${SESSIONS}/revocations`);
      expect(feed.status).to.equal(200);
      expect((feed.body['revoked'] as Array<{ id: string }>).map((entry) => entry.id)).to.include(session);

      expect((await revokeSession(tp, admin, session)).status).to.equal(204);
      const revokedEvents = events.filter(([name]) => name === EVENTS.sessionRevoked).map(([, event]) => event);
      expect(revokedEvents).to.have.length(1);
      expect(revokedEvents[0]).to.include({
        sessionId: session,
        subject: 'bob',
        actor: 'alice',
        revokedBy: CLIENTS.admin.client_id,
        reason: 'ticket closed',
      });
      expect(events.some(([name]) => name === EVENTS.revocationsServed)).to.equal(true);
    });

    it('revokes an opaque session: its token introspects active: false at once', async () => {
      const { token, session } = await impersonateAsAlice({
        resource: OPAQUE_API,
        subject: { userId: 'bob' },
        scope: 'read',
      });
      expect((await introspect(tp, token))['active']).to.equal(true);
      expect((await revokeSession(tp, admin, session)).status).to.equal(204);
      expect(await introspect(tp, token)).to.deep.equal({ active: false });
    });

    it('reports a session stopped by ten concurrent DELETEs once', async () => {
      events.length = 0;
      const { session } = await impersonateAsAlice();
      const replies = await Promise.all(Array.from({ length: 10 }, () => revokeSession(tp, admin, session)));
      expect(replies.map((reply) => reply.status)).to.deep.equal(Array(10).fill(204));
      expect(
        events.filter(([name, event]) => name === EVENTS.sessionRevoked && event.sessionId === session),
      ).to.have.length(1);
    });

    it('pages the revocation feed by limit (1 to 1000) through nextCursor, each stopped session once', async () => {
      for (let i = 0; i < 2; i += 1) {
        const { session } = await impersonateAsAlice();
        expect((await revokeSession(tp, admin, session)).status).to.equal(204);
      }
      const ids = (body: Record<string, unknown>) =>
        (body['revoked'] as Array<{ id: string }>).map((entry) => entry.id);
      const whole = await call(tp, 'GET', `${SESSIONS}/revocations`);
      expect(whole.body['nextCursor']).to.equal(null);
      const walked: string[] = [];
      let cursor: unknown = undefined;
      do {
        const query = new URLSearchParams({ limit: '1', ...(typeof cursor === 'string' ? { cursor } : {}) });
        const page = await call(tp, 'GET', `${SESSIONS}/revocations?${query}`);
        expect(page.status).to.equal(200);
        expect(ids(page.body).length).to.be.at.most(1);
        walked.push(...ids(page.body));
        cursor = page.body['nextCursor'];
      } while (typeof cursor === 'string');
      expect(walked).to.deep.equal(ids(whole.body));
      expect(walked.length).to.be.at.least(2);
      for (const limit of ['0', '1001', 'ten', '1.5', '-1']) {
        expectError(await call(tp, 'GET', `${SESSIONS}/revocations?limit=${limit}`), 400, 'invalid_request', /limit/);
      }
    });

    it('refuses a revocation body that is not { reason }', async () => {
      const { session } = await impersonateAsAlice();
      expectError(
        await revokeSession(tp, admin, session, { reason: 'x', by: 'me' }),
        400,
        'invalid_request',
        /unknown field: by/,
      );
      expectError(await revokeSession(tp, admin, session, { reason: '' }), 400, 'invalid_request', /reason/);
      expect((await call(tp, 'GET', `${SESSIONS}/${session}`, readOnly)).body['state']).to.equal('active');
    });
  });

  describe("the actor's logout", () => {
    it('ends every impersonation started from that sign-in, JWT and opaque, and no other', async () => {
      events.length = 0;
      const signedIn = await userSignIn(tp, 'alice');
      const jwt = await impersonate(tp, { scope: 'profile:read', actorToken: signedIn.accessToken });
      const opaque = await impersonate(tp, { resource: OPAQUE_API, scope: 'read', actorToken: signedIn.accessToken });
      const elsewhere = await impersonate(tp, { scope: 'profile:read', actorToken: alice });
      const jwtSession = jwt.session;
      const opaqueSession = opaque.session;

      await logout(tp, signedIn.cookies);
      // The sessions end right after the logout request, not within it: wait up to a second.
      const deadline = Date.now() + scaled(1000);
      const read = () =>
        Promise.all([jwtSession, opaqueSession].map((id) => call(tp, 'GET', `${SESSIONS}/${id}`, readOnly)));
      let reads = await read();
      while (reads.some((reply) => reply.body['state'] === 'active') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        reads = await read();
      }
      for (const reply of reads) expect(reply.body).to.include({ state: 'ended', endReason: 'actor_logout' });
      expect(await introspect(tp, opaque.token)).to.deep.equal({ active: false });
      const feed = await call(tp, 'GET', `${SESSIONS}/revocations`);
      expect((feed.body['revoked'] as Array<{ id: string }>).map((entry) => entry.id)).to.include.members([
        jwtSession,
        opaqueSession,
      ]);
      const other = elsewhere.session;
      expect((await call(tp, 'GET', `${SESSIONS}/${other}`, readOnly)).body['state']).to.equal('active');
      const ended = events.filter(([name]) => name === EVENTS.sessionEnded).map(([, event]) => event.sessionId);
      expect(ended.sort()).to.deep.equal([jwtSession, opaqueSession].sort());
    });
  });

  describe('withdrawing a subject token', () => {
    it('answers 204; a later exchange is invalid_request; again 204; unknown 404; a redeemed one 409', async () => {
      events.length = 0;
      const created = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
      const { subjectToken: value, id } = created.body as { subjectToken: string; id: string };
      expect(id).to.match(/^stid_/);
      expect((await call(tp, 'DELETE', `/api/subject-tokens/${id}`, admin)).status).to.equal(204);
      expectError(await exchange(tp, { subject_token: value, resource: API }), 400, 'invalid_request', /withdrawn/);
      expect((await call(tp, 'DELETE', `/api/subject-tokens/${id}`, admin)).status).to.equal(204);
      expect(
        events.filter(([name]) => name === EVENTS.subjectTokenWithdrawn).map(([, event]) => event.subjectTokenId),
      ).to.deep.equal([id, id]);

      expectError(await call(tp, 'DELETE', '/api/subject-tokens/stid_AAAAAAAAAAAAAAAA', admin), 404, 'not_found');
      expectError(await call(tp, 'DELETE', '/api/subject-tokens/nonsense', admin), 404, 'not_found');
      const redeemed = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
      expect(
        (await exchange(tp, { subject_token: redeemed.body['subjectToken'] as string, resource: API })).status,
      ).to.equal(200);
      expectError(
        await call(tp, 'DELETE', `/api/subject-tokens/${redeemed.body['id'] as string}`, admin),
        409,
        'already_redeemed',
      );
    });
  });

  describe('a policy that narrows', () => {
    it('grants fewer scopes than asked, and the response says which', async () => {
      const { reply, token } = await impersonateAsAlice({
        subject: { userId: 'bob' },
        scope: 'profile:read profile:write',
      });
      expect(reply.body['scope']).to.equal('profile:read');
      expect(decodeJwt(token)['scope']).to.equal('profile:read');
      const allowed = await impersonateAsAlice({
        subject: { userId: 'bob', context: { writes: true } },
        scope: 'profile:read profile:write',
      });
      expect(allowed.reply.body['scope']).to.equal('profile:read profile:write');
    });

    it('can never widen: such an answer refuses the exchange and burns nothing', async () => {
      const subject = await subjectToken(tp, { userId: 'bob', context: { widen: true } });
      const result = await exchange(tp, { subject_token: subject, resource: API, scope: 'profile:read' });
      expectError(result, 400, 'invalid_request', /never widen/);
    });
  });
});

describe('actor freshness (step-up, RFC 9470)', function () {
  this.timeout(20_000);

  it('refuses a sign-in older than maxAge with insufficient_user_authentication and max_age, burning nothing', async () => {
    // Long enough for a loaded machine to sign in and exchange within it; auth_time has whole seconds.
    const maxAge = 5;
    const tp = await startProvider({ plugin: { actorAuthentication: { maxAge } } });
    try {
      const signedInBefore = Date.now();
      const fresh = await userAccessToken(tp, 'alice');
      const subject = await subjectToken(tp);
      const first = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: fresh });
      expect(first.status).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, signedInBefore + (maxAge + 1.1) * 1000 - Date.now()));
      const stale = await exchangeAsActor(tp, { subjectToken: subject, actorToken: fresh });
      expectError(stale, 400, 'insufficient_user_authentication', /sign in again/);
      expect(stale.body['max_age']).to.equal(maxAge);
      const again = await userAccessToken(tp, 'alice');
      expect((await exchangeAsActor(tp, { subjectToken: subject, actorToken: again })).status).to.equal(200);
    } finally {
      await tp.close();
    }
  });

  it('refuses a sign-in whose acr is not among acrValues, and a JWT actor token that states neither', async () => {
    const tp = await startProvider({ plugin: { actorAuthentication: { acrValues: ['urn:example:mfa'] } } });
    try {
      const opaque = await userAccessToken(tp, 'alice');
      const weak = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: opaque });
      expectError(weak, 400, 'insufficient_user_authentication');
      expect(weak.body['acr_values']).to.equal('urn:example:mfa');
      const jwt = await userAccessToken(tp, 'alice', { scope: 'openid', resource: 'https://actor.example.com' });
      const unknown = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: jwt });
      expectError(unknown, 400, 'insufficient_user_authentication');
    } finally {
      await tp.close();
    }
  });

  it("reads an opaque actor token's sign-in once: its auth_time is the one read where its origins are checked", async () => {
    let signInReads = 0;
    const Memory = createMemoryAdapter();
    class CountingSignInReads extends Memory {
      readonly #model: string;
      constructor(model: string) {
        super(model);
        this.#model = model;
      }
      override async findByUid(uid: string) {
        if (this.#model === 'Session') signInReads += 1;
        return super.findByUid(uid);
      }
    }
    const tp = await startProvider({ adapter: CountingSignInReads, plugin: { actorAuthentication: { maxAge: 300 } } });
    try {
      const actorToken = await userAccessToken(tp, 'alice');
      // The first exchange of a sign-in announces it and reads it again (Invariant 23); the next one does not.
      expect((await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken })).status).to.equal(200);
      const subject = await subjectToken(tp);
      signInReads = 0;
      expect((await exchangeAsActor(tp, { subjectToken: subject, actorToken })).status).to.equal(200);
      expect(signInReads).to.equal(1);
    } finally {
      await tp.close();
    }
  });

  it('validates the option', async () => {
    for (const actorAuthentication of [{}, { maxAge: 0 }, { acrValues: [] }, { acrValues: ['a b'] }]) {
      let thrown: unknown;
      try {
        await startProvider({ plugin: { actorAuthentication } });
      } catch (error) {
        thrown = error;
      }
      expect(String(thrown)).to.match(/actorAuthentication/);
    }
  });
});
