// The levelled logger the reconcilers are given (pino's shape, object first), so that a failed
// pass is a warning that reaches stderr, not a line nobody sees.
export interface KubeLog {
  debug(obj: Record<string, unknown>, msg: string): void;
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}
