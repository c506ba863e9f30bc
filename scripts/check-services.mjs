#!/usr/bin/env node
// Runs before `npm test`: the suite talks to a real Redis, a real PostgreSQL and
// Debian's Chromium. Rather than let dozens of tests fail one by one, stop at
// once with the one command that provides what is missing.
import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { connect } from 'node:net';

const TIMEOUT_MS = 1500;
const CHROMIUM = '/usr/bin/chromium';

/** Resolves with the first bytes the service answers to `greeting`, or rejects. */
function probe(url, defaultPort, greeting) {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port || defaultPort), url.hostname.replace(/^\[|\]$/g, ''));
    const fail = (error) => {
      socket.destroy();
      reject(error);
    };
    socket.setTimeout(TIMEOUT_MS, () => fail(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    socket.once('error', fail);
    socket.once('connect', () => {
      if (!greeting) {
        socket.end();
        resolve('');
        return;
      }
      socket.write(greeting);
      socket.once('data', (data) => {
        socket.end();
        resolve(String(data));
      });
    });
  });
}

function startCommand(binary, start, packageName) {
  const installed = ['/usr/bin', '/usr/sbin', '/usr/local/bin'].some((dir) => existsSync(`${dir}/${binary}`));
  return installed ? start : `apt-get install -y ${packageName} && ${start}`;
}

const problems = [];

const redisUrl = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
try {
  const answer = await probe(redisUrl, 6379, 'PING\r\n');
  // A server that asks for a password still answers: the URL carries it.
  if (!answer.startsWith('+PONG') && !answer.startsWith('-NOAUTH'))
    throw new Error(`unexpected answer ${JSON.stringify(answer.slice(0, 40))}`);
} catch (error) {
  problems.push(
    `Redis is not answering at ${redisUrl.host} (${error.message}); set REDIS_URL, or start it:\n` +
      `  ${startCommand('redis-server', 'redis-server --daemonize yes', 'redis-server')}`,
  );
}

const databaseUrl = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
try {
  await probe(databaseUrl, 5432);
} catch (error) {
  const versions = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : [];
  const start = `pg_ctlcluster --skip-systemctl-redirect ${versions[0] ?? '$(ls /etc/postgresql)'} main start`;
  problems.push(
    `PostgreSQL is not answering at ${databaseUrl.host} (${error.message}); set DATABASE_URL, or start it:\n` +
      `  ${startCommand('pg_ctlcluster', start, 'postgresql')}`,
  );
}

// The demo's browser test drives Debian's Chromium; npm test installs nothing itself.
if (!isExecutable(CHROMIUM)) {
  const sudo = process.getuid?.() === 0 ? '' : 'sudo ';
  problems.push(
    `${CHROMIUM} is missing (the Debian package chromium, for the demo's browser test); run:\n` +
      `  ${sudo}apt-get update && ${sudo}apt-get install -y chromium`,
  );
}

if (problems.length) stop();

function stop() {
  console.error(`npm test needs these first:\n\n${problems.join('\n\n')}\n`);
  process.exit(1);
}

function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
