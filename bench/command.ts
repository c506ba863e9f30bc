/**
 * How the bench's commands (run.ts, scale-out.ts) end: a main that returns
 * the problems it found, each printed as an ERROR line; a problem or a thrown
 * error sets the exit code to 1.
 */
export async function runCommand(
  name: string,
  main: (argv: readonly string[]) => Promise<readonly string[]>,
): Promise<void> {
  try {
    const problems = await main(process.argv.slice(2));
    for (const problem of problems) console.error(`ERROR: ${problem}`);
    if (problems.length) process.exitCode = 1;
  } catch (error) {
    console.error(`${name} failed:`, error);
    process.exitCode = 1;
  }
}
