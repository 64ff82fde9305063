/**
 * The in-script client's configuration: its arguments and environment, read once here and
 * passed down (only config.ts files read process.env). No zod: this entry must start fast.
 */
export interface ClientConfig {
  /** The words after `flow`, e.g. `["step", "build", "--", "make"]`. */
  argv: string[];
  env: Record<string, string | undefined>;
}

export const readClientConfig = (): ClientConfig => ({ argv: process.argv.slice(2), env: process.env });
