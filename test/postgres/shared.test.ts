import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAdapter } from '../../lib/adapters/postgres.js';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { DATABASE_URL } from '../support/postgres.js';

type Options = { pool?: pg.Pool; connectionString?: string; schema?: unknown; table?: unknown };

/** What lib/postgres/ gives the adapter and the audit log alike: one check of their options. */
const FACTORIES: ReadonlyArray<[string, (options: Options) => unknown]> = [
  ['createPostgresAdapter', (options) => createPostgresAdapter(options as Parameters<typeof createPostgresAdapter>[0])],
  [
    'createPostgresAuditLog',
    (options) => createPostgresAuditLog(options as Parameters<typeof createPostgresAuditLog>[0]),
  ],
];

describe('PostgreSQL adapter and audit log: one check of pool, schema and table', () => {
  let pool: pg.Pool;
  before(() => {
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  });
  after(() => pool.end());

  for (const [name, create] of FACTORIES) {
    it(`${name} takes exactly one of pool and connectionString`, () => {
      expect(() => create({})).to.throw(TypeError, `${name}: pass "pool" or "connectionString", exactly one of them`);
      expect(() => create({ pool, connectionString: DATABASE_URL })).to.throw(TypeError, /exactly one of them/);
    });

    it(`${name} takes as schema and table only a string that is a plain SQL identifier of at most 41 characters`, () => {
      for (const table of [
        'x; DROP TABLE y',
        'a"b',
        '1abc',
        'a'.repeat(42),
        '',
        ['audit'],
        42,
        { toString: () => 'a' },
      ])
        expect(() => create({ pool, table }), JSON.stringify(table)).to.throw(
          TypeError,
          `${name}: option "table" must be a plain SQL identifier (letters, digits, _; at most 41)`,
        );
      expect(() => create({ pool, schema: ['public'] })).to.throw(
        TypeError,
        /option "schema" must be a plain SQL identifier/,
      );
      for (const table of ['Mixed_Case_1', '_t', 'a'.repeat(41)]) expect(() => create({ pool, table })).to.not.throw();
    });
  }
});
