/**
 * Request ids (issue 15, item 6): ingest gives every request one, logs it on each line of that
 * request and answers it in `X-Request-Id`; a job's claim answers the claiming request's id and the
 * agent sends it on every agent-API call of that job, so one grep of the id follows the job.
 *
 * A caller may send its own `X-Request-Id`; it is kept only when it is sane for a log line and a
 * header: 1 to 128 of A-Z a-z 0-9 . _ -. Anything else (empty, longer, CR/LF, NUL, a space, a
 * comma of a repeated header) is replaced by a fresh id, never cut or escaped into one.
 */
export const REQUEST_ID_HEADER = "x-request-id";
export const REQUEST_ID_MAX = 128;

const SANE = /^[A-Za-z0-9._-]{1,128}$/;

/** The sent id when it is sane, else undefined (the caller mints one). */
export const saneRequestId = (value: unknown): string | undefined => (typeof value === "string" && SANE.test(value) ? value : undefined);
