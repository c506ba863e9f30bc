/**
 * A minimal RFC 8693 grant with no code of the plugin (it imports nothing of
 * lib/): an impersonation with an opaque actor token written by hand against
 * oidc-provider's public API and a store driver. The bench serves it beside
 * the exchange as each store's bound (docs/benchmarks.md, "The minimal grant").
 * Registered by the bench's provider only (bench/server.ts).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type Koa from 'koa';
import {
  errors,
  type CanBePromise,
  type Client,
  type ClientMetadata,
  type FindAccount,
  type KoaContextWithOIDC,
  type Provider,
  type ResourceServer,
} from 'oidc-provider';
import type pg from 'pg';

export const MINIMAL_GRANT = 'urn:oidc-provider-impersonation:bench:minimal';
/**
 * The same grant with the two reads the exchange's guarantees add on the way (docs/benchmarks.md, "What the
 * guarantees' reads cost"): the subject token read before it is redeemed, the actor token's Grant read after it.
 */
export const MINIMAL_READS_GRANT = 'urn:oidc-provider-impersonation:bench:minimal-reads';
/** Where the bench creates this grant's subject tokens (as it creates the plugin's through the Management API). */
export const MINIMAL_SEED_PATH = '/bench/minimal-subject-tokens';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const SUBJECT_TOKEN_SECONDS = 60;
const PARAMETERS = ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type'];
/** The claims of a token of this grant, on the token object until the JWT customizer adds them. */
const CLAIMS = Symbol('minimal grant claims');

export interface SubjectRecord {
  subject: string;
  actor: string;
  client: string;
  context: Record<string, unknown>;
}

export interface SessionRecord {
  id: string;
  actor: string;
  client: string;
  resource: string;
  scope: string;
  /** Seconds since the epoch; the token names the session (`impersonation_session`). */
  expiresAt: number;
}

export interface MinimalStore {
  seed(hash: string, record: SubjectRecord, seconds: number): Promise<void>;
  /**
   * At once: deletes the subject token if it is unexpired and bound to the session's actor and client,
   * and writes the session with its subject. Undefined, and nothing written, otherwise.
   */
  consume(hash: string, session: SessionRecord): Promise<SubjectRecord | undefined>;
  /** The session `id`, with its subject. */
  session(id: string): Promise<(SessionRecord & { subject: string }) | undefined>;
  /** The subject token's record as stored, whatever its state; nothing changed. */
  peek(hash: string): Promise<SubjectRecord | undefined>;
}

export interface MinimalGrantOptions {
  store: MinimalStore;
  findAccount: FindAccount;
  getResourceServerInfo: (ctx: KoaContextWithOIDC, resource: string, client: Client) => CanBePromise<ResourceServer>;
  /** The deployment's claims hook, from the subject token's creation context. */
  claims?: ((context: Record<string, unknown>) => Record<string, unknown>) | undefined;
  /** The deployment's audit log: one line per exchange. */
  audit?: ((line: Record<string, unknown>) => void) | undefined;
}

const now = () => Math.floor(Date.now() / 1000);
const hashOf = (value: string) => createHash('sha256').update(value).digest('base64url');

export function memoryStore(): MinimalStore {
  const tokens = new Map<string, SubjectRecord & { expiresAt: number }>();
  const sessions = new Map<string, SessionRecord & { subject: string }>();
  return {
    async seed(hash, record, seconds) {
      tokens.set(hash, { ...record, expiresAt: now() + seconds });
    },
    async consume(hash, session) {
      const record = tokens.get(hash);
      if (!record || record.expiresAt <= now() || record.actor !== session.actor || record.client !== session.client)
        return undefined;
      tokens.delete(hash);
      sessions.set(session.id, { ...session, subject: record.subject });
      return record;
    },
    session: async (id) => sessions.get(id),
    peek: async (hash) => tokens.get(hash),
  };
}

/** One script: the subject token checked and deleted, the session set with its expiry (KEYS: token, session). */
const REDIS_CONSUME = `local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local record = cjson.decode(raw)
if record.actor ~= ARGV[1] or record.client ~= ARGV[2] then return false end
redis.call('DEL', KEYS[1])
local session = cjson.decode(ARGV[3])
session.subject = record.subject
redis.call('SET', KEYS[2], cjson.encode(session), 'EX', ARGV[4])
return raw`;

export function redisStore(redis: Redis): MinimalStore {
  redis.defineCommand('minimalConsume', { numberOfKeys: 2, lua: REDIS_CONSUME });
  const consume = (redis as unknown as { minimalConsume(...args: (string | number)[]): Promise<string | null> })
    .minimalConsume;
  return {
    async seed(hash, record, seconds) {
      await redis.set(`subject:${hash}`, JSON.stringify(record), 'EX', seconds);
    },
    async consume(hash, session) {
      const ttl = Math.max(1, session.expiresAt - now());
      const raw = await consume.call(
        redis,
        `subject:${hash}`,
        `session:${session.id}`,
        session.actor,
        session.client,
        JSON.stringify(session),
        ttl,
      );
      return raw === null ? undefined : (JSON.parse(raw) as SubjectRecord);
    },
    async session(id) {
      const raw = await redis.get(`session:${id}`);
      return raw === null ? undefined : (JSON.parse(raw) as SessionRecord & { subject: string });
    },
    async peek(hash) {
      const raw = await redis.get(`subject:${hash}`);
      return raw === null ? undefined : (JSON.parse(raw) as SubjectRecord);
    },
  };
}

/** Two tables in `schema`; the consume is one statement: the DELETE … RETURNING feeds the session's INSERT. */
export async function postgresStore(pool: pg.Pool, schema: string): Promise<MinimalStore> {
  const [tokens, sessions] = [`"${schema}".minimal_subject_token`, `"${schema}".minimal_session`];
  await pool.query(`CREATE TABLE IF NOT EXISTS ${tokens} (hash text PRIMARY KEY, subject text NOT NULL,
      actor text NOT NULL, client text NOT NULL, context jsonb NOT NULL, expires_at timestamptz NOT NULL);
    CREATE TABLE IF NOT EXISTS ${sessions} (id text PRIMARY KEY, subject text NOT NULL, actor text NOT NULL,
      client text NOT NULL, resource text NOT NULL, scope text NOT NULL, expires_at timestamptz NOT NULL)`);
  const consume = `WITH taken AS (DELETE FROM ${tokens}
      WHERE hash = $1 AND actor = $2 AND client = $3 AND expires_at > now() RETURNING subject, actor, client, context),
    kept AS (INSERT INTO ${sessions} (id, subject, actor, client, resource, scope, expires_at)
      SELECT $4, subject, actor, client, $5, $6, to_timestamp($7) FROM taken)
    SELECT subject, actor, client, context FROM taken`;
  return {
    async seed(hash, { subject, actor, client, context }, seconds) {
      await pool.query({
        name: 'minimal-seed',
        text: `INSERT INTO ${tokens} VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))`,
        values: [hash, subject, actor, client, context, seconds],
      });
    },
    async consume(hash, { id, actor, client, resource, scope, expiresAt }) {
      const { rows } = await pool.query<SubjectRecord>({
        name: 'minimal-consume',
        text: consume,
        values: [hash, actor, client, id, resource, scope, expiresAt],
      });
      return rows[0];
    },
    async session(id) {
      const { rows } = await pool.query<SessionRecord & { subject: string }>(
        `SELECT id, subject, actor, client, resource, scope, extract(epoch FROM expires_at)::int AS "expiresAt"
          FROM ${sessions} WHERE id = $1`,
        [id],
      );
      return rows[0];
    },
    async peek(hash) {
      const { rows } = await pool.query<SubjectRecord>({
        name: 'minimal-peek',
        text: `SELECT subject, actor, client, context FROM ${tokens} WHERE hash = $1`,
        values: [hash],
      });
      return rows[0];
    },
  };
}

/** `formats.customizers.jwt`: a token of this grant gets its claims; every JWT of the provider passes here. */
export function minimalClaimsCustomizer(_ctx: unknown, token: object, jwt: { payload: Record<string, unknown> }): void {
  const claims = (token as { [CLAIMS]?: Record<string, unknown> })[CLAIMS];
  if (claims) Object.assign(jwt.payload, claims);
}

/** The provider's configuration for the grant: `console` may use it, and its claims reach its tokens. */
export function minimalConfiguration(clients: readonly ClientMetadata[], console: string) {
  return {
    clients: clients.map((client) =>
      client.client_id === console
        ? { ...client, grant_types: [...(client.grant_types ?? []), MINIMAL_GRANT, MINIMAL_READS_GRANT] }
        : client,
    ),
    formats: { customizers: { jwt: minimalClaimsCustomizer } },
  };
}

/** Registers the grant, and beside it the same grant with the guarantees' reads (MINIMAL_READS_GRANT). */
export function registerMinimalGrant(provider: Provider, options: MinimalGrantOptions): void {
  const { store, findAccount, getResourceServerInfo, claims, audit } = options;
  const minimalExchange =
    (reads: boolean) =>
    async (ctx: KoaContextWithOIDC): Promise<void> => {
      const params = ctx.oidc.params as Record<string, string | undefined>;
      const client = ctx.oidc.client!;
      for (const name of ['subject_token', 'actor_token']) {
        if (!params[name]) throw new errors.InvalidRequest(`missing required parameter '${name}'`);
        if (params[`${name}_type`] !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`unsupported ${name}_type`);
      }
      if ((params['requested_token_type'] ?? ACCESS_TOKEN_TYPE) !== ACCESS_TOKEN_TYPE)
        throw new errors.InvalidRequest('unsupported requested_token_type');
      const resource = params['resource'];
      if (!resource) throw new errors.InvalidTarget('one resource is required');
      // As client_credentials resolves its one resource.
      const resourceServer = new provider.ResourceServer(resource, await getResourceServerInfo(ctx, resource, client));
      const scope = (params['scope'] ?? '').split(' ').filter(Boolean);
      const unknown = scope.filter((name) => !resourceServer.scopes.has(name));
      if (unknown.length) throw new errors.InvalidScope('scope not defined by the resource server', unknown.join(' '));

      const hash = hashOf(params['subject_token']!);
      // With the reads: the subject token beside the actor token, as the exchange reads both before deciding.
      const [actor, found] = reads
        ? await Promise.all([provider.AccessToken.find(params['actor_token']!), store.peek(hash)])
        : [await provider.AccessToken.find(params['actor_token']!), undefined];
      if (!actor || actor.isSenderConstrained()) throw new errors.InvalidGrant('actor_token is invalid');
      if (reads && !found) throw new errors.InvalidGrant('subject_token is unknown');
      // With the reads: the actor token's Grant, which the exchange reads as userinfo would (lib/access-token.ts).
      if (reads && !(actor.grantId && (await provider.Grant.adapter.find(actor.grantId)))) {
        throw new errors.InvalidGrant('actor_token is invalid');
      }

      const token = new provider.AccessToken({
        accountId: '',
        client,
        gty: MINIMAL_GRANT,
        grantId: '',
        scope: scope.join(' ') || undefined,
        resourceServer,
      });
      const session: SessionRecord = {
        id: randomUUID(),
        actor: actor.accountId,
        client: client.clientId,
        resource,
        scope: scope.join(' '),
        expiresAt: now() + token.expiration,
      };
      const record = await store.consume(hash, session);
      if (!record)
        throw new errors.InvalidGrant('subject_token is unknown, used, expired, or bound to another actor or client');
      // Found after the consume (the subject is in the token): an account deleted since burns its token.
      if (!(await findAccount(ctx, record.subject))) throw new errors.InvalidGrant('the subject is gone');

      token.accountId = record.subject;
      (token as { [CLAIMS]?: Record<string, unknown> })[CLAIMS] = {
        ...claims?.(record.context),
        act: { sub: actor.accountId },
        impersonation_session: session.id,
      };
      const value = await token.save();
      audit?.({
        event: 'minimal.exchange',
        session: session.id,
        subject: record.subject,
        actor: session.actor,
        client: session.client,
        resource,
        scope: session.scope,
      });
      // RFC 8693, section 2.2.1.
      ctx.body = {
        access_token: value,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: token.tokenType,
        expires_in: token.expiration,
        scope: token.scope,
      };
    };
  provider.registerGrantType(MINIMAL_GRANT, minimalExchange(false), [...PARAMETERS, 'resource', 'scope']);
  provider.registerGrantType(MINIMAL_READS_GRANT, minimalExchange(true), [...PARAMETERS, 'resource', 'scope']);
}

/** The bench's creation of this grant's subject tokens: `{ userId, actorId, clientId, context }` → 201 `{ subjectToken }`. */
export function minimalSeedRoute(store: MinimalStore): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.path !== MINIMAL_SEED_PATH || ctx.method !== 'POST') return next();
    let body = '';
    for await (const chunk of ctx.req) body += String(chunk);
    const { userId, actorId, clientId, context } = JSON.parse(body) as Record<string, string> & { context: object };
    const value = `mst_${randomBytes(32).toString('base64url')}`;
    const record = {
      subject: userId!,
      actor: actorId!,
      client: clientId!,
      context: context as Record<string, unknown>,
    };
    await store.seed(hashOf(value), record, SUBJECT_TOKEN_SECONDS);
    ctx.status = 201;
    ctx.body = { subjectToken: value };
  };
}
