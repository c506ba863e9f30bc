import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { EVENTS } from '../../lib/index.js';
import { runCli, runCliReadingFirstLine, runProcess, type CliRun } from '../support/cli.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { eventFields } from '../support/trail-rows.js';

const KEY = 'cli-canary-key-5b2e8d41c0-7f3a9e61d2c4b8';
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('the command: the HMAC key is read from a file or an environment variable, never from the command line', function () {
  this.timeout(30_000);
  const directory = mkdtempSync(join(tmpdir(), 'impersonation-cli-'));
  const keyFile = join(directory, 'audit.key');
  let schema: string;

  before(async () => {
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    schema = await testSchema();
    const log = createPostgresAuditLog({
      connectionString: DATABASE_URL,
      schema,
      signingKey: { hmac: KEY },
      checkpointEvery: 2,
    });
    for (let i = 0; i < 4; i += 1) await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${i}` }));
    await log.close();
  });
  after(() => rmSync(directory, { recursive: true, force: true }));

  const verify = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    runCli(['audit', 'verify', '--database-url', DATABASE_URL, '--schema', schema, ...args], env);

  it('verifies with --key hmac-file:PATH and with --key hmac-env:VARIABLE', async () => {
    expect(await verify(['--key', `hmac-file:${keyFile}`, '--require-checkpoints', '2'])).to.include({
      code: 0,
      stdout: 'ok: 4 rows verified, 2 signed checkpoints\n',
    });
    expect(await verify(['--key', 'hmac-env:AUDIT_KEY'], { AUDIT_KEY: KEY })).to.include({
      code: 0,
      stdout: 'ok: 4 rows verified, 2 signed checkpoints\n',
    });
  });

  it('refuses --key hmac:SECRET, naming the forms it takes, and verifies nothing', async () => {
    const refused = await verify(['--key', `hmac:${KEY}`]);
    expect(refused.code).to.equal(2);
    expect(refused.stdout).to.equal('');
    expect(refused.stderr).to.include('--key hmac:SECRET is refused');
    expect(refused.stderr).to.include('hmac-file:PATH').and.include('hmac-env:VARIABLE');
    expect(refused.stderr).to.not.include(KEY);
  });

  it('prints the key on no error path (canary)', async () => {
    const env = { AUDIT_KEY: KEY, OTHER_KEY: 'another-key' };
    const runs: Array<[string, Promise<CliRun>]> = [
      ['inline key', verify(['--key', `hmac:${KEY}`])],
      ['inline key, = form', verify([`--key=hmac:${KEY}`])],
      ['a key without its form', verify(['--key', KEY])],
      ['the key as a stray argument', verify(['--key', 'hmac-env:AUDIT_KEY', KEY], env)],
      ['the key as an unknown option', verify([`--hmac=${KEY}`], env)],
      ['the key given as a head', verify(['--key', 'hmac-env:AUDIT_KEY', '--head', KEY], env)],
      ['the key given as a JSON head', verify(['--key', 'hmac-env:AUDIT_KEY', '--head', `{"k":"${KEY}"}`], env)],
      ['a head without the key', verify(['--head', keyFile])],
      ['the key file given as the head file', verify(['--key', `hmac-file:${keyFile}`, '--head', keyFile])],
      ['an unset variable', verify(['--key', 'hmac-env:NOT_SET'], env)],
      ['a key file that does not exist', verify(['--key', `hmac-file:${keyFile}.missing`], env)],
      ['the key file as an Ed25519 key', verify(['--key', `ed25519:${keyFile}`], env)],
      ['the wrong key', verify(['--key', 'hmac-env:OTHER_KEY'], env)],
      [
        'PostgreSQL unreachable',
        runCli(
          ['audit', 'verify', '--database-url', 'postgres://127.0.0.1:1/none', '--key', 'hmac-env:AUDIT_KEY'],
          env,
        ),
      ],
    ];
    for (const [name, run] of runs) {
      const { code, stdout, stderr } = await run;
      expect(code, `${name}: ${stdout}${stderr}`).to.not.equal(0);
      expect(`${stdout}${stderr}`, name).to.not.include(KEY);
      expect(`${stdout}${stderr}`, name).to.not.include('another-key');
    }
  });
});

/** What a verification could have changed in a schema: its tables and functions, and the trail's rows and head. */
async function schemaState(pool: pg.Pool, schema: string) {
  const tables = await pool.query<{ name: string }>(
    'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1',
    [schema],
  );
  const routines = await pool.query<{ name: string }>(
    'SELECT routine_name AS name FROM information_schema.routines WHERE routine_schema = $1 ORDER BY 1',
    [schema],
  );
  const trail = await pool.query(`SELECT seq, hash FROM "${schema}"."impersonation_audit" ORDER BY seq`);
  const head = await pool.query(`SELECT seq, hash FROM "${schema}"."impersonation_audit_head"`);
  const checkpoints = await pool.query(`SELECT seq, signature FROM "${schema}"."impersonation_audit_checkpoints"`);
  return {
    tables: tables.rows.map((row) => row.name),
    routines: routines.rows.map((row) => row.name),
    rows: trail.rows,
    head: head.rows,
    checkpoints: checkpoints.rows,
  };
}

describe('the command only reads: a verification or an export changes nothing, and fails when there is nothing to read', function () {
  this.timeout(30_000);
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const env = { AUDIT_KEY: KEY };
  let schema: string;

  before(async () => {
    schema = await testSchema();
    const log = createPostgresAuditLog({ pool, schema, signingKey: { hmac: KEY }, checkpointEvery: 2 });
    for (let i = 0; i < 4; i += 1) await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${i}` }));
  });
  after(() => pool.end());

  const verify = (args: string[], databaseUrl = DATABASE_URL) =>
    runCli(['audit', 'verify', '--database-url', databaseUrl, ...args], env);

  it('with a wrong --table, creates nothing (no table, no function), says there is no such table and exits 1, with or without a key', async () => {
    const before = await schemaState(pool, schema);
    expect(before.tables).to.have.length(3);
    const expected = `failed: no audit table "nope" in schema "${schema}"; check --schema and --table (nothing verified)\n`;
    for (const extra of [
      [],
      ['--key', 'hmac-env:AUDIT_KEY'],
      ['--key', 'hmac-env:AUDIT_KEY', '--require-checkpoints', '2'],
    ]) {
      const run = await verify(['--schema', schema, '--table', 'nope', ...extra]);
      expect(run, extra.join(' ')).to.include({
        code: 1,
        stdout: expected,
        stderr: extra.length ? 'note: without --head, rows removed from the end of the chain are not detected\n' : '',
      });
    }
    expect(await schemaState(pool, schema)).to.deep.equal(before);
  });

  it('without --schema, names the search path it looked in, and creates nothing there either', async () => {
    const before = await schemaState(pool, schema);
    const url = new URL(DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);
    const run = await verify(['--table', 'nope'], url.href);
    expect(run).to.include({
      code: 1,
      stdout: `failed: no audit table "nope" in the connection's search path ("${schema}"); check --schema and --table (nothing verified)\n`,
    });
    expect(await schemaState(pool, schema)).to.deep.equal(before);
    expect(await verify([], url.href)).to.include({ code: 0, stdout: 'ok: 4 rows verified\n' });
  });

  it('with a trail whose checkpoint or head table is gone, says which and exits 1', async () => {
    const other = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: other });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    await pool.query(`DROP TABLE "${other}"."impersonation_audit_checkpoints"`);
    const run = await verify(['--schema', other]);
    expect(run).to.include({
      code: 1,
      stdout:
        'failed: the audit table "impersonation_audit" has no "impersonation_audit_checkpoints" table beside it: ' +
        'one was dropped, or it is not a trail this package wrote; check --schema and --table (nothing verified)\n',
    });
    const tables = await pool.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      other,
    ]);
    expect(tables.rows.map((row: { table_name: string }) => row.table_name).sort()).to.deep.equal([
      'impersonation_audit',
      'impersonation_audit_head',
    ]);
  });

  it('an empty trail fails: nothing to verify, with or without --require-checkpoints', async () => {
    await createPostgresAuditLog({ pool, schema, table: 'empty' }).migrate();
    for (const extra of [[], ['--key', 'hmac-env:AUDIT_KEY', '--require-checkpoints', '2']]) {
      expect(await verify(['--schema', schema, '--table', 'empty', ...extra]), extra.join(' ')).to.include({
        code: 1,
        stdout: `failed: the audit table "${schema}"."empty" has no rows: nothing to verify\n`,
      });
    }
  });

  it('--require-checkpoints without --key is refused (exit 2): without the key no checkpoint is checked', async () => {
    expect(await verify(['--schema', schema, '--require-checkpoints', '2'])).to.include({
      code: 2,
      stdout: '',
      stderr: '--require-checkpoints needs --key: the checkpoints are checked with the key\n',
    });
  });

  it('a trail long enough to have checkpoints and without any fails with --require-checkpoints, naming the row', async () => {
    const unsigned = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: unsigned });
    for (let i = 0; i < 4; i += 1) await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${i}` }));
    expect(
      await verify(['--schema', unsigned, '--key', 'hmac-env:AUDIT_KEY', '--require-checkpoints', '2']),
    ).to.include({
      code: 1,
      stdout:
        'bad row 2: no signed checkpoint in a chain of 4 rows (they were deleted, or the log does not sign) ' +
        '(no row verified; row 1 is chained but pinned by no signature that verifies)\n',
    });
  });

  it("verifies with a PostgreSQL role that may only read the trail (an auditor's)", async () => {
    const role = `audit_reader_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    await pool.query(`CREATE ROLE ${role} LOGIN`);
    try {
      await pool.query(`GRANT USAGE ON SCHEMA "${schema}" TO ${role}`);
      await pool.query(`GRANT SELECT ON ALL TABLES IN SCHEMA "${schema}" TO ${role}`);
      const url = new URL(DATABASE_URL);
      url.username = role;
      url.password = '';
      const before = await schemaState(pool, schema);
      const run = await verify(
        ['--schema', schema, '--key', 'hmac-env:AUDIT_KEY', '--require-checkpoints', '2'],
        url.href,
      );
      expect(run, run.stderr).to.include({ code: 0, stdout: 'ok: 4 rows verified, 2 signed checkpoints\n' });
      expect(await schemaState(pool, schema)).to.deep.equal(before);
    } finally {
      await pool.query(`DROP OWNED BY ${role}`);
      await pool.query(`DROP ROLE ${role}`);
    }
  });

  it('reads in a read-only transaction: a table an insider replaced by a view that writes makes it fail, and nothing is written', async () => {
    const trapped = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: trapped });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    await pool.query(`
      ALTER TABLE "${trapped}"."impersonation_audit_head" RENAME TO head_kept;
      CREATE TABLE "${trapped}".reads (at timestamptz);
      CREATE FUNCTION "${trapped}".head_read() RETURNS SETOF "${trapped}".head_kept LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO "${trapped}".reads VALUES (now());
          RETURN QUERY SELECT * FROM "${trapped}".head_kept;
        END $$;
      CREATE VIEW "${trapped}"."impersonation_audit_head" AS SELECT * FROM "${trapped}".head_read();
    `);
    const run = await verify(['--schema', trapped]);
    expect(run.code, run.stdout).to.equal(2);
    expect(run.stderr).to.include('read-only transaction');
    expect((await pool.query(`SELECT count(*)::int AS n FROM "${trapped}".reads`)).rows).to.deep.equal([{ n: 0 }]);
  });

  const exportTrail = (args: string[], databaseUrl = DATABASE_URL) =>
    runCli(['audit', 'export', '--database-url', databaseUrl, ...args], env);

  it('export with a wrong --table creates nothing, says in one line that there is no such table and exits 1, printing no row', async () => {
    const before = await schemaState(pool, schema);
    for (const format of ['jsonl', 'csv']) {
      expect(await exportTrail(['--schema', schema, '--table', 'nope', '--format', format]), format).to.deep.equal({
        code: 1,
        stdout: '',
        stderr: `failed: no audit table "nope" in schema "${schema}"; check --schema and --table (nothing exported)\n`,
      });
    }
    const url = new URL(DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);
    expect(await exportTrail(['--table', 'nope'], url.href)).to.deep.equal({
      code: 1,
      stdout: '',
      stderr: `failed: no audit table "nope" in the connection's search path ("${schema}"); check --schema and --table (nothing exported)\n`,
    });
    expect(await schemaState(pool, schema)).to.deep.equal(before);
    const exported = await exportTrail(['--schema', schema]);
    expect(exported, exported.stderr).to.include({ code: 0, stderr: '' });
    expect(exported.stdout.trim().split('\n')).to.have.length(4);
  });

  it('query() of the library creates nothing either: a missing table rejects, naming it and where it was looked for', async () => {
    const before = await schemaState(pool, schema);
    const wrongTable = createPostgresAuditLog({ pool, schema, table: 'nope' });
    const refused = await wrongTable.query({ subject: 'user-1' }).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(Error);
    expect((refused as Error).message).to.equal(
      `the audit log cannot be queried: no audit table "nope" in schema "${schema}"; ` +
        'check its "schema" and "table" options, or create the tables with migrate()',
    );
    expect(await schemaState(pool, schema)).to.deep.equal(before);

    const fresh = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: fresh });
    expect(await log.query().catch((error: unknown) => (error as Error).message)).to.match(
      new RegExp(`^the audit log cannot be queried: no audit table "impersonation_audit" in schema "${fresh}"; `),
    );
    const tables = await pool.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      fresh,
    ]);
    expect(tables.rows).to.deep.equal([]);
    // Its appends still create the tables, as they always did; a query started meanwhile waits for
    // them (whether it reads before or after the append's row is the two calls' race), and never rejects.
    const [, page] = await Promise.all([
      log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' })),
      log.query({ subject: 'bob' }),
    ]);
    expect(page.items.filter((item) => item.subject !== 'bob')).to.deep.equal([]);
    expect((await log.query({ subject: 'bob' })).items.map((item) => item.subject)).to.deep.equal(['bob']);
  });

  it('query() and export read in a read-only transaction: a trail an insider replaced by a view that writes makes them fail, and nothing is written', async () => {
    const trapped = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: trapped });
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    await pool.query(`
      ALTER TABLE "${trapped}"."impersonation_audit" RENAME TO trail_kept;
      CREATE TABLE "${trapped}".reads (at timestamptz);
      CREATE FUNCTION "${trapped}".trail_read() RETURNS SETOF "${trapped}".trail_kept LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO "${trapped}".reads VALUES (now());
          RETURN QUERY SELECT * FROM "${trapped}".trail_kept;
        END $$;
      CREATE VIEW "${trapped}"."impersonation_audit" AS SELECT * FROM "${trapped}".trail_read();
    `);
    const refused = await log.query().catch((error: unknown) => error);
    expect((refused as Error).message).to.include('read-only transaction');
    const run = await exportTrail(['--schema', trapped]);
    expect(run.code, run.stdout).to.equal(2);
    expect(run.stderr).to.include('read-only transaction');
    expect((await pool.query(`SELECT count(*)::int AS n FROM "${trapped}".reads`)).rows).to.deep.equal([{ n: 0 }]);
  });

  it('verify() of the library creates nothing either: a log whose tables are missing fails with check "tables"', async () => {
    const fresh = await testSchema();
    const log = createPostgresAuditLog({ pool, schema: fresh });
    expect(await log.verify()).to.deep.equal({
      ok: false,
      count: 0,
      seq: 1,
      check: 'tables',
      problem: `no audit table "impersonation_audit" in schema "${fresh}"`,
    });
    const tables = await pool.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      fresh,
    ]);
    expect(tables.rows).to.deep.equal([]);
    const refused = await log.verify({ requireCheckpoints: true }).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(TypeError);
    expect((refused as Error).message).to.equal(
      'verify: option "requireCheckpoints" needs "key": the checkpoints are checked with the key',
    );
    // Its appends still create the tables, as they always did.
    await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
    expect(await log.verify()).to.deep.equal({ ok: true, count: 1, checkpoints: 0 });
  });
});

describe('the command answers --help (-h) at the top level and for each subcommand, with its usage, exit 0', () => {
  for (const [args, lead] of [
    [
      ['--help'],
      /^usage:\n {2}oidc-provider-impersonation audit verify .*\n {2}.*\n.*\n {2}oidc-provider-impersonation audit export /,
    ],
    [['-h'], /^usage:\n {2}oidc-provider-impersonation audit verify /],
    [['audit', '--help'], /^usage:\n {2}oidc-provider-impersonation audit verify /],
    [
      ['audit', 'verify', '--help'],
      /^usage:\n {2}oidc-provider-impersonation audit verify [^]*--require-checkpoints N {2}/,
    ],
    [['audit', 'verify', '-h'], /^usage:\n {2}oidc-provider-impersonation audit verify /],
    [['audit', 'verify', '--database-url', 'postgres://127.0.0.1:1/none', '--help'], /^usage:\n {2}[^]*audit verify /],
    [
      ['audit', 'export', '--help'],
      /^usage:\n {2}oidc-provider-impersonation audit export [^]*--format jsonl\|csv {5}/,
    ],
    [['audit', 'export', '-h'], /^usage:\n {2}oidc-provider-impersonation audit export /],
  ] as const) {
    it(args.join(' '), async () => {
      const run = await runCli([...args], { DATABASE_URL: '' });
      expect(run, run.stderr).to.include({ code: 0, stderr: '' });
      expect(run.stdout).to.match(lead);
      const words: readonly string[] = args;
      if (words.includes('verify')) expect(run.stdout).to.not.include('audit export');
      if (words.includes('export')) expect(run.stdout).to.not.include('audit verify');
    });
  }

  it('a usage error still goes to stderr, exit 2, naming the unknown command', async () => {
    const run = await runCli(['audit', 'query']);
    expect(run).to.include({ code: 2, stdout: '' });
    expect(run.stderr).to.match(
      /^unknown command: audit query \(the commands are audit verify and audit export\)\nusage:\n/,
    );
    expect((await runCli(['audti', 'verify'])).stderr).to.match(/^unknown command: audti \(the commands are/);
    expect((await runCli(['audit'])).stderr).to.match(/^usage:\n/);
    const misspelt = await runCli(['audit', 'verify', '--databse-url=postgres://u:secret@db/x']);
    expect(misspelt).to.include({ code: 2, stderr: "Unknown option '--databse-url'; --help lists the options\n" });
    expect((await runCli(['postgres://u:secret@db/x'])).stderr).to.not.include('secret');
  });
});

describe('the command, read by a reader that stops early (`audit export … | head -1`)', function () {
  this.timeout(30_000);
  let schema: string;

  before(async () => {
    schema = await testSchema();
    const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema });
    for (let batch = 0; batch < 6; batch += 1) {
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${batch}-${i}` })),
        ),
      );
    }
    await log.close();
  });

  for (const format of ['jsonl', 'csv']) {
    it(`ends quietly once its standard output is closed: exit 0, no stack trace (${format})`, async () => {
      const args = ['audit', 'export', '--database-url', DATABASE_URL, '--schema', schema, '--format', format];
      // More than a pipe holds (64 KiB): the export is still writing when its reader goes.
      const whole = await runCli(args);
      expect(whole.code, whole.stderr).to.equal(0);
      expect(whole.stdout.length).to.be.greaterThan(2 * 65_536);
      const firstLine = whole.stdout.slice(0, whole.stdout.indexOf('\n') + 1);

      expect(await runCliReadingFirstLine(args)).to.deep.equal({ code: 0, stdout: firstLine, stderr: '' });
    });
  }
});

describe('the command says which check failed, and counts as verified only rows before it', function () {
  this.timeout(30_000);
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const directory = mkdtempSync(join(tmpdir(), 'impersonation-cli-checks-'));

  after(async () => {
    await pool.end();
    rmSync(directory, { recursive: true, force: true });
  });

  /** A trail of 6 rows signed with KEY, a checkpoint every 3 rows (at rows 3 and 6). */
  async function signedTrail() {
    const schema = await testSchema();
    const log = createPostgresAuditLog({ pool, schema, signingKey: { hmac: KEY }, checkpointEvery: 3 });
    for (let i = 0; i < 6; i += 1) await log.append(EVENTS.subjectTokenCreated, eventFields({ subject: `user-${i}` }));
    return schema;
  }
  const verify = (schema: string, key: string, env: NodeJS.ProcessEnv = {}) =>
    runCli(
      [
        'audit',
        'verify',
        '--database-url',
        DATABASE_URL,
        '--schema',
        schema,
        '--key',
        key,
        '--require-checkpoints',
        '3',
      ],
      env,
    );

  it('another HMAC key: the first checkpoint, its key id, that no checkpoint verifies, and no row counted as verified', async () => {
    const schema = await signedTrail();
    const run = await verify(schema, 'hmac-env:AUDIT_KEY', { AUDIT_KEY: 'another-key' });
    expect(run).to.include({
      code: 1,
      stdout:
        'bad checkpoint at row 3: none of the trail\'s 2 signed checkpoints (key id "hmac-sha256") verifies with the ' +
        'HMAC-SHA-256 key given: was the trail signed with another key? ' +
        '(no row verified; rows 1 to 2 are chained but pinned by no signature that verifies)\n',
    });
    expect(`${run.stdout}${run.stderr}`).to.not.include('another-key');
  });

  it('an Ed25519 key for an HMAC trail: says the checkpoint names another kind of key', async () => {
    const schema = await signedTrail();
    const publicKeyFile = join(directory, `${schema}.pem`);
    writeFileSync(
      publicKeyFile,
      generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    );
    const run = await verify(schema, `ed25519:${publicKeyFile}`);
    expect(run.code).to.equal(1);
    expect(run.stdout).to.equal(
      'bad checkpoint at row 3: its signed checkpoint names key id "hmac-sha256", and the key given is an Ed25519 key: ' +
        'verify with the key of that kind the trail is signed with ' +
        '(no row verified; rows 1 to 2 are chained but pinned by no signature that verifies)\n',
    );
  });

  it('one checkpoint forged, the others verifying: says this one was forged, and counts the rows the one before pins', async () => {
    const schema = await signedTrail();
    await pool.query(`UPDATE "${schema}"."impersonation_audit_checkpoints" SET signature = 'forged' WHERE seq = 6`);
    const run = await verify(schema, 'hmac-env:AUDIT_KEY', { AUDIT_KEY: KEY });
    expect(run).to.include({
      code: 1,
      stdout:
        'bad checkpoint at row 6: its signed checkpoint (key id "hmac-sha256") does not verify with the HMAC-SHA-256 ' +
        'key given, though other checkpoints do: this one was forged or altered ' +
        '(rows 1 to 3 verified; rows 4 to 5 are chained but pinned by no signature that verifies)\n',
    });
  });

  it('a row changed: that row, and every row before it verified', async () => {
    const schema = await signedTrail();
    await pool.query(`UPDATE "${schema}"."impersonation_audit" SET subject = 'mallory' WHERE seq = 5`);
    const run = await verify(schema, 'hmac-env:AUDIT_KEY', { AUDIT_KEY: KEY });
    expect(run).to.include({
      code: 1,
      stdout:
        'bad row 5: a column does not match the content its hash covers ' +
        '(rows 1 to 3 verified; row 4 is chained but pinned by no signature that verifies)\n',
    });
    const unsigned = await runCli(['audit', 'verify', '--database-url', DATABASE_URL, '--schema', schema]);
    expect(unsigned).to.include({
      code: 1,
      stdout: 'bad row 5: a column does not match the content its hash covers (rows 1 to 4 verified)\n',
    });
  });
});

describe('the command, built from a checkout, runs as an executable', function () {
  this.timeout(180_000);

  it('`npm run build` leaves dist/cli/main.js executable: it answers --help when run by itself', async () => {
    const build = await runProcess('npm', ['run', 'build', '--silent'], {}, ROOT);
    expect(build.code, build.stdout + build.stderr).to.equal(0);
    const help = await runProcess(join(ROOT, 'dist/cli/main.js'), ['--help']);
    expect(help.code, help.stderr).to.equal(0);
    expect(help.stdout).to.match(/^usage:\n {2}oidc-provider-impersonation audit verify/);
  });

  it('without pg (an optional peer dependency) answers --help, and says what to install for a command', async () => {
    // The built package alone, where no node_modules can be found.
    const alone = mkdtempSync(join(tmpdir(), 'impersonation-no-pg-'));
    try {
      cpSync(join(ROOT, 'dist'), join(alone, 'dist'), { recursive: true });
      writeFileSync(join(alone, 'package.json'), '{"type":"module"}');
      const cli = join(alone, 'dist/cli/main.js');
      const help = await runProcess(process.execPath, [cli, '--help']);
      expect(help.code, help.stderr).to.equal(0);
      expect(help.stdout).to.match(/^usage:/);
      const verify = await runProcess(process.execPath, [
        cli,
        'audit',
        'verify',
        '--database-url',
        'postgres://127.0.0.1/x',
      ]);
      expect(verify.code).to.equal(2);
      expect(verify.stderr).to.equal('the audit commands need the pg package: npm install pg\n');
    } finally {
      rmSync(alone, { recursive: true, force: true });
    }
  });
});
