import { Readable } from 'node:stream';
import type Koa from 'koa';
import { expect } from 'chai';
import type { Adapter } from 'oidc-provider';
import { EVENTS, SUBJECT_TOKEN_PREFIX, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { instantiateAdapter } from '../../lib/adapters/contracts/entries.js';
import { ManagementError } from '../../lib/errors.js';
import { readJsonObject } from '../../lib/http/body.js';
import { hashSubjectToken } from '../../lib/subject-tokens/token.js';
import { CLIENTS, MANAGEMENT, startProvider, type TestProvider } from '../support/provider.js';
import { managementRequest, m2mToken, userAccessToken, tokenRequest } from '../support/http.js';

describe('Management API: POST /api/subject-tokens', () => {
  let tp: TestProvider;
  let token: string;
  before(async () => {
    tp = await startProvider({
      plugin: {
        canImpersonate: ({ subject }) =>
          subject === 'admin' ? { reason: 'administrators may not be impersonated' } : true,
        maxContextBytes: 256,
      },
    });
    token = await m2mToken(tp);
  });
  after(() => tp.close());

  describe('success', () => {
    it('answers 201 with an opaque, prefixed, 256-bit subject token and its lifetime in seconds', async () => {
      const result = await managementRequest(tp, { userId: 'bob', context: { ticketId: 'T-1' } }, token);
      expect(result.status).to.equal(201);
      expect(result.headers.get('cache-control')).to.equal('no-store');
      expect(Object.keys(result.body).sort()).to.deep.equal(['expiresIn', 'id', 'subjectToken']);
      const subjectToken = result.body['subjectToken'] as string;
      expect(subjectToken.startsWith(SUBJECT_TOKEN_PREFIX)).to.equal(true);
      const random = Buffer.from(subjectToken.slice(SUBJECT_TOKEN_PREFIX.length), 'base64url');
      expect(random.length * 8).to.be.at.least(256);
      expect(result.body['expiresIn']).to.equal(60);
    });

    it('issues a different token every time', async () => {
      const one = await managementRequest(tp, { userId: 'bob' }, token);
      const two = await managementRequest(tp, { userId: 'bob' }, token);
      expect(one.body['subjectToken']).to.not.equal(two.body['subjectToken']);
    });

    it('stores only the hash of the token', async () => {
      const result = await managementRequest(tp, { userId: 'bob', context: { ticketId: 'T-hash' } }, token);
      const subjectToken = result.body['subjectToken'] as string;
      const adapter: Adapter = instantiateAdapter(tp.adapter, 'SubjectToken');
      expect(await adapter.find(subjectToken)).to.equal(undefined);
      const stored = await adapter.find(hashSubjectToken(subjectToken));
      expect(stored).to.include({ subject: 'bob' });
      expect(JSON.stringify(stored)).to.not.include(subjectToken);
      expect(JSON.stringify(stored)).to.not.include(subjectToken.slice(SUBJECT_TOKEN_PREFIX.length));
    });

    it('emits impersonation.subject_token.created with the caller, subject, context and a non-secret id', async () => {
      const events: ImpersonationEvent[] = [];
      const stop = onImpersonationEvent(tp.provider, EVENTS.subjectTokenCreated, (event) => events.push(event));
      try {
        const result = await managementRequest(tp, { userId: 'bob', context: { reason: 'login issue' } }, token);
        expect(events).to.have.length(1);
        const [event] = events;
        expect(event).to.include({ subject: 'bob', createdBy: CLIENTS.backend.client_id });
        expect(event!.context).to.deep.equal({ reason: 'login issue' });
        expect(event!.subjectTokenId).to.match(/^stid_/);
        expect(JSON.stringify(event)).to.not.include(result.body['subjectToken'] as string);
      } finally {
        stop();
      }
    });
  });

  describe('caller authentication', () => {
    it('answers 401 with a bare Bearer challenge when no token is sent', async () => {
      const result = await managementRequest(tp, { userId: 'bob' }, undefined);
      expect(result.status).to.equal(401);
      expect(result.headers.get('www-authenticate')).to.equal('Bearer');
      expect(result.body['error']).to.equal('invalid_token');
      expect(result.body['error_description']).to.be.a('string');
    });

    it('answers 401 invalid_token for a forged or tampered token', async () => {
      const [header, payload, signature] = token.split('.');
      const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
      const tampered = [
        header,
        Buffer.from(JSON.stringify({ ...claims, client_id: 'x' })).toString('base64url'),
        signature,
      ].join('.');
      for (const value of ['not-a-token', tampered, `${header}.${payload}.`]) {
        const result = await managementRequest(tp, { userId: 'bob' }, value);
        expect(result.status, value).to.equal(401);
        expect(result.headers.get('www-authenticate')).to.match(/^Bearer error="invalid_token"/);
        expect(result.body['error']).to.equal('invalid_token');
      }
    });

    it('answers 401 once the M2M token expires, though it was accepted (and its signature check remembered) before', async () => {
      // exp is whole seconds: a 1-second token issued late in a second may expire before its first use.
      const short = await startProvider({ plugin: { managementTokenTTL: 3 } });
      try {
        const value = await m2mToken(short);
        expect((await managementRequest(short, { userId: 'bob' }, value)).status).to.equal(201);
        const exp = JSON.parse(Buffer.from(value.split('.')[1]!, 'base64url').toString()).exp as number;
        await new Promise((resolve) => setTimeout(resolve, (exp + 1) * 1000 - Date.now()));
        const expired = await managementRequest(short, { userId: 'bob' }, value);
        expect(expired.status).to.equal(401);
        expect(expired.body['error']).to.equal('invalid_token');
      } finally {
        await short.close();
      }
    });

    it('answers 401 for a token of another issuer (same keys, different iss)', async () => {
      const other = await startProvider();
      try {
        const foreign = await m2mToken(other);
        const result = await managementRequest(tp, { userId: 'bob' }, foreign);
        expect(result.status).to.equal(401);
      } finally {
        await other.close();
      }
    });

    it('answers 401 for a user access token (authorization code), even with a valid signature', async () => {
      const userToken = await userAccessToken(tp, 'alice');
      const result = await managementRequest(tp, { userId: 'bob' }, userToken);
      expect(result.status).to.equal(401);
    });

    it('answers 401 for an M2M token issued for another resource', async () => {
      const other = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', scope: 'profile:read', resource: 'https://api.example.com' },
        CLIENTS.noScopeBackend,
      );
      expect(other.status).to.equal(200);
      const result = await managementRequest(tp, { userId: 'bob' }, other.body['access_token'] as string);
      expect(result.status).to.equal(401);
      expect(result.body['error_description']).to.match(/not for the Management API/);
    });

    it('answers 403 insufficient_scope for a management token without the scope', async () => {
      const scopeless = await m2mToken(tp, CLIENTS.backend, null);
      const result = await managementRequest(tp, { userId: 'bob' }, scopeless);
      expect(result.status).to.equal(403);
      expect(result.body['error']).to.equal('insufficient_scope');
      expect(result.headers.get('www-authenticate')).to.equal(
        'Bearer error="insufficient_scope", scope="subject-tokens:create"',
      );
    });

    it('never hands the management scope to a client whose metadata does not list it', async () => {
      const result = await tokenRequest(
        tp,
        { grant_type: 'client_credentials', scope: 'subject-tokens:create', resource: MANAGEMENT },
        CLIENTS.noScopeBackend,
      );
      expect(result.status).to.equal(400);
      expect(result.body['error']).to.equal('invalid_target');
    });

    it('never hands the management resource to an end-user flow', async () => {
      let failure: unknown;
      try {
        await userAccessToken(tp, 'alice', {
          client: CLIENTS.web,
          scope: 'openid subject-tokens:create',
          resource: MANAGEMENT,
        });
      } catch (error) {
        failure = error;
      }
      expect(String(failure)).to.match(/invalid_target/);
    });
  });

  describe('body', () => {
    const cases: Array<[string, unknown, string | undefined, string | undefined]> = [
      ['missing userId', { context: {} }, undefined, /userId/.source],
      ['empty userId', { userId: '' }, undefined, /userId/.source],
      ['numeric userId', { userId: 42 }, undefined, /userId/.source],
      ['array context', { userId: 'bob', context: ['a'] }, undefined, /context/.source],
      ['string context', { userId: 'bob', context: 'text' }, undefined, /context/.source],
      ['null context', { userId: 'bob', context: null }, undefined, /context/.source],
      ['a JSON array body', [], undefined, /object/.source],
      ['unknown field', { userId: 'bob', userid: 'x' }, undefined, /unknown field/.source],
      ['malformed JSON', undefined, '{"userId": ', /JSON/.source],
      ['non-string clientId', { userId: 'bob', clientId: 7 }, undefined, /clientId/.source],
    ];
    for (const [name, body, raw, pattern] of cases) {
      it(`answers 400 invalid_request for ${name}`, async () => {
        const result = await managementRequest(tp, body, token, raw === undefined ? {} : { raw });
        expect(result.status).to.equal(400);
        expect(result.body['error']).to.equal('invalid_request');
        expect(result.body['error_description']).to.match(new RegExp(pattern!));
      });
    }

    it('answers 400 for a wrong content type', async () => {
      const result = await managementRequest(tp, undefined, token, {
        contentType: 'application/x-www-form-urlencoded',
        raw: 'userId=bob',
      });
      expect(result.status).to.equal(400);
      expect(result.body['error_description']).to.match(/application\/json/);
    });

    it('answers 413 when the context exceeds the configured cap, and creates nothing', async () => {
      const events: ImpersonationEvent[] = [];
      const stop = onImpersonationEvent(tp.provider, EVENTS.subjectTokenCreated, (event) => events.push(event));
      try {
        const result = await managementRequest(tp, { userId: 'bob', context: { note: 'x'.repeat(300) } }, token);
        expect(result.status).to.equal(413);
        expect(result.body['error']).to.equal('request_too_large');
        expect(events).to.have.length(0);
      } finally {
        stop();
      }
    });

    it('answers 413 for a body far beyond any context, without reading it all', async () => {
      const result = await managementRequest(tp, undefined, token, {
        raw: JSON.stringify({ userId: 'bob', context: { note: 'x'.repeat(100_000) } }),
      });
      expect(result.status).to.equal(413);
    });
  });

  describe('subject and policy', () => {
    it('answers 404 for a user findAccount does not know', async () => {
      const result = await managementRequest(tp, { userId: 'mallory' }, token);
      expect(result.status).to.equal(404);
      expect(result.body['error']).to.equal('user_not_found');
    });

    it('answers 403 access_denied when canImpersonate refuses, with its reason, and emits a refusal', async () => {
      const events: ImpersonationEvent[] = [];
      const stop = onImpersonationEvent(tp.provider, EVENTS.subjectTokenRefused, (event) => events.push(event));
      try {
        const result = await managementRequest(tp, { userId: 'admin', context: { ticketId: 'T-9' } }, token);
        expect(result.status).to.equal(403);
        expect(result.body).to.deep.equal({
          error: 'access_denied',
          error_description: 'administrators may not be impersonated',
        });
        expect(events).to.have.length(1);
        expect(events[0]).to.include({
          subject: 'admin',
          createdBy: CLIENTS.backend.client_id,
          reason: 'administrators may not be impersonated',
        });
      } finally {
        stop();
      }
    });

    it('refuses a client binding to a client that cannot use token exchange', async () => {
      for (const clientId of ['no-such-client', CLIENTS.notAllowed.client_id]) {
        const result = await managementRequest(tp, { userId: 'bob', clientId }, token);
        expect(result.status, clientId).to.equal(400);
        expect(result.body['error_description']).to.match(/clientId/);
      }
    });
  });

  describe('options', () => {
    it('accepts opaque M2M tokens when the management resource issues them', async () => {
      const opaque = await startProvider({ plugin: { managementTokenFormat: 'opaque' } });
      try {
        const value = await m2mToken(opaque);
        expect(value.split('.')).to.have.length(1);
        const ok = await managementRequest(opaque, { userId: 'bob' }, value);
        expect(ok.status).to.equal(201);
        const bad = await managementRequest(opaque, { userId: 'bob' }, `${value}x`);
        expect(bad.status).to.equal(401);
        const scopeless = await m2mToken(opaque, CLIENTS.backend, null);
        expect((await managementRequest(opaque, { userId: 'bob' }, scopeless)).status).to.equal(403);
      } finally {
        await opaque.close();
      }
    });

    it('lets authenticateManagementRequest replace the built-in check', async () => {
      const custom = await startProvider({
        plugin: {
          authenticateManagementRequest: (ctx) => {
            const key = ctx.get('authorization');
            if (key === 'Bearer let-me-in') return { clientId: 'ops-backend' };
            if (key === 'Bearer read-only') return { error: 'insufficient_scope' };
            return { error: 'invalid_token' };
          },
          subjectTokenTTL: 30,
        },
      });
      try {
        const ok = await managementRequest(custom, { userId: 'bob' }, 'let-me-in');
        expect(ok.status).to.equal(201);
        expect(ok.body['expiresIn']).to.equal(30);
        expect((await managementRequest(custom, { userId: 'bob' }, 'read-only')).status).to.equal(403);
        expect((await managementRequest(custom, { userId: 'bob' }, 'nope')).status).to.equal(401);
        expect((await managementRequest(custom, { userId: 'bob' }, await m2mToken(custom))).status).to.equal(401);
      } finally {
        await custom.close();
      }
    });
  });
});

describe('Management API: reading the body', () => {
  function contextReading(chunks: Array<string | Error>): Koa.Context {
    const req = new Readable({ read() {} });
    for (const chunk of chunks) {
      if (chunk instanceof Error) queueMicrotask(() => req.destroy(chunk));
      else req.push(chunk);
    }
    return { is: () => 'application/json', get: () => '', req } as unknown as Koa.Context;
  }

  it('answers 400 when the client goes away mid-body, not a 500 that reports the service as failing', async () => {
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    let failure: unknown;
    try {
      await readJsonObject(contextReading(['{"userId":', aborted]), 1024);
    } catch (error) {
      failure = error;
    }
    expect(failure).to.be.instanceOf(ManagementError);
    expect(failure).to.include({ status: 400, error: 'invalid_request' });
  });

  it('stops reading at the limit', async () => {
    let failure: unknown;
    try {
      await readJsonObject(contextReading(['{"userId":"', 'x'.repeat(2000)]), 1024);
    } catch (error) {
      failure = error;
    }
    expect(failure).to.include({ status: 413, error: 'request_too_large' });
  });
});
