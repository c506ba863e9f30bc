/** What `audit verify` prints of a verification: one line, for an auditor to act on. */
import type { VerifyResult } from '../audit/chain.js';

/** `signed`: a key was given, so checkpoints were counted. */
type Trail = { schema: string | undefined; table: string; signed: boolean };

/** The line to print and the exit code: 0 verified, 1 not verified (a check failed, or there was nothing to verify). */
export function verificationReport(result: VerifyResult, trail: Trail): { line: string; code: 0 | 1 } {
  if (result.ok) {
    if (result.count === 0) {
      const name = `${trail.schema === undefined ? '' : `${JSON.stringify(trail.schema)}.`}${JSON.stringify(trail.table)}`;
      return { line: `failed: the audit table ${name} has no rows: nothing to verify`, code: 1 };
    }
    const checkpoints = trail.signed ? `, ${result.checkpoints} signed checkpoints` : '';
    return { line: `ok: ${result.count} rows verified${checkpoints}`, code: 0 };
  }
  if (result.check === 'tables')
    return { line: `failed: ${result.problem}; check --schema and --table (nothing verified)`, code: 1 };
  if (result.check === 'published-head-signature')
    return { line: `bad published head (row ${result.seq}): ${result.problem} (nothing verified)`, code: 1 };
  const lead =
    result.check === 'checkpoint-signature' ? `bad checkpoint at row ${result.seq}` : `bad row ${result.seq}`;
  return { line: `${lead}: ${result.problem} (${verifiedOf(result)})`, code: 1 };
}

/** Says which rows are verified, so that the count never reads as covering the row at fault. */
function verifiedOf({ count, seq }: Extract<VerifyResult, { ok: false }>): string {
  const verified = count === 0 ? 'no row verified' : `rows 1 to ${count} verified`;
  if (count >= seq - 1) return verified;
  const unpinned = count + 1 === seq - 1 ? `row ${seq - 1} is` : `rows ${count + 1} to ${seq - 1} are`;
  return `${verified}; ${unpinned} chained but pinned by no signature that verifies`;
}
