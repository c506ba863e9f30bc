#!/usr/bin/env node
// Which compiled spec files a test run takes, derived from what each one loads
// when it runs, never listed by hand: a new spec file joins the runs its
// imports put it in. What a file loads is read from the JavaScript in build/
// (tsc has dropped the type-only imports there): static and dynamic imports,
// and the scripts it starts as child processes or workers, which the tests name
// as `new URL('./….js', import.meta.url)`.
//
//   suite     every spec file, but those of a run of their own (the Redis Cluster's)
//   store     the files of `suite` that run on the store TEST_ADAPTER names: they reach a
//             call of suiteAdapterKind() (test/support/adapters.ts, the one reader of the variable)
//   provider  the files of `suite` that touch oidc-provider themselves: outside lib/ (which loads
//             it for everyone) they reach the package, or lib/provider-internals.js
//   cluster   the Redis Cluster's spec files, on servers they start themselves
//
//   node scripts/test-files.mjs list <selection>                 the files, one a line
//   node scripts/test-files.mjs mocha <selection> [mocha flags]  mocha on them (.mocharc.json applies)
//   node scripts/test-files.mjs check                            what the derivation rests on
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BUILD = join(ROOT, 'build');

/** Spec files under this folder of test/ make a run of their own, with the mocha flags it needs. */
export const OWN_RUNS = { cluster: { folder: 'test/redis-cluster/', flags: ['--timeout', '60000'] } };

/** The function whose callers run on TEST_ADAPTER's store, and the module that defines it. */
const SUITE_ADAPTER_CALL = /(?<!function\s+)\bsuiteAdapterKind\(/;
const SUITE_ADAPTER_MODULE = 'test/support/adapters';

const STATIC_IMPORT = /^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*(['"])([^'"]+)\1/gm;
const BARE_IMPORT = /^\s*import\s*(['"])([^'"]+)\1/gm;
const DYNAMIC_IMPORT = /\bimport\(\s*(['"])([^'"]+)\1\s*\)/g;
const STARTED_SCRIPT = /\bnew URL\(\s*(['"])([^'"]+\.[cm]?js)\1\s*,\s*import\.meta\.url\s*\)/g;

/**
 * What a module loads at run time, from its JavaScript: package names as written,
 * relative specifiers resolved against `file` to absolute paths.
 */
export function runtimeSpecifiers(javascript, file) {
  const found = new Set();
  for (const pattern of [STATIC_IMPORT, BARE_IMPORT, DYNAMIC_IMPORT, STARTED_SCRIPT]) {
    for (const match of javascript.matchAll(pattern)) {
      const specifier = match[2];
      found.add(specifier.startsWith('.') ? resolve(dirname(file), specifier) : specifier);
    }
  }
  return [...found];
}

/** The compiled modules of build/ and what each loads, read once each. */
export class ModuleGraph {
  #loads = new Map();

  constructor(build = BUILD) {
    this.build = build;
  }

  /** What `file` loads; nothing for a file that is not there (a package's, or one never compiled). */
  loads(file) {
    let loads = this.#loads.get(file);
    if (!loads) {
      loads = existsSync(file) ? runtimeSpecifiers(readFileSync(file, 'utf8'), file) : [];
      this.#loads.set(file, loads);
    }
    return loads;
  }

  /**
   * Whether `file`, or a module it loads, directly or not, is one that `found`
   * accepts; modules that `enter` refuses are not followed into.
   */
  reaches(file, found, enter = () => true) {
    const seen = new Set([file]);
    const pending = [file];
    while (pending.length) {
      const current = pending.pop();
      if (found(current)) return true;
      for (const next of this.loads(current)) {
        if (seen.has(next)) continue;
        seen.add(next);
        if (found(next)) return true;
        if (this.#compiled(next) && enter(next)) pending.push(next);
      }
    }
    return false;
  }

  /** Every module `files` load, directly or not, themselves included. */
  closure(files) {
    const seen = new Set(files);
    const pending = [...files];
    while (pending.length) {
      for (const next of this.loads(pending.pop())) {
        if (!this.#compiled(next) || seen.has(next)) continue;
        seen.add(next);
        pending.push(next);
      }
    }
    return seen;
  }

  /** The spec file (or helper) runs on the store TEST_ADAPTER names. */
  usesSuiteAdapter(file) {
    const definition = join(this.build, `${SUITE_ADAPTER_MODULE}.js`);
    return this.reaches(
      file,
      (module) => module !== definition && this.#compiled(module) && this.#calls(module, SUITE_ADAPTER_CALL),
    );
  }

  /** The spec file touches oidc-provider itself, not only through the plugin it tests. */
  touchesProvider(file) {
    const lib = join(this.build, 'lib') + sep;
    const internals = join(lib, 'provider-internals.js');
    return this.reaches(
      file,
      (module) => module === 'oidc-provider' || module.startsWith('oidc-provider/') || module === internals,
      (module) => !module.startsWith(lib),
    );
  }

  /** Only the compiled tree is followed: the tests' code, not the tools beside it (scripts/). */
  #compiled(file) {
    return file.startsWith(this.build + sep);
  }

  #calls(file, pattern) {
    return existsSync(file) && pattern.test(readFileSync(file, 'utf8'));
  }
}

/** Every file under `folder` (absolute) whose name ends with `suffix`, sorted. */
export function filesUnder(folder, suffix) {
  if (!existsSync(folder)) return [];
  return readdirSync(folder, { recursive: true })
    .filter((name) => name.endsWith(suffix))
    .map((name) => join(folder, name))
    .sort();
}

/** The run of its own that a spec file (a path relative to the root, source or compiled) belongs to, if any. */
export function ownRunOf(file) {
  const path = relative(ROOT, resolve(ROOT, file))
    .split(sep)
    .join('/')
    .replace(/^build\//, '');
  return Object.keys(OWN_RUNS).find((run) => path.startsWith(OWN_RUNS[run].folder));
}

/** The compiled spec files of a selection, absolute paths. */
export function select(selection, graph = new ModuleGraph()) {
  const specs = filesUnder(join(graph.build, 'test'), '.test.js');
  if (selection in OWN_RUNS) return specs.filter((file) => ownRunOf(relative(graph.build, file)) === selection);
  const suite = specs.filter((file) => !ownRunOf(relative(graph.build, file)));
  switch (selection) {
    case 'suite':
      return suite;
    case 'store':
      return suite.filter((file) => graph.usesSuiteAdapter(file));
    case 'provider':
      return suite.filter((file) => graph.touchesProvider(file));
    default:
      throw new Error(`unknown selection ${selection}: one of suite, store, provider, ${Object.keys(OWN_RUNS)}`);
  }
}

const TEST_ADAPTER_READ = /\benv(?:\.TEST_ADAPTER\b|\[\s*['"]TEST_ADAPTER['"]\s*\])/;

/**
 * What the selections rest on, as problems found (none when it holds):
 * - every file of test/ is in the folder of what it covers (test/<area>/…), none at its top;
 * - build/ holds the spec files test/ has, and no other (a deleted spec's
 *   compiled file would still run);
 * - TEST_ADAPTER is read in test/support/adapters.ts only, through suiteAdapterKind();
 * - every compiled module of test/ is loaded by a spec file, or named by
 *   .mocharc.json: a script started some other way would go unseen.
 */
export function problems(graph = new ModuleGraph()) {
  const found = [];
  for (const file of readdirSync(join(ROOT, 'test')).filter((name) => name.endsWith('.ts')))
    found.push(`test/${file} is at the top of test/: move it to the folder of what it covers (test/<area>/)`);
  const sources = filesUnder(join(ROOT, 'test'), '.test.ts').map((file) => relative(ROOT, file).replace(/\.ts$/, ''));
  const compiled = filesUnder(join(graph.build, 'test'), '.test.js').map((file) =>
    relative(graph.build, file).replace(/\.js$/, ''),
  );
  for (const file of compiled.filter((file) => !sources.includes(file)))
    found.push(`build/${file}.js has no source (a spec file moved or deleted since the build): npm run build:test`);
  for (const file of sources.filter((file) => !compiled.includes(file)))
    found.push(`${file}.ts is not compiled: npm run build:test`);

  for (const folder of ['lib', 'fixtures', 'test', 'demo', 'bench']) {
    for (const file of filesUnder(join(ROOT, folder), '.ts')) {
      const path = relative(ROOT, file);
      if (path !== `${SUITE_ADAPTER_MODULE}.ts` && TEST_ADAPTER_READ.test(readFileSync(file, 'utf8')))
        found.push(`${path} reads TEST_ADAPTER: call suiteAdapterKind() (${SUITE_ADAPTER_MODULE}.ts) instead`);
    }
  }

  const mocharc = JSON.parse(readFileSync(join(ROOT, '.mocharc.json'), 'utf8'));
  const required = (mocharc.require ?? []).map((file) => resolve(ROOT, file));
  const loaded = graph.closure([...filesUnder(join(graph.build, 'test'), '.test.js'), ...required]);
  for (const file of filesUnder(join(graph.build, 'test'), '.js').filter((file) => !loaded.has(file)))
    found.push(
      `build/${relative(graph.build, file)} is loaded by no spec file: start a script as new URL('./….js', import.meta.url), or delete it`,
    );
  return found;
}

/**
 * Most spec files wait (on timers, sockets, child processes, a browser) far longer than they
 * compute: the whole suite takes about a core for two fifths of its time. Mocha therefore runs
 * the files of a selection in TEST_JOBS worker processes (default: the machine's cores, at least
 * two), each file with the root hooks of .mocharc.json after it; TEST_JOBS=1 runs them in one
 * process, in order. A run of its own (the Redis Cluster's, on servers it starts) stays in one,
 * and so do flags that already say.
 */
function parallelFlags(selection, flags) {
  if (selection in OWN_RUNS || flags.some((flag) => /^--(parallel|jobs|no-parallel)\b|^-j$/.test(flag))) return [];
  const jobs = Number(process.env.TEST_JOBS || Math.max(2, availableParallelism()));
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error(`TEST_JOBS must be a whole number of at least 1`);
  return jobs === 1 ? [] : ['--parallel', '--jobs', String(jobs)];
}

function main([command, selection, ...flags]) {
  if (command === 'check') {
    const found = problems();
    for (const problem of found) console.error(problem);
    if (!found.length) {
      const counts = ['suite', 'store', 'provider', ...Object.keys(OWN_RUNS)].map(
        (name) => `${select(name).length} ${name}`,
      );
      console.log(`test files: ${counts.join(', ')}`);
    }
    return found.length ? 1 : 0;
  }
  if (command !== 'list' && command !== 'mocha') {
    console.error('usage: test-files.mjs list|mocha <selection> [mocha flags] | check');
    return 2;
  }
  const found = problems();
  if (found.length) {
    for (const problem of found) console.error(problem);
    return 1;
  }
  const files = select(selection).map((file) => relative(ROOT, file));
  if (!files.length) {
    console.error(`no spec file in selection ${selection}: build first (npm run build:test)`);
    return 1;
  }
  if (command === 'list') {
    console.log(files.join('\n'));
    return 0;
  }
  const mocha = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
  const ownFlags = OWN_RUNS[selection]?.flags ?? [];
  const run = spawnSync(
    process.execPath,
    [mocha, ...ownFlags, ...parallelFlags(selection, flags), ...flags, ...files],
    {
      cwd: ROOT,
      stdio: 'inherit',
    },
  );
  return run.status ?? 1;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
