#!/usr/bin/env node
// `npm run test:only -- <area | folder | file>… [mocha flags]`: some spec files,
// without building the whole tree first. An area is a folder of test/
// (`exchange` is test/exchange/). What the named files load (test/support/,
// fixtures/, lib/, demo/…) is transpiled into build/, where `npm test` puts it,
// file by file and only when the TypeScript is newer than its JavaScript; then
// mocha runs them with .mocharc.json, on the store TEST_ADAPTER names. It does
// not type-check: `npm run typecheck`, or the editor, does.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { OWN_RUNS, ROOT, filesUnder, ownRunOf, runtimeSpecifiers } from './test-files.mjs';

const require = createRequire(import.meta.url);
const BUILD = join(ROOT, 'build');

/** The spec files (TypeScript, absolute) an argument names: a file, a folder, or an area of test/. */
function specsNamed(argument) {
  const candidates = [join(ROOT, 'test', argument), resolve(argument), resolve(ROOT, argument)];
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) throw new Error(`${argument}: no such file, folder or area of test/`);
  if (statSync(path).isDirectory()) return filesUnder(path, '.test.ts');
  if (!path.endsWith('.ts')) throw new Error(`${argument}: name the TypeScript source (test/…/x.test.ts)`);
  return [path];
}

/** The JavaScript tsc puts in build/ for a TypeScript file of the tree. */
function compiledPath(source) {
  return join(BUILD, relative(ROOT, source)).replace(/\.ts$/, '.js');
}

/** The TypeScript file a compiled specifier of build/ comes from, if it is one of the tree's. */
function sourceOf(compiled) {
  if (!compiled.startsWith(BUILD + sep)) return undefined;
  const source = join(ROOT, relative(BUILD, compiled)).replace(/\.js$/, '.ts');
  return existsSync(source) ? source : undefined;
}

let typescript;
const options = () => {
  const base = JSON.parse(readFileSync(join(ROOT, 'tsconfig.base.json'), 'utf8')).compilerOptions;
  // Each file alone, as tsc emits it (ECMAScript modules, the same target), with its source map.
  return { target: base.target, module: 'ESNext', sourceMap: true, esModuleInterop: true };
};

/** Transpiles `source` into build/ unless its JavaScript is newer; answers the JavaScript. */
function transpiled(source) {
  const output = compiledPath(source);
  if (existsSync(output) && statSync(output).mtimeMs >= statSync(source).mtimeMs) return readFileSync(output, 'utf8');
  typescript ??= require('typescript');
  const result = typescript.transpileModule(readFileSync(source, 'utf8'), {
    compilerOptions: options(),
    fileName: source,
    reportDiagnostics: true,
  });
  if (result.diagnostics?.length) {
    const text = typescript.formatDiagnostics(result.diagnostics, {
      getCanonicalFileName: (name) => name,
      getCurrentDirectory: () => ROOT,
      getNewLine: () => '\n',
    });
    throw new Error(`${relative(ROOT, source)}:\n${text}`);
  }
  // As tsc writes them: the map beside the JavaScript, naming the TypeScript relative to it.
  const map = {
    ...JSON.parse(result.sourceMapText),
    file: basename(output),
    sources: [relative(dirname(output), source)],
  };
  mkdirSync(dirname(output), { recursive: true });
  writeFileSync(`${output}.map`, JSON.stringify(map));
  writeFileSync(
    output,
    result.outputText.replace(/\/\/# sourceMappingURL=.*$/m, `//# sourceMappingURL=${basename(output)}.map`),
  );
  return result.outputText;
}

/** Transpiles `sources` and everything of the tree they load; answers how many files it wrote. */
function build(sources) {
  const pending = [...sources];
  const seen = new Set(sources);
  while (pending.length) {
    const source = pending.pop();
    for (const loaded of runtimeSpecifiers(transpiled(source), compiledPath(source))) {
      const next = sourceOf(loaded);
      if (next && !seen.has(next)) {
        seen.add(next);
        pending.push(next);
      }
    }
  }
}

function main(argv) {
  // The files first, then mocha's flags with their values (--grep 'a title').
  const firstFlag = argv.findIndex((argument) => argument.startsWith('-'));
  const targets = firstFlag < 0 ? argv : argv.slice(0, firstFlag);
  const flags = firstFlag < 0 ? [] : argv.slice(firstFlag);
  if (!targets.length) {
    console.error(
      'usage: npm run test:only -- <area | folder | file>… [mocha flags], e.g. npm run test:only -- exchange',
    );
    return 2;
  }
  const specs = [...new Set(targets.flatMap(specsNamed))];
  if (!specs.length) throw new Error(`no spec file (*.test.ts) in ${targets.join(', ')}`);
  const mocharc = JSON.parse(readFileSync(join(ROOT, '.mocharc.json'), 'utf8'));
  const hooks = (mocharc.require ?? []).map((file) => sourceOf(resolve(ROOT, file))).filter(Boolean);
  build([...specs, ...hooks]);

  const runs = new Set(specs.map((spec) => ownRunOf(spec)));
  const ownFlags = [...runs].flatMap((run) => (run ? OWN_RUNS[run].flags : []));
  const mocha = require.resolve('mocha/bin/mocha.js');
  const files = specs.map((spec) => relative(ROOT, compiledPath(spec)));
  return (
    spawnSync(process.execPath, [mocha, ...ownFlags, ...flags, ...files], { cwd: ROOT, stdio: 'inherit' }).status ?? 1
  );
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (error) {
  console.error(error.message);
  process.exitCode = 1;
}
