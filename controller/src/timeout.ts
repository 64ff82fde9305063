/**
 * `p`, or a rejection `no answer within <s> s` once `ms` passed (the timer cleared either way). The
 * work behind `p` is not cancelled: for a read whose late answer is simply dropped.
 */
export const withTimeout = async <T>(p: Promise<T>, ms: number): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
};
