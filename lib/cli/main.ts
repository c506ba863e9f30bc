#!/usr/bin/env node
/**
 * `oidc-provider-impersonation audit verify|export`: checks or exports the
 * PostgreSQL audit trail, for operators and auditors. Needs `pg` installed.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createPostgresAuditLog, type VerificationKey } from '../audit-postgres/index.js';
import { exportTrail } from '../audit-postgres/export.js';

const USAGE = `usage:
  oidc-provider-impersonation audit verify --database-url URL [--schema S] [--table T] [--key hmac:SECRET | --key ed25519:PUBLIC_KEY.pem] [--require-checkpoints N]
  oidc-provider-impersonation audit export --database-url URL [--schema S] [--table T] [--since TIME] [--until TIME] [--format jsonl|csv]`;

async function main(argv: string[]): Promise<number> {
  const [group, command, ...rest] = argv;
  if (group !== 'audit' || (command !== 'verify' && command !== 'export')) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      'database-url': { type: 'string' },
      schema: { type: 'string' },
      table: { type: 'string' },
      key: { type: 'string' },
      'require-checkpoints': { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      format: { type: 'string', default: 'jsonl' },
    },
  });
  const connectionString = values['database-url'] ?? process.env['DATABASE_URL'];
  if (!connectionString) {
    process.stderr.write(`--database-url (or DATABASE_URL) is required\n${USAGE}\n`);
    return 2;
  }
  const every = values['require-checkpoints'] === undefined ? undefined : Number(values['require-checkpoints']);
  if (every !== undefined && !(Number.isSafeInteger(every) && every > 0)) {
    process.stderr.write("--require-checkpoints must be a positive integer (the log's checkpointEvery)\n");
    return 2;
  }
  const log = createPostgresAuditLog({
    connectionString,
    ...(values.schema ? { schema: values.schema } : {}),
    ...(values.table ? { table: values.table } : {}),
    ...(every ? { checkpointEvery: every } : {}),
  });
  try {
    if (command === 'verify') {
      const result = await log.verify({
        ...(values.key ? { key: keyOf(values.key) } : {}),
        requireCheckpoints: every !== undefined,
      });
      if (result.ok) {
        process.stdout.write(
          `ok: ${result.count} rows verified${values.key ? `, ${result.checkpoints} signed checkpoints` : ''}\n`,
        );
        return 0;
      }
      process.stdout.write(`bad row ${result.seq}: ${result.problem} (${result.count} rows verified before it)\n`);
      return 1;
    }
    const format = values.format;
    if (format !== 'jsonl' && format !== 'csv') {
      process.stderr.write('--format must be jsonl or csv\n');
      return 2;
    }
    const since = timeOf('since', values.since);
    const until = timeOf('until', values.until);
    for await (const line of exportTrail(connectionString, {
      schema: values.schema,
      table: values.table,
      since,
      until,
      format,
    })) {
      if (!process.stdout.write(line)) await new Promise((resolve) => process.stdout.once('drain', resolve));
    }
    return 0;
  } finally {
    await log.close();
  }
}

function keyOf(value: string): VerificationKey {
  const separator = value.indexOf(':');
  const kind = value.slice(0, separator);
  const material = value.slice(separator + 1);
  if (kind === 'hmac' && material) return { hmac: material };
  if (kind === 'ed25519' && material) return { ed25519: readFileSync(material, 'utf8') };
  throw new TypeError('--key must be hmac:SECRET or ed25519:PATH_TO_PUBLIC_KEY.pem');
}

function timeOf(name: string, value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const time = new Date(value);
  if (Number.isNaN(time.getTime())) throw new TypeError(`--${name} must be a time (RFC 3339)`);
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
