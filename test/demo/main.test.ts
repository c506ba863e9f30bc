import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { freePort } from '../../demo/http.js';
import { demoSecrets } from '../../demo/seed.js';
import { createPostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { EVENTS } from '../../lib/index.js';
import { stopChildren } from '../support/children.js';
import { CookieJar, follow } from './helpers.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { scaled } from '../support/time.js';

const MAIN = fileURLToPath(new URL('../../demo/main.js', import.meta.url));
const WALKTHROUGH = fileURLToPath(new URL('../../../demo/walkthrough.sh', import.meta.url));

function run(
  command: string,
  args: string[],
  env: Record<string, string>,
): ChildProcess & {
  output: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** What it printed to its standard output so far. */
  printed(): string;
} {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const output = once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
  return Object.assign(child, { output, printed: () => stdout });
}

/** Resolves once `condition` holds, checked every 50 ms; rejects after `ms`. */
async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + scaled(ms);
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not within ${scaled(ms)} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const FEED_READ_LINE = '[audit] impersonation.revocations.served: the revocation feed listed 0 stopped sessions';

/** The URLs `npm run demo` prints once it listens (ports 0 pick free ones). */
async function started(child: ChildProcess): Promise<{ identity: string; backend: string }> {
  let stdout = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo did not start in time:\n${stdout}`)), scaled(20_000));
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const identity = /Identity service +(http:\/\/localhost:\d+)\/oidc/.exec(stdout)?.[1];
      const backend = /Support console +(http:\/\/localhost:\d+)\//.exec(stdout)?.[1];
      if (identity && backend) {
        clearTimeout(timer);
        resolve({ identity, backend });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the demo exited with ${code}:\n${stdout}`));
    });
  });
}

describe('demo: npm run demo (demo/main.ts)', function () {
  this.timeout(60_000);
  const children: ChildProcess[] = [];
  let keyDir: string;
  before(async () => {
    keyDir = await mkdtemp(path.join(tmpdir(), 'demo-main-'));
  });
  after(async () => {
    await stopChildren(children);
    await rm(keyDir, { recursive: true, force: true });
  });

  it('says in one line which port is taken and which variable moves it, without a stack trace', async () => {
    const busy = http.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as AddressInfo).port;
    try {
      for (const [variable, env] of [
        ['PORT', { PORT: String(port), BACKEND_PORT: '0' }],
        ['BACKEND_PORT', { PORT: '0', BACKEND_PORT: String(port) }],
        ['ORDERS_PORT', { PORT: '0', BACKEND_PORT: '0', ORDERS_PORT: String(port) }],
      ] as const) {
        const { code, stderr } = await run(process.execPath, [MAIN], env).output;
        expect(code).to.equal(1);
        const lines = stderr.split('\n').filter((line) => line && !line.includes('Unsupported runtime'));
        expect(lines, stderr).to.have.length(1);
        expect(lines[0]).to.equal(
          `The demo cannot listen on port ${port} (it is in use): stop what uses it, or choose another, e.g. ${variable}=${port + 100} npm run demo`,
        );
      }
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  });

  it('stops with one line when its store cannot be reached', async () => {
    const closed = await freePort();
    const demo = run(process.execPath, [MAIN], {
      PORT: '0',
      BACKEND_PORT: '0',
      REDIS_URL: `redis://127.0.0.1:${closed}`,
      DEMO_KEY_FILE: path.join(keyDir, 'unreachable-keys.json'),
    });
    children.push(demo);
    let timer: NodeJS.Timeout | undefined;
    const { code, stdout, stderr } = await Promise.race([
      demo.output,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`the demo did not stop in time:\n${demo.printed()}`)),
          scaled(10_000),
        );
      }),
    ]).finally(() => clearTimeout(timer));
    expect(code).to.equal(1);
    expect(stdout).to.equal('');
    const lines = stderr.split('\n').filter((line) => line && !line.includes('Unsupported runtime'));
    expect(lines, stderr).to.have.length(1);
    expect(lines[0]).to.match(
      new RegExp(
        `^The demo cannot reach its store \\(Redis at 127\\.0\\.0\\.1:${closed} \\(prefix demo:\\)\\): Redis is unreachable`,
      ),
    );
  });

  it('lists on its login page every user it prints, as it prints them (without the passwords)', async () => {
    const demo = run(process.execPath, [MAIN], { PORT: '0', BACKEND_PORT: '0' });
    children.push(demo);
    const { backend } = await started(demo);
    const login = await follow(new CookieJar(), `${backend}/web/login`);
    const listed = [...(await login.text()).matchAll(/<li>([^<]*)<\/li>/g)].map(([, user]) => user);
    const printed = [...demo.printed().matchAll(/^ {4}(\S+) \/ \S+ (.*)$/gm)].map(([, id, rest]) => `${id} ${rest}`);
    expect(printed).to.have.length(demoSecrets().users.length);
    expect(listed).to.deep.equal(printed);
  });

  it("prints the revocation feed's reads with DEMO_LOG_FEED=1 only, and stops on another value", async () => {
    const demo = run(process.execPath, [MAIN], { PORT: '0', BACKEND_PORT: '0', DEMO_LOG_FEED: '1' });
    children.push(demo);
    await started(demo);
    await until(() => demo.printed().split(FEED_READ_LINE).length > 3, 5000, 'three reads of the feed printed');

    const refused = await run(process.execPath, [MAIN], { PORT: '0', BACKEND_PORT: '0', DEMO_LOG_FEED: 'yes' }).output;
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.contain('DEMO_LOG_FEED must be 1 or 0, not yes');
  });

  it("lets a sign-in started at another instance's console (BACKEND_URLS) return there, and stops on a malformed list", async () => {
    const demo = run(process.execPath, [MAIN], {
      PORT: '0',
      BACKEND_PORT: '0',
      BACKEND_URLS: 'http://localhost:3101/, http://127.0.0.1:3201',
    });
    children.push(demo);
    const { identity } = await started(demo);
    const authorize = async (redirectUri: string) => {
      const response = await fetch(
        `${identity}/oidc/auth?${new URLSearchParams({
          client_id: 'support-console',
          response_type: 'code',
          scope: 'openid profile',
          redirect_uri: redirectUri,
          state: 'state',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
        })}`,
        { redirect: 'manual', signal: AbortSignal.timeout(5000) },
      );
      await response.body?.cancel();
      return { status: response.status, location: response.headers.get('location') ?? '' };
    };
    for (const peer of ['http://localhost:3101', 'http://127.0.0.1:3201']) {
      const { status, location } = await authorize(`${peer}/callback`);
      expect(status, peer).to.be.within(300, 399);
      expect(location, peer).to.match(/^\/interaction\//);
    }
    expect((await authorize('http://localhost:3102/callback')).status).to.equal(400);

    const refused = await run(process.execPath, [MAIN], {
      PORT: '0',
      BACKEND_PORT: '0',
      BACKEND_URLS: 'http://localhost:3101,localhost:3201',
    }).output;
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.contain(
      'BACKEND_URLS must be addresses such as http://localhost:3101, separated by commas, not localhost:3201',
    );
  });

  it('keeps its audit trail in PostgreSQL when DATABASE_URL is set: the walk-through is recorded and the chain verifies', async () => {
    const schema = await testSchema();
    const databaseUrl = `${DATABASE_URL}${DATABASE_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    const demo = run(process.execPath, [MAIN], {
      PORT: '0',
      BACKEND_PORT: '0',
      DATABASE_URL: databaseUrl,
      DEMO_KEY_FILE: path.join(keyDir, 'keys.json'),
    });
    children.push(demo);
    const { identity, backend } = await started(demo);
    // The walk-through finds the demo by the same variables that placed it.
    const walk = await run('bash', [WALKTHROUGH], { PORT: new URL(identity).port, BACKEND_PORT: new URL(backend).port })
      .output;
    expect(walk.stdout, `${walk.stderr}\n${walk.stdout}\n${demo.printed()}`).to.contain('"actor":"alice"');
    // What it printed meanwhile: the impersonation (its line written within 20 ms), and none of the feed's reads (several a second).
    const impersonation = /^\[audit\] impersonation\.exchange\.succeeded: alice is acting as dave, /m;
    await until(() => impersonation.test(demo.printed()), 2000, 'the impersonation printed');
    expect(demo.printed()).not.to.contain('revocations.served');

    const log = createPostgresAuditLog({ connectionString: DATABASE_URL, schema });
    try {
      const { items } = await log.query({ subject: 'dave' });
      expect(items.map((item) => item.event)).to.deep.equal([EVENTS.exchangeSucceeded, EVENTS.subjectTokenCreated]);
      expect(items[0]).to.include({ actor: 'alice', subject: 'dave' });
      expect(await log.verify()).to.deep.equal({ ok: true, count: 2, checkpoints: 0 });
    } finally {
      await log.close();
    }
  });
});
