/**
 * Polls `check` every 20 ms until it holds; throws, naming `what`, after `timeoutMs`. The
 * controller's own copy of test/src/support/wait.ts's waitFor: the controller workspace cannot
 * import the test workspace (test depends on the server that depends on the controller).
 */
export const waitFor = async (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
