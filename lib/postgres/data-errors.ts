/** A data exception (SQLSTATE class 22): PostgreSQL refused a value; nothing was done and the server is fine. */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code);
}

/** One caller of a batched statement: settled with its own result or error. */
interface BatchCaller<Result> {
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/** Sends one statement for `callers`, each settled with its own result (Invariant 10); never rejects. Resolves with the failure that is not a data error, when one stopped the callers. */
export async function sendIsolatingDataErrors<Caller extends BatchCaller<Result>, Result>(
  callers: Caller[],
  send: (callers: Caller[]) => Promise<Result[]>,
): Promise<{ failure: unknown } | undefined> {
  let results: Result[];
  try {
    results = await send(callers);
  } catch (error) {
    if (!isDataError(error)) {
      for (const caller of callers) caller.reject(error);
      return { failure: error };
    }
    if (callers.length === 1) {
      callers[0]!.reject(error);
      return undefined;
    }
    const middle = Math.ceil(callers.length / 2);
    const stopped = await sendIsolatingDataErrors(callers.slice(0, middle), send);
    if (!stopped) return sendIsolatingDataErrors(callers.slice(middle), send);
    for (const caller of callers.slice(middle)) caller.reject(stopped.failure);
    return stopped;
  }
  for (const [at, caller] of callers.entries()) caller.resolve(results[at]!);
  return undefined;
}
