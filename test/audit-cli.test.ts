import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { createPostgresAuditLog } from '../lib/audit-postgres/index.js';
import { EVENTS } from '../lib/index.js';
import { runCli, runProcess, type CliRun } from './support/cli.js';
import { DATABASE_URL, testSchema } from './support/postgres.js';
import { eventFields } from './support/trail-rows.js';

const KEY = 'cli-canary-key-5b2e8d41c0';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

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
    const wrong = await verify(['--key', 'hmac-env:AUDIT_KEY'], { AUDIT_KEY: 'another-key' });
    expect(wrong.code).to.equal(1);
    expect(wrong.stdout).to.match(/^bad row 2: its checkpoint's signature does not verify/);
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
