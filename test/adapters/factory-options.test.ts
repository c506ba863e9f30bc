import { expect } from 'chai';
import { createMemoryAdapter, createMemoryAuditLog } from '../../lib/index.js';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';

/** Each public factory, given a misspelt option, and what it must answer. */
const MISSPELT: ReadonlyArray<[string, () => unknown, RegExp]> = [
  [
    'createRedisAdapter',
    () => createRedisAdapter({ url: 'redis://127.0.0.1:6379', keyprefix: 'other:' } as never),
    /^createRedisAdapter: option "keyprefix" is unknown; did you mean "keyPrefix"\?$/,
  ],
  [
    'createPostgresAdapter',
    () => createPostgresAdapter({ connectionString: 'postgres://127.0.0.1/test', tabel: 'x' } as never),
    /^createPostgresAdapter: option "tabel" is unknown; did you mean "table"\?$/,
  ],
  [
    'createPostgresAuditLog',
    () => createPostgresAuditLog({ connectionString: 'postgres://127.0.0.1/test', tabel: 'x' } as never),
    /^createPostgresAuditLog: option "tabel" is unknown; did you mean "table"\?$/,
  ],
  [
    'createPostgresAuditLog (a pool option)',
    () => createPostgresAuditLog({ connectionstring: 'postgres://127.0.0.1/test' } as never),
    /^createPostgresAuditLog: option "connectionstring" is unknown; did you mean "connectionString"\?$/,
  ],
  [
    'createMemoryAdapter',
    () => createMemoryAdapter({ limit: { Session: 10 } } as never),
    /^createMemoryAdapter: option "limit" is unknown; did you mean "limits"\?$/,
  ],
  [
    'createMemoryAuditLog',
    () => createMemoryAuditLog({ maxrows: 10 } as never),
    /^createMemoryAuditLog: option "maxrows" is unknown; did you mean "maxRows"\?$/,
  ],
];

describe('Store and trail factories refuse an option they do not know', () => {
  for (const [name, call, message] of MISSPELT) {
    it(`${name}: throws, naming the option and the nearest known one, before opening anything`, () => {
      expect(call).to.throw(message);
    });
  }

  it('names no nearest option when none is close, and never the value given', () => {
    expect(() => createRedisAdapter({ password: 'secret-value' } as never)).to.throw(
      /^createRedisAdapter: option "password" is unknown$/,
    );
  });
});
