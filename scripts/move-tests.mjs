#!/usr/bin/env node
// Moves the spec files at the top of test/ into folders named for what they
// cover (test/<area>/), mechanically: `git mv` each file of AREAS still at the
// top, rewrite the relative paths in and to the moved files (imports, and
// `new URL('…', import.meta.url)`, which resolve from build/ the same way), and
// each mention of a moved file's path in the documentation and in comments
// (the changelog's history keeps its own). Files already moved are left alone,
// so it can run again after branches that add or change files at the top are
// merged; `node scripts/test-files.mjs check` names a spec file still there.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { ROOT, filesUnder } from './test-files.mjs';

/** The folder of test/ each file at its top goes to. */
const AREAS = {
  adapters: [
    'adapter-contract.test.ts',
    'memory-adapter.test.ts',
    'outbox-store.test.ts',
    'sorted-indexes.test.ts',
    'store-option.test.ts',
  ],
  approvals: [
    'approval-options.test.ts',
    'approval-outage.test.ts',
    'approval-store.test.ts',
    'approvals.test.ts',
    'customer-api.test.ts',
  ],
  audit: [
    'audit-cli.test.ts',
    'audit-heads.test.ts',
    'audit-in-commit.test.ts',
    'audit-memory.test.ts',
    'audit-postgres-batch.test.ts',
    'audit-postgres-processes.test.ts',
    'audit-postgres.test.ts',
    'audit-process.ts',
    'audit-sink-contract.test.ts',
    'events.test.ts',
  ],
  bench: ['bench-command-line.test.ts', 'bench-standing-grant.test.ts'],
  delegation: [
    'delegation-options.test.ts',
    'delegation-outage.test.ts',
    'delegation-stop-race.test.ts',
    'delegation.test.ts',
  ],
  docs: ['readme.test.ts'],
  exchange: [
    'actor-signout-race.test.ts',
    'custom-claims.test.ts',
    'dpop-order.test.ts',
    'e2e.test.ts',
    'exchange-commit.test.ts',
    'exchange.test.ts',
  ],
  management: ['client-metadata.test.ts', 'management-api.openapi.test.ts', 'management.test.ts'],
  plugin: [
    'errors.test.ts',
    'hosts.test.ts',
    'mounting.test.ts',
    'plugin.test.ts',
    'provider-internals.test.ts',
    'public-types.test.ts',
  ],
  'resource-server': ['resource-server.test.ts'],
  security: ['canary.test.ts', 'flood.test.ts', 'security.test.ts', 'trail-flood.test.ts', 'unstorable-input.test.ts'],
  sessions: ['end-marks.test.ts', 'session-record.test.ts', 'sessions.test.ts'],
  ssf: ['ssf-receiver.test.ts', 'ssf.openapi.test.ts', 'ssf.test.ts'],
  webhooks: ['webhooks-post.test.ts', 'webhooks.test.ts'],
};

const TEST = join(ROOT, 'test');
/** Old path → new path, both relative to test/ and without the extension (.ts in test/, .js in build/test/). */
const moves = new Map(
  Object.entries(AREAS).flatMap(([area, files]) =>
    files.filter((file) => existsSync(join(TEST, file))).map((file) => [stem(file), `${area}/${stem(file)}`]),
  ),
);

function stem(file) {
  return file.replace(/\.ts$/, '');
}

/** Where a module of test/ (a path under test/, no extension) is after the move. */
const after = (module) => moves.get(module) ?? module;

const SPECIFIER =
  /(\b(?:from|import)\s*\(?\s*|\bnew URL\(\s*)(['"])(\.{1,2}\/[^'"]*)\2(?=\s*(?:\)|,\s*import\.meta\.url|;|$))/gm;

/** Rewrites the relative specifiers of the module at `module` (under test/, no extension) for the move. */
function rewriteSpecifiers(text, module) {
  // Resolved as under build/test/, where .ts files are .js: the same relative paths either way.
  const from = dirname(join(TEST, module));
  const to = dirname(join(TEST, after(module)));
  return text.replace(SPECIFIER, (whole, lead, quote, specifier) => {
    const target = resolve(from, specifier);
    const inTest = relative(TEST, target);
    const moved = inTest.startsWith('..') ? target : join(TEST, after(inTest.replace(/\.js$/, '')) + extension(target));
    let next = relative(to, moved);
    if (!next.startsWith('.')) next = `./${next}`;
    if (specifier.endsWith('/') && !next.endsWith('/')) next += '/';
    return `${lead}${quote}${next}${quote}`;
  });
}

function extension(path) {
  return path.match(/\.js$/)?.[0] ?? '';
}

/** Rewrites each mention of a moved file's path (test/x.test.ts, build/test/x.test.js). */
function rewriteMentions(text) {
  return text.replace(
    /(?<![\w./-])((?:build\/)?test\/)([\w.-]+?)(\.test\.ts|\.test\.js|\.ts|\.js)(?![\w-])/g,
    (whole, dir, name, ext) => {
      const module = ext.startsWith('.test') ? `${name}.test` : name;
      if (!moves.has(module)) return whole;
      return `${dir}${moves.get(module)}${ext.replace(/^\.test/, '')}`;
    },
  );
}

if (!moves.size) {
  console.log('nothing to move: every file of the list is in its folder');
  process.exit(0);
}

const changed = [];
const sources = filesUnder(TEST, '.ts').filter((file) => !file.startsWith(join(TEST, 'fixtures/strict-consumer')));
for (const file of sources) {
  const module = stem(relative(TEST, file));
  const text = readFileSync(file, 'utf8');
  const next = rewriteMentions(rewriteSpecifiers(text, module));
  if (next !== text) writeFileSync(file, next);
  if (next !== text || moves.has(module)) changed.push(join(TEST, `${after(module)}.ts`));
}

const mentioning = [
  ...['lib', 'bench', 'demo', 'fixtures', 'docs'].flatMap((folder) => [
    ...filesUnder(join(ROOT, folder), '.ts'),
    ...filesUnder(join(ROOT, folder), '.md'),
  ]),
  ...['README.md', 'CONTRIBUTING.md', 'SECURITY.md'].map((file) => join(ROOT, file)),
];
for (const file of mentioning) {
  const text = readFileSync(file, 'utf8');
  const next = rewriteMentions(text);
  if (next !== text) {
    writeFileSync(file, next);
    changed.push(file);
  }
}

for (const [from, to] of moves) {
  mkdirSync(dirname(join(TEST, to)), { recursive: true });
  execFileSync('git', ['mv', join(TEST, `${from}.ts`), join(TEST, `${to}.ts`)], { cwd: ROOT, stdio: 'inherit' });
}
// Longer paths may break lines anew.
const prettier = createRequire(import.meta.url).resolve('prettier/bin/prettier.cjs');
execFileSync(process.execPath, [prettier, '--log-level', 'warn', '--write', ...changed], {
  cwd: ROOT,
  stdio: 'inherit',
});
console.log(
  `moved ${moves.size} files into ${new Set([...moves.values()].map((to) => dirname(to))).size} folders of test/`,
);
