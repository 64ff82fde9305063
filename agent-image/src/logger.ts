/**
 * The agent's diagnostics: one JSON object per line, object first, like pino's, without pino (the
 * agent starts once per job and must start fast). Injected everywhere; never a module singleton.
 * Never give it a token, an env value, a mask or step output.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Logger {
  debug(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
  child(fields: Record<string, unknown>): Logger;
}

const RANK: Record<LogLevel, number> = { debug: 20, info: 30, warn: 40, error: 50 };

const serialize = (value: unknown): unknown =>
  value instanceof Error
    ? {
        type: value.name,
        message: value.message,
        ...("code" in value ? { code: value.code } : {}),
        ...(value.cause ? { cause: serialize(value.cause) } : {}),
      }
    : value;

export const createLogger = (write: (line: string) => void, base: Record<string, unknown> = {}, minLevel: LogLevel = "info"): Logger => {
  const emit = (level: LogLevel, fields: Record<string, unknown>, msg: string): void => {
    if (RANK[level] < RANK[minLevel]) return;
    const record: Record<string, unknown> = { level, time: Date.now(), ...base };
    for (const [k, v] of Object.entries(fields)) record[k] = serialize(v);
    record["msg"] = msg;
    write(`${JSON.stringify(record)}\n`);
  };
  return {
    debug: (f, m) => emit("debug", f, m),
    info: (f, m) => emit("info", f, m),
    warn: (f, m) => emit("warn", f, m),
    error: (f, m) => emit("error", f, m),
    child: (fields) => createLogger(write, { ...base, ...fields }, minLevel),
  };
};

/** For tests and callers that want no diagnostics. */
export const silentLogger: Logger = createLogger(() => undefined, {}, "error");
