#!/usr/bin/env node
/** `oidc-provider-impersonation audit verify|export`: checks or exports the PostgreSQL audit trail (needs `pg`). */
import { parseArgs } from 'node:util';
import { publishedHeadOf } from './head.js';
import { verificationKeyOf } from './key.js';
import { outputTo } from './output.js';
import { verificationReport } from './report.js';
import { helpFor, USAGE } from './usage.js';
import { invalidCommandLine, MISSING_AUDIT_TABLE } from '../errors/standalone.js';

/** Standard output, which the reader may close early (`| head`): the command then stops writing, quietly. */
const output = outputTo(process.stdout);

async function main(argv: string[]): Promise<number> {
  const help = helpFor(argv);
  if (help !== undefined) {
    await output.write(`${help}\n`);
    return 0;
  }
  const [group, command, ...rest] = argv;
  if (group !== 'audit' || (command !== 'verify' && command !== 'export')) {
    // Named when it is a word: what else was typed (a URL with its password) is not echoed.
    const typed = group === 'audit' ? command : group;
    if (!typed || !/^\w[\w-]{0,31}$/.test(typed)) throw invalidCommandLine(USAGE);
    const name = group === 'audit' ? `audit ${typed}` : typed;
    throw invalidCommandLine(`unknown command: ${name} (the commands are audit verify and audit export)\n${USAGE}`);
  }
  const { values } = parseArgsQuietly(rest);
  const connectionString = values['database-url'] ?? process.env['DATABASE_URL'];
  if (!connectionString) throw invalidCommandLine(`--database-url (or DATABASE_URL) is required\n${USAGE}`);
  const every = values['require-checkpoints'] === undefined ? undefined : Number(values['require-checkpoints']);
  if (every !== undefined && !(Number.isSafeInteger(every) && every > 0))
    throw invalidCommandLine("--require-checkpoints must be a positive integer (the log's checkpointEvery)");
  // Loaded only now: `pg` is an optional peer dependency, and --help and usage errors need none of it.
  const [{ createPostgresAuditLog }, { exportTrail }] = await loadPostgres();
  const log = createPostgresAuditLog({
    connectionString,
    ...(values.schema ? { schema: values.schema } : {}),
    ...(values.table ? { table: values.table } : {}),
    ...(every ? { checkpointEvery: every } : {}),
  });
  try {
    if (command === 'verify') {
      const key = values.key === undefined ? undefined : verificationKeyOf(values.key);
      const heads = await Promise.all((values.head ?? []).map(publishedHeadOf));
      if (heads.length && !key)
        throw invalidCommandLine('--head needs --key: a published head is checked with the key');
      if (every !== undefined && !key)
        throw invalidCommandLine('--require-checkpoints needs --key: the checkpoints are checked with the key');
      if (key && !heads.length)
        process.stderr.write('note: without --head, rows removed from the end of the chain are not detected\n');
      const result = await log.verify({ key, head: heads, requireCheckpoints: every !== undefined });
      const trail = { schema: values.schema, table: values.table ?? 'impersonation_audit', signed: key !== undefined };
      const { line, code } = verificationReport(result, trail);
      await output.write(`${line}\n`);
      return code;
    }
    const format = values.format;
    if (format !== 'jsonl' && format !== 'csv') throw invalidCommandLine('--format must be jsonl or csv');
    const since = timeOf('since', values.since);
    const until = timeOf('until', values.until);
    const lines = exportTrail(connectionString, { schema: values.schema, table: values.table, since, until, format });
    try {
      for await (const line of lines) {
        // A reader that stops reading (`| head -1`) ends the export: leaving the loop ends the read.
        if (!(await output.write(line))) break;
      }
    } catch (error) {
      // Before any line: a wrong --schema or --table is the operator's to fix, said in one line.
      if ((error as { code?: unknown }).code !== MISSING_AUDIT_TABLE) throw error;
      process.stderr.write(`failed: ${(error as Error).message}; check --schema and --table (nothing exported)\n`);
      return 1;
    }
    return 0;
  } finally {
    await log.close();
  }
}

async function loadPostgres() {
  try {
    return await Promise.all([import('../audit-postgres/index.js'), import('../audit-postgres/export.js')]);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && String(error).includes("'pg'"))
      throw invalidCommandLine('the audit commands need the pg package: npm install pg');
    throw error;
  }
}

function parseArgsQuietly(args: string[]) {
  try {
    return parseArgs({
      args,
      options: {
        'database-url': { type: 'string' },
        schema: { type: 'string' },
        table: { type: 'string' },
        key: { type: 'string' },
        head: { type: 'string', multiple: true },
        'require-checkpoints': { type: 'string' },
        since: { type: 'string' },
        until: { type: 'string' },
        format: { type: 'string', default: 'jsonl' },
      },
    });
  } catch (error) {
    // Node's message repeats a stray argument, which may be a secret typed in the wrong place.
    if ((error as { code?: string }).code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL')
      throw invalidCommandLine('an argument without its option: each value follows its --option', error);
    // Node's message names the option only, never its value.
    if ((error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION')
      throw invalidCommandLine(`${(error as Error).message}; --help lists the options`, error);
    throw error;
  }
}

function timeOf(name: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const time = new Date(value);
  if (Number.isNaN(time.getTime())) throw invalidCommandLine(`--${name} must be a time (RFC 3339)`);
  return time;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 2;
  },
);
