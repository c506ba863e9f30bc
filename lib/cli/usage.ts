/** What the command answers to --help (-h), at the top level and for each subcommand; on stdout, exit 0. */

const VERIFY_LINES = `  oidc-provider-impersonation audit verify --database-url URL [--schema S] [--table T]
      [--key hmac-file:PATH | --key hmac-env:VARIABLE | --key ed25519:PUBLIC_KEY.pem]
      [--head HEADS_FILE | --head '{"seq":…}'] [--require-checkpoints N]`;
const EXPORT_LINES = `  oidc-provider-impersonation audit export --database-url URL [--schema S] [--table T] [--since TIME] [--until TIME] [--format jsonl|csv]`;
const CODES = `audit verify exits 0 when the trail is verified; 1 when it is not: a check failed, or there is
nothing to verify (no such table, no rows). audit export exits 0 once every row is written, or
when its reader stops reading (\`| head\`); 1 when there is no such table. Both exit 2 when the
command could not run (usage, key, head, PostgreSQL unreachable, pg missing).`;

export const USAGE = `usage:
${VERIFY_LINES}
${EXPORT_LINES}

Both only read, in a read-only transaction: neither ever creates a table.
${CODES}`;

const HELP: Record<string, string> = {
  'audit verify': `usage:
${VERIFY_LINES}

Checks the audit trail on PostgreSQL: its hash chain, and with --key its signed checkpoints and
the published heads given with --head. Prints one line. Only reads, in a read-only transaction.
  --database-url URL       the database (default: the DATABASE_URL environment variable)
  --schema S, --table T    where the trail is (default: the search path, impersonation_audit)
  --key FORM:PLACE         the verification key, by where it is: never the HMAC secret itself
  --head FILE|JSON         a published head, or a heads file (its last line); may be repeated
  --require-checkpoints N  the log's checkpointEvery: every N rows must have a signed checkpoint
Exits 0 when the trail is verified; 1 when it is not: a check failed, or there is nothing to
verify (no such table, no rows); 2 when it could not run (usage, key, head, PostgreSQL
unreachable, pg missing).`,
  'audit export': `usage:
${EXPORT_LINES}

Writes the audit trail on PostgreSQL to standard output, in order, hashes included so that a
copy can be checked. Only reads, in one read-only transaction (the rows as of one instant).
  --database-url URL       the database (default: the DATABASE_URL environment variable)
  --schema S, --table T    where the trail is (default: the search path, impersonation_audit)
  --since T, --until T     the rows at or after since, and before until (RFC 3339 times)
  --format jsonl|csv       one JSON object a line (default), or CSV with a header
Exits 0 once every row is written, or when its reader stops reading (\`| head\`); 1 when there
is no such table (nothing written); 2 when it could not run (usage, PostgreSQL unreachable, pg
missing).`,
};

/** The help of the subcommand typed (`audit verify --help`), or of the command as a whole. */
export function helpFor(argv: readonly string[]): string | undefined {
  if (!argv.some((argument) => argument === '--help' || argument === '-h')) return undefined;
  const [group, command] = argv;
  if (group !== 'audit') return USAGE;
  return HELP[`audit ${command}`] ?? USAGE;
}
