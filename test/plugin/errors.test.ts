import { readdirSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { createImpersonation } from '../../lib/index.js';
import { packagesLoadedBy } from '../support/loaded-packages.js';

const lib = new URL('../../../lib/', import.meta.url);

/** The only files that build errors; everything else in lib/ calls them. */
const ERROR_MODULES = new Set(['errors.ts', 'errors/standalone.ts', 'errors/domain.ts']);

/**
 * An error built in place: `new TypeError(`, `Error(` without `new`, one of
 * oidc-provider's (`new errors.InvalidTarget(`), one of the plugin's classes
 * (`new ManagementError(`), or a class of its own (`extends Error`).
 */
const CONSTRUCTION =
  /(?:\bnew\s+(?:errors\.)?[A-Z]\w*Error\w*\s*\(|\bnew\s+errors\.\w+\s*\(|(?<![\w.])(?:Type|Range|Syntax|Reference|Eval|URI|Aggregate)?Error\s*\(|\bextends\s+(?:errors\.\w+|\w*Error)\b)/;

function sourceFiles(): string[] {
  return readdirSync(lib, { recursive: true, encoding: 'utf8' })
    .map((path) => path.split('\\').join('/'))
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'));
}

function constructionsIn(source: string): number[] {
  return source.split('\n').flatMap((line, index) => (CONSTRUCTION.test(line) ? [index + 1] : []));
}

describe('errors', () => {
  it('recognises each way of building an error in place', () => {
    for (const line of [
      'throw new TypeError(\'x: option "y" must be a string\');',
      'throw new Error(`failed ${operation}`);',
      "throw TypeError('no new');",
      'return Promise.reject(Error(message));',
      'throw new errors.InvalidTarget();',
      "throw new errors.InvalidRequest('x');",
      "throw new ManagementError(400, 'invalid_request', 'x');",
      "throw new ImpersonationTokenError('invalid_token', 'x');",
      'export class RefusedError extends Error {',
    ])
      expect(constructionsIn(line), line).to.deep.equal([1]);
    for (const line of [
      'if (error instanceof TypeError) throw error;',
      'function storeError(operation: string, error: unknown): Error {',
      "throw invalidOption('createMemoryAdapter', 'max', 'must be a positive integer');",
      'const failure: Error | undefined = undefined;',
      "throw storeError('migration', error);",
    ])
      expect(constructionsIn(line), line).to.deep.equal([]);
  });

  it('lib/ builds no error outside lib/errors.ts: every one comes from its functions', () => {
    const files = sourceFiles();
    expect(files).to.include('plugin.ts').and.include('errors.ts');
    const found = files
      .filter((path) => !ERROR_MODULES.has(path))
      .flatMap((path) =>
        constructionsIn(readFileSync(new URL(path, lib), 'utf8')).map((line) => `lib/${path}:${line}`),
      );
    expect(found, 'errors built in place; add a function to lib/errors.ts and call it').to.deep.equal([]);
  });

  it('the entry points a resource server, the PostgreSQL store and the command use load no oidc-provider for their errors', () => {
    expect(packagesLoadedBy('index.ts'), 'the check itself').to.include('oidc-provider');
    for (const entry of ['resource-server/index.ts', 'adapters/postgres.ts', 'audit-postgres/index.ts', 'cli/main.ts'])
      expect(
        [...packagesLoadedBy(entry)].filter((name) => name.startsWith('oidc-provider')),
        entry,
      ).to.deep.equal([]);
  });

  it('a configuration error names the function and the option, never the value given, which may be a secret', () => {
    const SECRET = 'canary-5f1c2b9e';
    const connectionString = `postgres://app:${SECRET}@127.0.0.1:5432/test`;
    const calls: Array<[string, RegExp, () => unknown]> = [
      [
        'createImpersonation',
        /^createImpersonation: option "managementResource" must be /,
        () => createImpersonation({ managementResource: `https://${SECRET}.example/api#x` }),
      ],
      [
        'createImpersonation',
        /^createImpersonation: option "store" must be /,
        () => createImpersonation({ managementResource: 'https://as.example/api', store: SECRET as never }),
      ],
      [
        'createImpersonation',
        /^createImpersonation: option "clientSecret" is unknown$/,
        () => createImpersonation({ managementResource: 'https://as.example/api', clientSecret: SECRET } as never),
      ],
      [
        'createPostgresAdapter',
        /^createPostgresAdapter: option "table" must be /,
        () => createPostgresAdapter({ connectionString, table: `t; ${SECRET}` }),
      ],
      [
        'createPostgresAuditLog',
        /^createPostgresAuditLog: pass "pool" or "connectionString", exactly one of them$/,
        () => createPostgresAuditLog({ connectionString, pool: {} as never }),
      ],
      [
        'createRedisAdapter',
        /^createRedisAdapter: pass one of "client", "url" and "cluster", not "client" and "url"$/,
        () => createRedisAdapter({ url: `redis://:${SECRET}@127.0.0.1:6379`, client: {} as never }),
      ],
      [
        'createRedisAdapter',
        /^createRedisAdapter: "clusterOptions" go with "cluster"$/,
        () =>
          createRedisAdapter({ url: 'redis://127.0.0.1:6379', clusterOptions: { redisOptions: { password: SECRET } } }),
      ],
      [
        'createRedisAdapter',
        /^createRedisAdapter: option "client" must keep ioredis's legacy reply mapping, not 'resp3'$/,
        () => createRedisAdapter({ client: { options: { replyMapping: 'resp3', password: SECRET } } as never }),
      ],
      [
        'createRedisAdapter',
        /^createRedisAdapter: option "clusterOptions" must keep ioredis's legacy reply mapping, not 'resp3'$/,
        () =>
          createRedisAdapter({
            cluster: [{ host: '127.0.0.1', port: 7000 }],
            clusterOptions: { redisOptions: { replyMapping: 'resp3', password: SECRET } } as never,
          }),
      ],
    ];
    for (const [name, message, call] of calls) {
      expect(call, name).to.throw(TypeError, message);
      expect(call, name).to.not.throw(new RegExp(SECRET));
    }
  });
});
